package main

import (
	"errors"
	"os"
	"path/filepath"
	"testing"
	"time"
)

// A component that exits because its port was bound meanwhile is errPortTaken, which `up`
// retries on other ports; any other exit is not.
func TestAnExitForATakenPortIsRetriedAndOthersAreNot(t *testing.T) {
	l := layout{dir: t.TempDir()}
	if err := os.MkdirAll(l.logs(), 0o755); err != nil {
		t.Fatal(err)
	}
	gone := proc{Name: "kube-apiserver", Pid: 1 << 22, Bin: "/nonexistent"} // no such process
	write := func(text string) {
		if err := os.WriteFile(filepath.Join(l.logs(), gone.Name+".log"), []byte(text), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	never := func() error { return errors.New("not ready") }
	write(`E1127 run.go:72] "command failed" err="failed to listen on 127.0.0.1:28853: bind: address already in use"`)
	if err := waitFor("kube-apiserver", time.Second, gone, never, l); !errors.Is(err, errPortTaken) {
		t.Errorf("an exit for a taken port: %v, want errPortTaken", err)
	}
	write(`E1127 run.go:72] "command failed" err="invalid flag"`)
	if err := waitFor("kube-apiserver", time.Second, gone, never, l); err == nil || errors.Is(err, errPortTaken) {
		t.Errorf("another exit: %v, want an error that is not errPortTaken", err)
	}
	a, err := freePorts(4, 0)
	if err != nil {
		t.Fatal(err)
	}
	b, err := freePorts(4, 1)
	if err != nil {
		t.Fatal(err)
	}
	if a[0] == b[0] {
		t.Errorf("a second attempt picks the same first port %d", a[0])
	}
}
