package main

// The four roles: the access patterns of NVSentinel's central components, each through
// informerd. A role runs until its context ends (then returns nil) or it cannot go on (it
// returns why); it counts into the tally and calls setReady once its initial state is in.

import (
	"context"
	"fmt"
	"math/rand/v2"
	"os"
	"sort"
	"sync"
	"time"

	"golang.org/x/time/rate"
	"google.golang.org/grpc/codes"
	informerd "informerd.io/clients/go"
	corev1 "k8s.io/api/core/v1"
)

type role func(ctx context.Context, c *informerd.Client, cfg config, t *tally) error

var roles = map[string]role{
	"nodes":        followNodes,
	"pods-by-node": podsByNode,
	"pod-keys":     podKeys,
	"daemonset":    followDaemonSet,
}

// resourcesOf is what each role reads: connect checks that informerd serves them.
var resourcesOf = map[string][]string{
	"nodes":        {"nodes"},
	"pods-by-node": {"pods", "nodes"},
	"pod-keys":     {"pods"},
	"daemonset":    {"pods"},
}

func roleNames() []string {
	names := make([]string, 0, len(roles))
	for name := range roles {
		names = append(names, name)
	}
	sort.Strings(names)
	return names
}

// callTimeout bounds each List and Get: a call that hangs is a failed call, not a stuck loop.
const callTimeout = 10 * time.Second

// nodeIndex is informerd's index of pods by spec.nodeName (the benchmark's configuration, as
// examples/informerd.yaml's).
const nodeIndex = "node"

// Decision: typed objects (corev1.Node, corev1.Pod), not unstructured. The Informer keeps no
// objects either way (only key, uid and resourceVersion), so the type decides what each
// delivery and each read allocates and holds while it is used: decoding a seeded node (13.5 KB
// of JSON) with the client's decoder allocates 21 KB (190 allocations) as a corev1.Node against
// 36 KB (742) unstructured, and a DaemonSet pod 22 KB against 53 KB; the decoded value holds
// 14 KB against 30 KB, and 15 KB against 49 KB. The components modelled read typed objects too.

func followNodes(ctx context.Context, c *informerd.Client, _ config, t *tally) error {
	return follow[corev1.Node](ctx, c, "nodes", t)
}

func followDaemonSet(ctx context.Context, c *informerd.Client, cfg config, t *tally) error {
	err := follow[corev1.Pod](ctx, c, "pods", t, informerd.WithLabelSelector(cfg.selector))
	if informerd.Code(err) == codes.InvalidArgument {
		return fmt.Errorf("--selector %q: %w", cfg.selector, err)
	}
	return err
}

// follow runs an Informer of resource whose handler only counts: ready once it has synced, with
// the objects of its initial state; every handler call after that is an event.
func follow[T any](ctx context.Context, c *informerd.Client, resource string, t *tally, opts ...informerd.InformerOption) error {
	var inf *informerd.Informer[T]
	var mu sync.Mutex
	initial := int64(0)
	// The handler runs on the Informer's stream goroutine, which marks the sync after the
	// initial state's last call and before any later one: HasSynced tells the two apart
	// exactly, where polling Stats would count an event that came before the poll as initial.
	count := func() {
		if inf.HasSynced() {
			t.events.Add(1)
			return
		}
		mu.Lock()
		initial++
		mu.Unlock()
	}
	inf = informerd.NewInformer[T](c, resource, informerd.HandlerFuncs[T]{
		AddFunc:    func(*T) { count() },
		UpdateFunc: func(informerd.Meta, *T) { count() },
		DeleteFunc: func(informerd.Meta, *T) { count() },
	}, opts...)
	inf.OnError = func(err error, decision string) {
		switch decision {
		case "deliver":
			// An object that did not decode (the Informer delivers nil): a wrong answer.
			t.fail("informer of %s: %v", resource, err)
		case "resume", "relist":
			// The client's own recovery: said, not counted.
			fmt.Fprintf(os.Stderr, "consumer: %s: informer of %s: %v (the client will %s; not counted)\n", t.role, resource, err, decision)
		}
	}
	errc := make(chan error, 1)
	go func() { errc <- inf.Run(ctx) }()
	tick := time.NewTicker(10 * time.Millisecond)
	for !inf.HasSynced() {
		select {
		case err := <-errc:
			tick.Stop()
			return runErr(ctx, fmt.Errorf("informer of %s: %w", resource, err))
		case <-tick.C:
		}
	}
	tick.Stop()
	// The initial state's size is the Informer's object count at its sync (Stats().Objects
	// then), without the events that may have followed since.
	mu.Lock()
	n := initial
	mu.Unlock()
	t.setReady(n)
	return runErr(ctx, fmt.Errorf("informer of %s: %w", resource, <-errc))
}

// runErr is nil when the context ended (the signal), else err.
func runErr(ctx context.Context, err error) error {
	if ctx.Err() != nil {
		return nil
	}
	return err
}

// podsByNode is the drainer's pattern: --rate times a second, the pods of a random node by the
// `node` index, and the node itself. Ready after the first round whose answers are right.
func podsByNode(ctx context.Context, c *informerd.Client, cfg config, t *tally) error {
	limiter := rate.NewLimiter(rate.Limit(cfg.rate), 1)
	for {
		if limiter.Wait(ctx) != nil {
			return nil
		}
		node := fmt.Sprintf("node-%d", rand.IntN(cfg.nodes))
		pods, listed, err := listNodePods(ctx, c, cfg, t, node)
		if err != nil {
			return err
		}
		got := getNode(ctx, c, t, node)
		if ctx.Err() != nil {
			return nil
		}
		if listed && got {
			t.setReady(int64(pods))
		}
	}
}

// listNodePods lists the pods of node through the index and checks the answer: how many came,
// and whether the call succeeded with exactly --pods-per-node pods, all on that node. The error
// is for a refusal before ready (the index or resource is not configured): a start-up error.
func listNodePods(ctx context.Context, c *informerd.Client, cfg config, t *tally, node string) (int, bool, error) {
	callCtx, cancel := context.WithTimeout(ctx, callTimeout)
	defer cancel()
	t.calls.Add(1)
	// Decision: the index lookup (ListRequest.index, WithIndex), not the field selector
	// spec.nodeName=NODE, which informerd also answers from a path index: the lookup names the
	// index, so informerd refuses it if the configuration lost it instead of answering some
	// other way. WaitForSync: a cache still in its initial list is waited for, not read.
	res, err := informerd.ListAs[corev1.Pod](callCtx, c, "pods", informerd.WithIndex(nodeIndex, node), informerd.WaitForSync())
	switch {
	case ctx.Err() != nil:
		return 0, false, nil
	case err != nil && !t.isReady() && informerd.Code(err) == codes.InvalidArgument:
		return 0, false, fmt.Errorf("listing pods with the index %s=%s: %w (does informerd's configuration give pods an index %q on spec.nodeName?)", nodeIndex, node, err, nodeIndex)
	case err != nil:
		t.fail("List pods on %s (index %s): %v", node, nodeIndex, err)
		return 0, false, nil
	}
	for _, p := range res.Items {
		if p.Spec.NodeName != node {
			t.fail("List pods on %s (index %s): %d pods, and %s/%s is on %q", node, nodeIndex, len(res.Items), p.Namespace, p.Name, p.Spec.NodeName)
			return len(res.Items), false, nil
		}
	}
	if len(res.Items) != cfg.podsPerNode {
		t.fail("List pods on %s (index %s): %d pods, want %d (--pods-per-node)", node, nodeIndex, len(res.Items), cfg.podsPerNode)
		return len(res.Items), false, nil
	}
	return len(res.Items), true, nil
}

// getNode gets node and reports whether that succeeded with that node.
func getNode(ctx context.Context, c *informerd.Client, t *tally, node string) bool {
	callCtx, cancel := context.WithTimeout(ctx, callTimeout)
	defer cancel()
	t.calls.Add(1)
	n, err := informerd.GetAs[corev1.Node](callCtx, c, "nodes", "", node)
	switch {
	case ctx.Err() != nil:
		return false
	case err != nil:
		t.fail("Get node %s: %v", node, err)
		return false
	case n.Name != node:
		t.fail("Get node %s: got %q", node, n.Name)
		return false
	}
	return true
}

// podKeys is a reconciler's pattern: the key queue (WatchKeys) over all pods. The keys of the
// initial resync are drained without a call; each later key gets a Get of its pod.
//
// Decision: the client's WorkQueue rather than the raw WatchKeys stream: it is what a
// controller reading through informerd uses, and it resubscribes (from its token, or with a
// resync after a sidecar restart) by itself. Keys are acknowledged (Done) as soon as handled,
// so the sidecar keeps at most one entry per pod and the queue here only what is not yet
// drained.
func podKeys(ctx context.Context, c *informerd.Client, cfg config, t *tally) error {
	q, err := informerd.NewWorkQueue(ctx, c, "pods", informerd.WorkQueueConfig{}, informerd.WaitForSync())
	if err != nil {
		return runErr(ctx, fmt.Errorf("WatchKeys on pods: %w", err))
	}
	defer q.ShutDown()

	// The initial keys are those of the first resync: HasSynced says they have all been
	// handed to the queue; the ones still waiting in it (Len) are initial too. mu makes the
	// count and the drained keys one picture; a key taken by Get but not yet counted is
	// missed by at most one, and then treated as a later key (one Get more), never the
	// reverse, which could leave the role waiting for a key that never comes.
	var mu sync.Mutex
	drained, initial := int64(0), int64(-1)
	go func() {
		tick := time.NewTicker(10 * time.Millisecond)
		defer tick.Stop()
		for {
			select {
			case <-ctx.Done():
				return
			case <-tick.C:
			}
			if !q.HasSynced() {
				continue
			}
			mu.Lock()
			initial = drained + int64(q.Len())
			done := drained >= initial
			n := initial
			mu.Unlock()
			if done {
				t.setReady(n)
			}
			return
		}
	}()

	// Decision: the Gets of later keys keep to --rate too. The benchmark changes no pod during
	// its hold, so this never binds there; it keeps a burst (every key again after a sidecar
	// restart) from taking the two cores, the keys coalescing in the queue meanwhile.
	limiter := rate.NewLimiter(rate.Limit(cfg.rate), 1)
	for {
		key, shutdown := q.Get()
		if shutdown {
			if ctx.Err() != nil {
				return nil
			}
			if err := q.Err(); err != nil {
				return fmt.Errorf("WatchKeys on pods: %w", err)
			}
			return fmt.Errorf("WatchKeys on pods: the queue shut down")
		}
		mu.Lock()
		drained++
		later := initial >= 0 && drained > initial
		readyNow := initial >= 0 && drained == initial
		n := initial
		mu.Unlock()
		if readyNow {
			t.setReady(n)
		}
		if later {
			t.events.Add(1)
			if limiter.Wait(ctx) != nil {
				q.Done(key)
				return nil
			}
			getPod(ctx, c, t, key)
		}
		// Done acknowledges the key: the sidecar sends it again when it changes. Forget is not
		// needed: nothing here is ever rate-limited (AddRateLimited), so no failures are kept.
		q.Done(key)
	}
}

// getPod gets the pod of a key; a deleted pod's key comes too, and its NOT_FOUND is the right
// answer.
func getPod(ctx context.Context, c *informerd.Client, t *tally, key informerd.QueueKey) {
	callCtx, cancel := context.WithTimeout(ctx, callTimeout)
	defer cancel()
	t.calls.Add(1)
	p, err := informerd.GetAs[corev1.Pod](callCtx, c, "pods", key.Namespace, key.Name)
	switch {
	case ctx.Err() != nil, informerd.IsNotFound(err):
	case err != nil:
		t.fail("Get pod %s/%s: %v", key.Namespace, key.Name, err)
	case p.Namespace != key.Namespace || p.Name != key.Name:
		t.fail("Get pod %s/%s: got %s/%s", key.Namespace, key.Name, p.Namespace, p.Name)
	}
}
