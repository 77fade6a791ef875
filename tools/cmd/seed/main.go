// Command seed fills a Kubernetes cluster with realistic Pods (and their owners) fast, and
// churns them afterwards.
//
//	seed pods  --kubeconfig FILE --pods N --namespaces M [--prefix seed] [--concurrency 128] [--seed 1]
//	seed churn --kubeconfig FILE --namespaces M [--prefix seed] --rate OPS_PER_SEC --duration 30s [--seed 1] [--concurrency 32]
//	seed clean --kubeconfig FILE [--prefix seed] [--wait 5m]
//	seed dump  --pods N --namespaces M [--prefix seed] [--seed 1] [--out FILE]
//	seed nodes --etcd URL --nodes N [--seed 1] [--concurrency 64]
//
// pods creates the namespaces PREFIX-0..PREFIX-(M-1) (labelled informerd.io/seed=true), the
// owners (Deployments and their ReplicaSets, DaemonSets, StatefulSets, Jobs) and N pods owned
// by them, spread evenly over the namespaces. Pods are written with server-side apply (field
// manager informerd-seed), then their status with a second apply to the status subresource
// (field manager kubelet); --mode create writes them with create and update instead, as
// controllers and kubelets do. Every pod carries informerd.io/tier=keep or =drop. See gen.go
// for the shapes. The last line on stdout is
//
//	seeded N pods in M namespaces in Xs (Y pods/s)
//
// churn lists the pods of those namespaces and, for --duration, runs --rate operations per
// second on them: annotation updates, relabels (informerd.io/tier keep <-> drop), status
// changes (container restarts, readiness flips), deletes and re-creations of deleted pods. The
// last line on stdout is
//
//	churned N ops (U updates, L relabels, S status, D deletes, C creates) in Xs (Y ops/s)
//
// clean force-deletes the pods of the namespaces PREFIX-<n> and then the namespaces.
//
// nodes writes the Node objects node-0 .. node-(N-1), GPU nodes of about 13 KB each, straight
// into the API server's etcd (nodes.go). `seed pods --daemonsets K` lays out K DaemonSets with
// a pod on every node instead of --pods (daemonsets.go).
//
// dump needs no cluster: it writes the pods that pods would write, as the API server would
// list them (`kubectl get pods -A -o json`), with creation times spread over weeks as in a
// long-lived cluster (dump.go says what it adds and what not).
//
// Seeded pods are bound to fake nodes (node-0...) and have terminationGracePeriodSeconds 0, so
// that deleting their namespace or owner removes them although no kubelet runs (with
// --graceful they get realistic grace periods, and only deletions with grace period 0 remove
// them). Progress goes to stderr every 5 seconds.
package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"os"
	"os/signal"
	"sync"
	"syscall"
	"time"
)

func usage() {
	fmt.Fprint(os.Stderr, `usage:
  seed pods  --kubeconfig FILE --pods N --namespaces M [--prefix seed] [--concurrency 128] [--seed 1]
  seed churn --kubeconfig FILE --namespaces M [--prefix seed] --rate OPS_PER_SEC --duration 30s [--seed 1] [--concurrency 32]
  seed clean --kubeconfig FILE [--prefix seed] [--wait 5m]
  seed dump  --pods N --namespaces M [--prefix seed] [--seed 1] [--out FILE]
  seed nodes --etcd URL --nodes N [--seed 1] [--concurrency 64]

Run "seed COMMAND -h" for the flags of a command.
`)
}

func main() {
	if len(os.Args) < 2 {
		usage()
		os.Exit(2)
	}
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()

	cmd, args := os.Args[1], os.Args[2:]
	var err error
	switch cmd {
	case "pods":
		err = runPods(ctx, args)
	case "churn":
		err = runChurn(ctx, args)
	case "clean":
		err = runClean(ctx, args)
	case "dump":
		err = runDump(args)
	case "nodes":
		err = runNodes(ctx, args)
	case "-h", "-help", "--help", "help":
		usage()
		return
	default:
		fmt.Fprintf(os.Stderr, "seed: unknown command %q\n", cmd)
		usage()
		os.Exit(2)
	}
	if errors.Is(err, flag.ErrHelp) {
		return
	}
	if errors.Is(err, errUsage) {
		os.Exit(2)
	}
	if err != nil {
		fmt.Fprintf(os.Stderr, "seed %s: error: %v\n", cmd, err)
		os.Exit(1)
	}
}

var errUsage = errors.New("usage error")

// commonFlags are shared by all commands.
type commonFlags struct {
	kubeconfig  string
	prefix      string
	connections int
	timeout     time.Duration
}

func (c *commonFlags) register(fs *flag.FlagSet) {
	fs.StringVar(&c.kubeconfig, "kubeconfig", os.Getenv("KUBECONFIG"), "kubeconfig file (default $KUBECONFIG)")
	fs.StringVar(&c.prefix, "prefix", "seed", "namespace name prefix: namespaces are PREFIX-0..PREFIX-(M-1)")
	fs.IntVar(&c.connections, "connections", 2, "number of HTTP/2 connections to the API server")
	fs.DurationVar(&c.timeout, "request-timeout", 60*time.Second, "timeout of one API request")
}

func (c *commonFlags) check(fs *flag.FlagSet) error {
	if c.kubeconfig == "" {
		return usageError(fs, "--kubeconfig is required")
	}
	if !isDNSLabelPrefix(c.prefix) {
		return usageError(fs, "--prefix %q is not a valid namespace name prefix", c.prefix)
	}
	if c.connections < 1 {
		return usageError(fs, "--connections must be at least 1")
	}
	return nil
}

// isSet reports whether the flag name was given on the command line.
func isSet(fs *flag.FlagSet, name string) bool {
	set := false
	fs.Visit(func(f *flag.Flag) { set = set || f.Name == name })
	return set
}

func usageError(fs *flag.FlagSet, format string, args ...any) error {
	fmt.Fprintf(os.Stderr, "seed %s: %s\n", fs.Name(), fmt.Sprintf(format, args...))
	fs.Usage()
	return errUsage
}

func isDNSLabelPrefix(s string) bool {
	if s == "" || len(s) > 50 {
		return false
	}
	for i, c := range s {
		switch {
		case c >= 'a' && c <= 'z', c >= '0' && c <= '9':
		case c == '-' && i > 0 && i < len(s)-1:
		default:
			return false
		}
	}
	return true
}

// progress prints a line to stderr every interval until the returned function is called;
// that function (which may be called more than once) returns once no more line will be printed.
func progress(interval time.Duration, line func(elapsed time.Duration) string) (stop func()) {
	start := time.Now()
	done, exited := make(chan struct{}), make(chan struct{})
	go func() {
		defer close(exited)
		t := time.NewTicker(interval)
		defer t.Stop()
		for {
			select {
			case <-done:
				return
			case <-t.C:
				fmt.Fprintln(os.Stderr, line(time.Since(start)))
			}
		}
	}()
	var once sync.Once
	return func() { once.Do(func() { close(done) }); <-exited }
}
