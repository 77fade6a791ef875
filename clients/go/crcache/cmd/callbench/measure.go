package main

// How the calls are timed: each kind back to back on one caller, in slices that alternate with
// the other kinds; the latency of every call, this process's CPU time (getrusage) and
// allocations (runtime/metrics), the sidecar's CPU time, and a CPU profile of each slice.

import (
	"bytes"
	"context"
	"fmt"
	"os"
	"path/filepath"
	"runtime"
	"runtime/metrics"
	"runtime/pprof"
	"sort"
	"strings"
	"syscall"
	"time"

	"github.com/google/pprof/profile"
)

const (
	// slices is how many parts each kind's measuring time is cut into.
	slices = 5
	// warmup is each kind's unrecorded time before the first slice.
	warmup = 500 * time.Millisecond
	// clockTick is the unit of /proc/PID/stat's CPU times (USER_HZ, 100 on Linux).
	clockTick = 10 * time.Millisecond
)

// tally is what the slices of one kind add up to.
type tally struct {
	lat        []time.Duration
	objects    int
	cpu        time.Duration // this process
	sidecarCPU uint64        // clock ticks
	allocBytes uint64
	allocs     uint64
	profiles   []*profile.Profile
}

func (b *bench) measure(ctx context.Context, total time.Duration, dir string) (*report, error) {
	calls := b.calls()
	for _, c := range calls {
		if err := runFor(ctx, c, warmup, nil); err != nil {
			return nil, fmt.Errorf("%s: %w", c.name, err)
		}
	}
	load0 := loadAverage()
	tallies := make([]tally, len(calls))
	slice := total / slices
	for s := 0; s < slices; s++ {
		for k, c := range calls {
			if err := b.measureSlice(ctx, c, slice, &tallies[k]); err != nil {
				return nil, fmt.Errorf("%s: %w", c.name, err)
			}
		}
	}
	rep := &report{Pods: len(b.pods), Namespace: b.ns, JSONBytes: b.jsonSize, Apps: len(b.apps),
		Profile: profileDescription, CPUs: runtime.NumCPU(), LoadBefore: load0, LoadAfter: loadAverage(),
		Seconds: total.Seconds(), Go: runtime.Version()}
	for k, c := range calls {
		row, err := summarize(c.name, &tallies[k], filepath.Join(dir, fmt.Sprintf("cpu-%d.pprof", k)))
		if err != nil {
			return nil, err
		}
		row.Short = c.short
		rep.Rows = append(rep.Rows, row)
	}
	return rep, nil
}

// measureSlice runs one kind for d, profiled, and adds its figures to t.
func (b *bench) measureSlice(ctx context.Context, c call, d time.Duration, t *tally) error {
	var buf bytes.Buffer
	if err := pprof.StartCPUProfile(&buf); err != nil {
		return err
	}
	cpu0, ticks0, m0 := processCPU(), b.sidecarTicks(), allocations()
	err := runFor(ctx, c, d, t)
	cpu1, ticks1, m1 := processCPU(), b.sidecarTicks(), allocations()
	pprof.StopCPUProfile()
	if err != nil {
		return err
	}
	p, err := profile.Parse(&buf)
	if err != nil {
		return fmt.Errorf("read this slice's CPU profile: %w", err)
	}
	t.profiles = append(t.profiles, p)
	t.cpu += cpu1 - cpu0
	t.sidecarCPU += ticks1 - ticks0
	t.allocBytes += m1[0] - m0[0]
	t.allocs += m1[1] - m0[1]
	return nil
}

// runFor calls back to back for d; with t, it records each call's latency and objects.
func runFor(ctx context.Context, c call, d time.Duration, t *tally) error {
	end := time.Now().Add(d)
	for i := 0; ; i++ {
		start := time.Now()
		if !start.Before(end) {
			return nil
		}
		n, err := c.do(ctx, i)
		if err != nil {
			return err
		}
		if t != nil {
			t.lat = append(t.lat, time.Since(start))
			t.objects += n
		}
	}
}

func (b *bench) sidecarTicks() uint64 {
	n, err := b.sidecar.cpuTicks()
	if err != nil {
		fmt.Fprintf(os.Stderr, "callbench: the sidecar's CPU time: %v\n", err)
	}
	return n
}

// processCPU is this process's user and system CPU time so far.
func processCPU() time.Duration {
	var ru syscall.Rusage
	if err := syscall.Getrusage(syscall.RUSAGE_SELF, &ru); err != nil {
		return 0
	}
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}

// allocations are the bytes and objects this process has allocated so far.
func allocations() [2]uint64 {
	m := []metrics.Sample{{Name: "/gc/heap/allocs:bytes"}, {Name: "/gc/heap/allocs:objects"}}
	metrics.Read(m)
	return [2]uint64{m[0].Value.Uint64(), m[1].Value.Uint64()}
}

// summarize turns a kind's tally into its row, and writes its merged CPU profile to path.
func summarize(name string, t *tally, path string) (row, error) {
	n := len(t.lat)
	if n == 0 {
		return row{}, fmt.Errorf("%s: no call completed", name)
	}
	sort.Slice(t.lat, func(i, j int) bool { return t.lat[i] < t.lat[j] })
	q := func(p float64) float64 { return micros(t.lat[min(n-1, int(p*float64(n)))]) }
	var sum time.Duration
	for _, l := range t.lat {
		sum += l
	}
	r := row{Name: name, Calls: n, P50: q(0.50), P90: q(0.90), P99: q(0.99), Max: micros(t.lat[n-1]),
		Mean:           micros(sum / time.Duration(n)),
		ObjectsPerCall: float64(t.objects) / float64(n),
		CPUPerCall:     micros(t.cpu / time.Duration(n)),
		SidecarCPU:     micros(time.Duration(t.sidecarCPU) * clockTick / time.Duration(n)),
		AllocsPerCall:  float64(t.allocs) / float64(n),
		KiBPerCall:     float64(t.allocBytes) / float64(n) / 1024,
		Profile:        path}
	merged, err := profile.Merge(t.profiles)
	if err != nil {
		return row{}, fmt.Errorf("%s: merge the CPU profiles: %w", name, err)
	}
	f, err := os.Create(path)
	if err != nil {
		return row{}, err
	}
	defer f.Close()
	if err := merged.Write(f); err != nil {
		return row{}, err
	}
	r.Shares, r.Top = breakdown(merged, 8)
	return r, nil
}

func micros(d time.Duration) float64 { return float64(d.Nanoseconds()) / 1e3 }

// loadAverage is /proc/loadavg's three figures.
func loadAverage() string {
	b, err := os.ReadFile("/proc/loadavg")
	if err != nil {
		return "unknown"
	}
	f := strings.Fields(string(b))
	if len(f) < 3 {
		return "unknown"
	}
	return strings.Join(f[:3], " ")
}
