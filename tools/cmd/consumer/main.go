// Command consumer is one of the ten consumer processes of the NVSentinel benchmark (`make
// bench-nvsentinel`, benches/nvsentinel.rs). NVIDIA's NVSentinel runs about ten central
// components at 100,000 GPU nodes, each with private Node and Pod informer caches: 51 GB
// together. The benchmark puts one informerd in front of the nodes and the 1.4 million
// DaemonSet pods and starts ten of these processes beside it, each playing one component's
// access pattern through informerd instead of a cache of its own; it reads their memory
// (VmRSS, VmHWM) from /proc. So a consumer holds what its role needs and nothing more: never a
// copy of every object.
//
//	consumer --socket PATH --role ROLE --nodes N [--pods-per-node 14] [--selector SEL] [--rate R]
//
// The roles (roles.go):
//
//	nodes         an Informer of all nodes; counts its events, keeps nothing
//	pods-by-node  --rate times a second: List a random node's pods through the `node` index of
//	              `pods` (exactly --pods-per-node, all on that node) and Get the node
//	pod-keys      the key queue (WatchKeys) over all pods: drains the initial keys, then Gets
//	              the pod of each later key (at most --rate a second)
//	daemonset     an Informer of the pods matching --selector (one DaemonSet's pods)
//
// What the benchmark reads (keep it exact: benches/nvsentinel.rs parses it):
//
//	stdout, once, when the initial state is in:  ready role=ROLE objects=N
//	stdout, on SIGTERM or SIGINT, then exit 0:    {"role":"...","objects":N,"events":N,"calls":N,"errors":N}
//	stderr:                                       consumer: WHAT WENT WRONG
//
// objects is the initial state's size (the informer's objects, the initial keys, the pods of the
// first List); events the informer events or keys after ready; calls the List and Get calls;
// errors the failed calls and wrong answers. A broken stream or a relist that the client
// handles by itself is not an error. A start-up error (a bad flag, informerd unreachable or
// without the resource, a selector it refuses) exits 2.
//
// Decision: a module of its own (as tools/cmd/node-agent), so that tools/go.mod, pinned to
// Kubernetes' dependencies, does not take the client's.
package main

import (
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"os/signal"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"time"

	informerd "informerd.io/clients/go"
)

const usage = "usage: consumer --socket PATH --role nodes|pods-by-node|pod-keys|daemonset --nodes N " +
	"[--pods-per-node 14] [--selector LABELSELECTOR] [--rate 20]"

// config is the command line.
type config struct {
	socket      string
	role        string
	nodes       int
	podsPerNode int
	selector    string
	rate        float64
}

func main() { os.Exit(run(os.Args[1:])) }

func run(args []string) int {
	cfg, err := parseFlags(args)
	if err != nil {
		fmt.Fprintf(os.Stderr, "consumer: %v\n", err)
		return 2
	}
	ctx, stop := signal.NotifyContext(context.Background(), syscall.SIGTERM, syscall.SIGINT)
	defer stop()
	c, err := connect(ctx, cfg)
	if err != nil {
		fmt.Fprintf(os.Stderr, "consumer: %v\n", err)
		return 2
	}
	defer func() { _ = c.Close() }()

	t := &tally{role: cfg.role}
	done := make(chan error, 1)
	go func() { done <- roles[cfg.role](ctx, c, cfg, t) }()
	select {
	case <-ctx.Done():
		// Let the role count what it finished; a call in flight ends with the context.
		select {
		case <-done:
		case <-time.After(3 * time.Second):
		}
	case err := <-done:
		if ctx.Err() == nil {
			if err == nil {
				err = errors.New("the role ended by itself")
			}
			fmt.Fprintf(os.Stderr, "consumer: %s: %v\n", cfg.role, err)
			if !t.isReady() {
				// A refusal before the initial state (a selector or index informerd refuses)
				// is the command line's or the configuration's to fix.
				return 2
			}
			// Decision: after ready, a role that stopped (the client gave up: a permanent
			// refusal) is an error of the run, not a crash: the process waits for its signal so
			// that the benchmark still reads its memory and its report, which counts it.
			t.errors.Add(1)
			<-ctx.Done()
		}
	}
	t.report()
	return 0
}

// parseFlags reads the command line; its errors name the flag to fix.
func parseFlags(args []string) (config, error) {
	var cfg config
	fs := flag.NewFlagSet("consumer", flag.ContinueOnError)
	// The flag package's own messages are replaced by ours, which begin with "consumer: ".
	fs.SetOutput(io.Discard)
	fs.StringVar(&cfg.socket, "socket", "", "informerd's unix socket")
	fs.StringVar(&cfg.role, "role", "", "nodes, pods-by-node, pod-keys or daemonset")
	fs.IntVar(&cfg.nodes, "nodes", 0, "how many nodes exist: node-0 ... node-(N-1)")
	fs.IntVar(&cfg.podsPerNode, "pods-per-node", 14, "the pods a node's List must return (pods-by-node)")
	fs.StringVar(&cfg.selector, "selector", "", "the label selector of the pods to follow (daemonset)")
	fs.Float64Var(&cfg.rate, "rate", 20, "calls a second of the looping roles (pods-by-node rounds, pod-keys Gets)")
	if err := fs.Parse(args); err != nil {
		if errors.Is(err, flag.ErrHelp) {
			return cfg, errors.New(usage)
		}
		return cfg, fmt.Errorf("%v (%s)", err, usage)
	}
	switch {
	case fs.NArg() > 0:
		return cfg, fmt.Errorf("unexpected argument %q (%s)", fs.Arg(0), usage)
	case cfg.socket == "":
		return cfg, fmt.Errorf("--socket is required: the path of informerd's unix socket (%s)", usage)
	case roles[cfg.role] == nil:
		return cfg, fmt.Errorf("--role %q: want one of %s", cfg.role, strings.Join(roleNames(), ", "))
	case cfg.nodes < 0 || cfg.role == "pods-by-node" && cfg.nodes == 0:
		return cfg, fmt.Errorf("--nodes %d: the role %s needs the number of nodes (node-0 ... node-(N-1)), at least 1", cfg.nodes, cfg.role)
	case cfg.podsPerNode < 0:
		return cfg, fmt.Errorf("--pods-per-node %d: must not be negative", cfg.podsPerNode)
	case !(cfg.rate > 0):
		return cfg, fmt.Errorf("--rate %v: must be above 0 (calls a second)", cfg.rate)
	case cfg.role == "daemonset" && cfg.selector == "":
		return cfg, errors.New("--selector is required for --role daemonset: the label selector of one DaemonSet's pods, e.g. app.kubernetes.io/name=node-exporter")
	case cfg.role != "daemonset" && cfg.selector != "":
		// Decision: refused rather than ignored, so that a driver passing it to the wrong
		// role learns it instead of measuring something else.
		return cfg, fmt.Errorf("--selector is only for --role daemonset, not %s", cfg.role)
	}
	return cfg, nil
}

// connect dials the socket and asks informerd for the status of each resource the role reads:
// informerd.Dial connects lazily, so without this an unreachable sidecar or a missing resource
// would show only as the role's first failed call, or never (an Informer waits for the sidecar).
func connect(ctx context.Context, cfg config) (*informerd.Client, error) {
	if _, err := os.Stat(cfg.socket); err != nil {
		return nil, fmt.Errorf("--socket %s: %v (is informerd running with this server.socket?)", cfg.socket, err)
	}
	c, err := informerd.Dial(cfg.socket)
	if err != nil {
		return nil, fmt.Errorf("--socket %s: %w", cfg.socket, err)
	}
	for _, resource := range resourcesOf[cfg.role] {
		callCtx, cancel := context.WithTimeout(ctx, 10*time.Second)
		_, err := c.Status(callCtx, resource)
		cancel()
		switch {
		case informerd.IsNotFound(err):
			_ = c.Close()
			return nil, fmt.Errorf("informerd at --socket %s has no resource %q (its configuration's resources[].name): %w", cfg.socket, resource, err)
		case err != nil:
			_ = c.Close()
			return nil, fmt.Errorf("cannot reach informerd at --socket %s: %w", cfg.socket, err)
		}
	}
	return c, nil
}

// tally is what a role counts, and its ready line.
type tally struct {
	role                           string
	objects, events, calls, errors atomic.Int64
	readyOnce                      sync.Once
	ready                          atomic.Bool
	// out serializes stdout: the ready line and the report are whole lines, never interleaved.
	out sync.Mutex
}

// setReady prints the ready line, once: objects is the size of the initial state.
func (t *tally) setReady(objects int64) {
	t.readyOnce.Do(func() {
		t.objects.Store(objects)
		t.out.Lock()
		defer t.out.Unlock()
		// os.Stdout is not buffered: the line is written (to the driver's pipe) at once.
		fmt.Fprintf(os.Stdout, "ready role=%s objects=%d\n", t.role, objects)
		t.ready.Store(true)
	})
}

func (t *tally) isReady() bool { return t.ready.Load() }

// fail counts a failed call or wrong answer and says what it was on stderr.
func (t *tally) fail(format string, args ...any) {
	t.errors.Add(1)
	fmt.Fprintf(os.Stderr, "consumer: %s: %s\n", t.role, fmt.Sprintf(format, args...))
}

// report prints the JSON line the benchmark reads after SIGTERM.
func (t *tally) report() {
	line, _ := json.Marshal(struct {
		Role    string `json:"role"`
		Objects int64  `json:"objects"`
		Events  int64  `json:"events"`
		Calls   int64  `json:"calls"`
		Errors  int64  `json:"errors"`
	}{t.role, t.objects.Load(), t.events.Load(), t.calls.Load(), t.errors.Load()})
	t.out.Lock()
	defer t.out.Unlock()
	fmt.Fprintf(os.Stdout, "%s\n", line)
}
