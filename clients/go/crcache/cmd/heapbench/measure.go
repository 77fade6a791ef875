package main

// What a process measures of itself: Go's live heap after forced collections, and the kernel's
// resident set.

import (
	"bufio"
	"fmt"
	"os"
	"runtime"
	"runtime/metrics"
	"strconv"
	"strings"
)

// sample is the controller process's one JSON line.
type sample struct {
	Cache       string  `json:"cache"`
	Pods        int64   `json:"pods"`         // pods its pod informer delivered
	Reconciles  int     `json:"reconciles"`   // reconciles run before the sample
	Deployments int     `json:"deployments"`  // Deployments, each reconciled at least once before the sample
	SyncSeconds float64 `json:"sync_seconds"` // from the manager's creation to synced (informational)
	// FirstPassSeconds is from the manager's creation until every Deployment had been
	// reconciled once (informational).
	FirstPassSeconds float64 `json:"first_pass_seconds"`
	HeapLive         uint64  `json:"heap_live_bytes"`
	HeapObjects      uint64  `json:"heap_objects_bytes"`
	RSS              uint64  `json:"rss_bytes"`
	PeakRSS          uint64  `json:"peak_rss_bytes"`
}

// measure collects twice (the second frees what the first's finalizers released) and reads
// the live heap the collector marked, the bytes of heap objects, VmRSS and VmHWM.
//
// Decision: /gc/heap/live:bytes is what the last collection found reachable, the figure that
// depends on what the cache holds, not on when the next collection happens to run.
func measure() sample {
	runtime.GC()
	runtime.GC()
	m := []metrics.Sample{{Name: "/gc/heap/live:bytes"}, {Name: "/memory/classes/heap/objects:bytes"}}
	metrics.Read(m)
	s := sample{HeapLive: m[0].Value.Uint64(), HeapObjects: m[1].Value.Uint64()}
	status, err := procStatus(os.Getpid())
	if err == nil {
		s.RSS, s.PeakRSS = status["VmRSS"], status["VmHWM"]
	}
	return s
}

// procStatus reads the kB figures of /proc/PID/status (VmRSS, VmHWM, ...) as bytes.
func procStatus(pid int) (map[string]uint64, error) {
	f, err := os.Open(fmt.Sprintf("/proc/%d/status", pid))
	if err != nil {
		return nil, err
	}
	defer f.Close()
	out := map[string]uint64{}
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		key, rest, ok := strings.Cut(sc.Text(), ":")
		fields := strings.Fields(rest)
		if !ok || len(fields) != 2 || fields[1] != "kB" {
			continue
		}
		if kb, err := strconv.ParseUint(fields[0], 10, 64); err == nil {
			out[key] = kb * 1024
		}
	}
	return out, sc.Err()
}
