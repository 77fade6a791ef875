package main

import (
	"bufio"
	"encoding/json"
	"os"
	"reflect"
	"strings"
	"testing"
)

// No container engine here builds the Dockerfile; this holds its final stage to the image
// `make image` writes: the same user, entrypoint, default command and socket directory.
func TestTheDockerfileDeclaresTheSameImage(t *testing.T) {
	f, err := os.Open("../../../Dockerfile")
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	last := map[string]string{} // instruction → its arguments, the last stage's last word
	scan := bufio.NewScanner(f)
	for scan.Scan() {
		instruction, args, _ := strings.Cut(strings.TrimSpace(scan.Text()), " ")
		last[instruction] = strings.TrimSpace(args)
		if instruction == "COPY" && strings.Contains(args, socketDir) {
			last["COPY "+socketDir] = args
		}
	}
	if err := scan.Err(); err != nil {
		t.Fatal(err)
	}
	if !strings.HasPrefix(last["FROM"], "scratch") {
		t.Errorf("the last stage is FROM %q, want scratch", last["FROM"])
	}
	if last["USER"] != imageUser {
		t.Errorf("USER %q, want %q", last["USER"], imageUser)
	}
	for instruction, want := range map[string][]string{"ENTRYPOINT": {binaryPath}, "CMD": defaultCmd} {
		var got []string
		if err := json.Unmarshal([]byte(last[instruction]), &got); err != nil || !reflect.DeepEqual(got, want) {
			t.Errorf("%s %s, want %q in exec form", instruction, last[instruction], want)
		}
	}
	if copied := last["COPY "+socketDir]; !strings.Contains(copied, "--chown="+imageUser) {
		t.Errorf("no COPY --chown=%s makes %s the image user's: %q", imageUser, socketDir, copied)
	}
}
