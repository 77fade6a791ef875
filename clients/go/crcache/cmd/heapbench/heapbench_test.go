package main

// The benchmark's short form, run by `make test` against its control plane: a few hundred
// pods, one and three controllers, the default cache against the informerd adapter. It asserts
// only what the benchmark exists to show (three processes with their own caches hold more than
// three over one sidecar), never timing; `make bench-adapters` gives the figures.

import (
	"context"
	"fmt"
	"os"
	"os/exec"
	"strings"
	"testing"
	"time"

	"informerd.io/clients/go/internal/testenv"
)

// TestMain lets the test binary be the controller processes the benchmark starts.
func TestMain(m *testing.M) {
	if os.Getenv(childEnv) != "" {
		main()
		return
	}
	os.Exit(m.Run())
}

const childEnv = "HEAPBENCH_TEST_CHILD"

const shortPods = 300

func TestThreeOwnCachesHoldMoreThanThreeAdapters(t *testing.T) {
	e := testenv.Setup(t, "ihb", "heapbench")
	if e.SeedBin == "" {
		t.Fatal("INFORMERD_SEED_BIN must be set (make test sets it): the test seeds realistic pods")
	}
	prefix := "ihb-" + testenv.RandSuffix()
	t.Cleanup(func() {
		out, err := exec.Command(e.SeedBin, "clean", "--kubeconfig", e.Kubeconfig, "--prefix", prefix).CombinedOutput()
		if err != nil {
			t.Logf("seed clean %s: %v\n%s", prefix, err, out)
		}
	})
	out, err := exec.Command(e.SeedBin, "pods", "--kubeconfig", e.Kubeconfig, "--pods", fmt.Sprint(shortPods),
		"--namespaces", "2", "--prefix", prefix).CombinedOutput()
	if err != nil {
		t.Fatalf("seed: %v\n%s", err, out)
	}
	self, err := os.Executable()
	if err != nil {
		t.Fatal(err)
	}
	t.Setenv(childEnv, "1")
	b := &bench{kubeconfig: e.Kubeconfig, informerd: e.Bin, self: self,
		namespaces: []string{prefix + "-0", prefix + "-1"}, dir: t.TempDir(),
		hold: time.Second, timeout: 2 * time.Minute}
	ctx := context.Background()
	rs, err := b.measure(ctx, shortPods, []int{1, 3}, []string{cacheDefault, cacheInformerd})
	if err != nil {
		t.Fatalf("%v\nlogs in %s", err, b.dir)
	}
	t.Logf("\n%s\n%s", table(rs), passTable(rs))
	three := map[string]result{}
	for _, r := range rs {
		if r.Controllers == 3 {
			three[r.Cache] = r
		}
		if len(r.Processes) != r.Controllers {
			t.Errorf("%d × %s: %d samples", r.Controllers, r.Cache, len(r.Processes))
		}
	}
	own, adapter := three[cacheDefault], three[cacheInformerd]
	if own.heap() <= adapter.heap() {
		t.Errorf("3 controllers with their own caches hold %d bytes of heap, not more than 3 over informerd (%d): %s",
			own.heap(), adapter.heap(), strings.TrimSpace(table(rs)))
	}
	if adapter.Sidecar == nil || adapter.Sidecar.Allocated == 0 || adapter.Sidecar.RSS == 0 {
		t.Errorf("no figures of the sidecar's memory: %+v", adapter.Sidecar)
	}
}
