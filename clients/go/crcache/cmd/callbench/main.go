// Command callbench measures what one read costs a Go controller over informerd, end to end:
// a Get of one pod and a List of the 5 pods of one app by label selector, from the gRPC call to
// the decoded object, for each way a Go program reads (the plain client raw, unstructured and
// typed; crcache under controller-runtime's client, what a reconciler calls), beside an empty
// call on the same connection (issue 34, "the per-call cost").
//
//	callbench --kubeconfig FILE --informerd BIN --seed BIN [--pods 5000] [--seconds 5] [--out benches/results/calls]
//
// It seeds --pods of the seeder's realistic pods (Deployments' pods and the others the seeder
// makes) into one namespace of its own, starts one informerd over that namespace with the
// controller profile of benches/serving.rs (keep metadata, spec.nodeName, status.phase,
// status.conditions, status.podIP; drop metadata.managedFields; an index on spec.nodeName and
// the label index), and calls on one connection, one caller, back to back. Each kind runs
// --seconds in all, in slices alternating with the other kinds, so that the machine's background
// load weighs on every kind alike. For each kind it prints p50/p90/p99 latency, the CPU of this
// process and of the sidecar per call, Go's allocations per call, and where this process's CPU
// went (a CPU profile per kind, its samples sorted into decode, gRPC, crcache's own work, ...).
// OUT.md and OUT.json hold the figures; the profiles are left in --dir for `go tool pprof`.
// The namespace is deleted at the end (seed clean).
package main

import (
	"context"
	"flag"
	"fmt"
	"os"
	"os/signal"
	"path/filepath"
	"syscall"
	"time"
)

type flags struct {
	kubeconfig, informerd, seed, out, dir string
	pods                                  int
	seconds                               float64
	keep                                  bool
}

func main() {
	var f flags
	fs := flag.NewFlagSet("callbench", flag.ExitOnError)
	fs.StringVar(&f.kubeconfig, "kubeconfig", firstSet(os.Getenv("INFORMERD_KUBECONFIG"), os.Getenv("KUBECONFIG")),
		"kubeconfig of the control plane to seed and watch (default $INFORMERD_KUBECONFIG, else $KUBECONFIG)")
	fs.StringVar(&f.informerd, "informerd", "", "the informerd binary (a release build: its serving is measured)")
	fs.StringVar(&f.seed, "seed", "", "the project's seeder (tools/cmd/seed, built by `make tools`)")
	fs.IntVar(&f.pods, "pods", 5000, "pods seeded into the benchmark's one namespace")
	fs.Float64Var(&f.seconds, "seconds", 5, "measuring time of each kind of call")
	fs.StringVar(&f.out, "out", "benches/results/calls", "results: OUT.md and OUT.json")
	fs.StringVar(&f.dir, "dir", ".cache/callbench", "the sidecar's configuration, socket and log, and the CPU profiles")
	fs.BoolVar(&f.keep, "keep-namespace", false, "leave the seeded namespace (delete it with `seed clean --prefix P`)")
	_ = fs.Parse(os.Args[1:])
	if err := check(f); err != nil {
		fmt.Fprintf(os.Stderr, "callbench: %v\n", err)
		os.Exit(2)
	}
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	if err := run(ctx, f); err != nil {
		fmt.Fprintf(os.Stderr, "callbench: %v\n", err)
		os.Exit(1)
	}
}

func check(f flags) error {
	switch {
	case f.kubeconfig == "":
		return fmt.Errorf("--kubeconfig is required (or $INFORMERD_KUBECONFIG): the control plane to seed and watch")
	case f.informerd == "":
		return fmt.Errorf("--informerd is required: the informerd binary, e.g. target/release/informerd")
	case f.seed == "":
		return fmt.Errorf("--seed is required: the seeder, e.g. .cache/bin/seed (make tools)")
	case f.pods < 5:
		return fmt.Errorf("--pods %d: at least 5, the size of the listed app", f.pods)
	case f.seconds <= 0:
		return fmt.Errorf("--seconds %g: must be positive", f.seconds)
	}
	return nil
}

func firstSet(vals ...string) string {
	for _, v := range vals {
		if v != "" {
			return v
		}
	}
	return ""
}

// run seeds, starts the sidecar, measures, reports, and cleans up.
func run(ctx context.Context, f flags) error {
	dir, err := filepath.Abs(f.dir)
	if err != nil {
		return err
	}
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return err
	}
	prefix := fmt.Sprintf("callbench-%d", os.Getpid())
	ns := prefix + "-0"
	if !f.keep {
		defer cleanNamespace(f.seed, f.kubeconfig, prefix)
	}
	start := time.Now()
	if err := seedPods(ctx, f.seed, f.kubeconfig, prefix, f.pods); err != nil {
		return err
	}
	fmt.Fprintf(os.Stderr, "seeded %d pods into %s in %.0f s\n", f.pods, ns, time.Since(start).Seconds())
	sc, err := startSidecar(ctx, f.informerd, f.kubeconfig, dir, ns, 10*time.Minute)
	if err != nil {
		return err
	}
	defer sc.Stop()
	b, err := newBench(ctx, f.kubeconfig, sc, ns)
	if err != nil {
		return err
	}
	defer b.close()
	rep, err := b.measure(ctx, time.Duration(f.seconds*float64(time.Second)), dir)
	if err != nil {
		return err
	}
	rep.Command = "make bench-calls"
	md := rep.markdown()
	fmt.Print(md)
	return rep.write(f.out, md)
}
