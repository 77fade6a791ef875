package main

import (
	"strings"
	"testing"
)

// The reconcile phase is the slowest process's first pass minus its sync, and the ratio is
// informerd's against the default cache's, per pod and controller count, rows in order.
func TestPassTableGivesEachCachesReconcilePhaseAndTheRatio(t *testing.T) {
	proc := func(sync, pass float64) sample { return sample{SyncSeconds: sync, FirstPassSeconds: pass} }
	rs := []result{
		{Pods: 50, Controllers: 1, Cache: cacheDefault, Processes: []sample{proc(1, 5)}},
		{Pods: 50, Controllers: 1, Cache: cacheInformerd, Processes: []sample{proc(0.5, 4.5)}},
		{Pods: 10, Controllers: 3, Cache: cacheDefault, Processes: []sample{proc(2, 4), proc(3, 7)}},
		{Pods: 10, Controllers: 3, Cache: cacheInformerd, Processes: []sample{proc(1, 2), proc(1, 3)}},
	}
	got := passTable(rs)
	for _, want := range []string{
		"| 10 | 3 | 7.0 s (3.0 s), 4.0 s | 3.0 s (1.0 s), 2.0 s | 0.50× |",
		"| 50 | 1 | 5.0 s (1.0 s), 4.0 s | 4.5 s (0.5 s), 4.0 s | 1.00× |",
	} {
		if !strings.Contains(got, want) {
			t.Errorf("no row %q in\n%s", want, got)
		}
	}
	if strings.Index(got, "| 10 |") > strings.Index(got, "| 50 |") {
		t.Errorf("rows not in pod order:\n%s", got)
	}
}
