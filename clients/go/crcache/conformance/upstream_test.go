package cache_test

// The record of what the vendored files change: they must differ from controller-runtime's
// own, in the module cache, by exactly upstream.patch, which UPSTREAM.md explains change by
// change. A change to a vendored file without the patch (or the patch without the file) fails
// here. After a deliberate change, write the patch again and explain it in UPSTREAM.md:
//
//	CRCACHE_UPDATE_UPSTREAM_PATCH=1 go test -run TestUpstreamPatchIsTheWholeChange .

import (
	"encoding/json"
	"errors"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"testing"
)

// upstreamModule is the release whose pkg/cache tests are vendored here.
const upstreamModule = "sigs.k8s.io/controller-runtime"
const upstreamVersion = "v0.24.1"

// vendored are the files copied from upstream's pkg/cache; notVendored, its other test files,
// with why (UPSTREAM.md).
var (
	vendored    = []string{"cache_suite_test.go", "cache_test.go", "informer_cache_test.go"}
	notVendored = map[string]string{
		"defaulting_test.go":          "tests unexported functions of the default cache (package cache)",
		"informer_cache_unit_test.go": "tests unexported functions of the default cache (package cache)",
	}
)

func TestUpstreamPatchIsTheWholeChange(t *testing.T) {
	upstream := upstreamDir(t)
	var patch strings.Builder
	for _, f := range vendored {
		// diff exits 1 when the files differ: only its output counts.
		out, err := exec.Command("diff", "-u", "--label", "upstream/pkg/cache/"+f, "--label", f,
			filepath.Join(upstream, f), f).Output()
		var exit *exec.ExitError
		if err != nil && !(errors.As(err, &exit) && exit.ExitCode() == 1) {
			t.Fatalf("diff %s: %v", f, err)
		}
		patch.Write(out)
	}
	if os.Getenv("CRCACHE_UPDATE_UPSTREAM_PATCH") != "" {
		if err := os.WriteFile("upstream.patch", []byte(patch.String()), 0o644); err != nil {
			t.Fatal(err)
		}
		t.Log("wrote upstream.patch: explain each change in UPSTREAM.md")
		return
	}
	want, err := os.ReadFile("upstream.patch")
	if err != nil {
		t.Fatal(err)
	}
	if patch.String() != string(want) {
		t.Errorf("the vendored files differ from %s@%s's by something other than upstream.patch.\n"+
			"If the change is deliberate, run CRCACHE_UPDATE_UPSTREAM_PATCH=1 go test -run %s . and "+
			"explain it in UPSTREAM.md. The diff now:\n%s", upstreamModule, upstreamVersion, t.Name(), patch.String())
	}
}

func TestUpstreamTestFilesAreVendoredOrExplained(t *testing.T) {
	upstream := upstreamDir(t)
	files, err := filepath.Glob(filepath.Join(upstream, "*_test.go"))
	if err != nil {
		t.Fatal(err)
	}
	for _, f := range files {
		name := filepath.Base(f)
		if !slices.Contains(vendored, name) && notVendored[name] == "" {
			t.Errorf("%s@%s's pkg/cache/%s is neither vendored nor listed as not applicable", upstreamModule, upstreamVersion, name)
		}
	}
}

// The vendored specs are upstreamVersion's: the suite must build against that release.
func TestUpstreamReleaseIsTheOneBuilt(t *testing.T) {
	out, err := exec.Command("go", "list", "-m", "-f", "{{.Version}}", upstreamModule).Output()
	if err != nil {
		t.Fatalf("go list -m %s: %v", upstreamModule, err)
	}
	if v := strings.TrimSpace(string(out)); v != upstreamVersion {
		t.Errorf("the suite builds against %s %s but vendors the tests of %s: vendor that release's "+
			"pkg/cache tests (UPSTREAM.md says how)", upstreamModule, v, upstreamVersion)
	}
}

// upstreamDir is upstream's pkg/cache in the module cache (downloaded if missing).
func upstreamDir(t *testing.T) string {
	t.Helper()
	out, err := exec.Command("go", "mod", "download", "-json", upstreamModule+"@"+upstreamVersion).Output()
	if err != nil {
		t.Fatalf("go mod download %s@%s: %v", upstreamModule, upstreamVersion, err)
	}
	var m struct{ Dir string }
	if err := json.Unmarshal(out, &m); err != nil || m.Dir == "" {
		t.Fatalf("go mod download %s@%s: no directory in %s", upstreamModule, upstreamVersion, out)
	}
	return filepath.Join(m.Dir, "pkg", "cache")
}
