package informerd_test

import (
	"context"
	"fmt"
	"strings"
	"sync"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"

	informerd "informerd.io/clients/go"
	"informerd.io/clients/go/internal/testenv"
)

// reconciler is a controller's reconcile loop over a WorkQueue, written the usual way: Get,
// read the object, Forget or AddRateLimited, Done. It records what it last read of each pod
// and how often each key came.
type reconciler struct {
	mu       sync.Mutex
	seen     map[string]string // "ns/name" -> resourceVersion last read ("" : NOT_FOUND)
	counts   map[string]int
	failOnce map[string]bool
	requeues map[string]int // NumRequeues seen when a key came back after a failure
}

func (r *reconciler) run(ctx context.Context, c *informerd.Client, q *informerd.WorkQueue) {
	for {
		key, shutdown := q.Get()
		if shutdown {
			return
		}
		func() {
			defer q.Done(key)
			name := key.Namespace + "/" + key.Name
			pod, err := informerd.GetAs[corev1.Pod](ctx, c, "pods", key.Namespace, key.Name)
			r.mu.Lock()
			defer r.mu.Unlock()
			r.counts[name]++
			if n := q.NumRequeues(key); n > 0 {
				r.requeues[name] = n
			}
			switch {
			case r.failOnce[name]:
				delete(r.failOnce, name)
				q.AddRateLimited(key)
				return
			case informerd.IsNotFound(err):
				r.seen[name] = ""
			case err != nil:
				q.AddRateLimited(key)
				return
			default:
				r.seen[name] = pod.ResourceVersion
			}
			q.Forget(key)
		}()
	}
}

func (r *reconciler) snapshot() (map[string]string, map[string]int) {
	r.mu.Lock()
	defer r.mu.Unlock()
	seen, counts := map[string]string{}, map[string]int{}
	for k, v := range r.seen {
		if v != "" {
			seen[k] = v
		}
	}
	for k, v := range r.counts {
		counts[k] = v
	}
	return seen, counts
}

func (r *reconciler) resetCounts() {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.counts = map[string]int{}
}

// TestWorkQueueReconcileLoop: a reconcile loop over NewWorkQueue reads every pod once at
// start (the resync), each pod once per burst of changes (debounce), a deleted pod as
// NOT_FOUND, a failed key again after AddRateLimited, and goes on across a sidecar restart.
func TestWorkQueueReconcileLoop(t *testing.T) {
	e := setup(t)
	ns := e.Namespace(t, "wq")
	const pods = 20
	for i := 0; i < pods; i++ {
		e.createPod(t, ns, fmt.Sprintf("p%d", i), map[string]string{"app": "wq"})
	}
	sc := e.StartSidecar(t, func(socket string) string { return podsConfig(socket, []string{ns}, "") })
	c := sc.Client()
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	const debounce = 3 * time.Second
	q, err := informerd.NewWorkQueue(ctx, c, "pods", informerd.WorkQueueConfig{
		Debounce:    debounce,
		MaxDelay:    time.Minute,
		RateLimiter: nil,
	}, informerd.InNamespace(ns))
	if err != nil {
		t.Fatal(err)
	}
	defer q.ShutDown()
	r := &reconciler{seen: map[string]string{}, counts: map[string]int{},
		failOnce: map[string]bool{ns + "/p0": true}, requeues: map[string]int{}}
	for i := 0; i < 2; i++ {
		go r.run(ctx, c, q)
	}
	matchesAPIServer := func() string {
		seen, _ := r.snapshot()
		return diff("apiserver", e.apiserverPods(t, "", ns), "reconciler", seen)
	}
	eventually(t, 2*time.Minute, "every pod reconciled once at start", matchesAPIServer)
	if !q.HasSynced() {
		t.Error("HasSynced is false after the resync")
	}
	r.mu.Lock()
	if r.requeues[ns+"/p0"] != 1 {
		t.Errorf("p0 failed once: it should come back with NumRequeues 1, got %d", r.requeues[ns+"/p0"])
	}
	r.mu.Unlock()

	// A burst of five updates per pod (all pods at once), and a deletion.
	r.resetCounts()
	var wg sync.WaitGroup
	var burstMu sync.Mutex
	longest := time.Duration(0)
	for i := 0; i < pods-1; i++ {
		wg.Add(1)
		go func(name string) {
			defer wg.Done()
			start := time.Now()
			for round := 0; round < 5; round++ {
				e.mutatePod(t, ns, name, false, func(p *corev1.Pod) { p.Labels["round"] = fmt.Sprint(round) })
			}
			burstMu.Lock()
			longest = max(longest, time.Since(start))
			burstMu.Unlock()
		}(fmt.Sprintf("p%d", i))
	}
	wg.Wait()
	e.deletePod(t, ns, fmt.Sprintf("p%d", pods-1))
	eventually(t, 2*time.Minute, "every pod's last read is the apiserver's", matchesAPIServer)
	eventually(t, time.Minute, "the deleted pod read as NOT_FOUND", func() string {
		r.mu.Lock()
		defer r.mu.Unlock()
		if rv, ok := r.seen[fmt.Sprintf("%s/p%d", ns, pods-1)]; !ok || rv != "" {
			return "p19 not yet read as NOT_FOUND"
		}
		return ""
	})
	// Each burst is one quiet period when it took less than the debounce.
	time.Sleep(debounce)
	_, counts := r.snapshot()
	t.Logf("bursts took up to %v; keys handed out: %v", longest, counts)
	if longest < debounce {
		for i := 0; i < pods; i++ {
			name := fmt.Sprintf("%s/p%d", ns, i)
			if counts[name] != 1 {
				t.Errorf("%s came %d times for one burst of changes", name, counts[name])
			}
		}
	}

	// A sidecar restart (another epoch): the queue subscribes again and resyncs.
	sc.Kill()
	e.mutatePod(t, ns, "p1", false, func(p *corev1.Pod) { p.Labels["after"] = "restart" })
	sc.Start()
	sc.WaitSynced()
	eventually(t, 2*time.Minute, "the change made while the sidecar was down is reconciled", matchesAPIServer)
	if err := q.Err(); err != nil {
		t.Errorf("the queue stopped: %v", err)
	}
}

// TestWorkQueueWaitsForTheSidecar: a WorkQueue made before its sidecar listens (the containers
// of a pod start together) waits for it, as the Informer does, then hands out the keys.
func TestWorkQueueWaitsForTheSidecar(t *testing.T) {
	e := setup(t)
	ns := e.Namespace(t, "wqwait")
	e.createPod(t, ns, "p0", nil)
	sc := e.NewSidecar(t, func(socket string) string { return podsConfig(socket, []string{ns}, "") })
	c := testenv.DialTarget(t, "unix://"+sc.Socket)
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	type made struct {
		q   *informerd.WorkQueue
		err error
	}
	done := make(chan made, 1)
	go func() {
		q, err := informerd.NewWorkQueue(ctx, c, "pods", informerd.WorkQueueConfig{}, informerd.InNamespace(ns))
		done <- made{q, err}
	}()
	sc.Start()
	var q *informerd.WorkQueue
	select {
	case m := <-done:
		if m.err != nil {
			t.Fatalf("NewWorkQueue before the sidecar listened: %v", m.err)
		}
		q = m.q
	case <-time.After(syncTimeout): // only so as not to hang
		t.Fatalf("NewWorkQueue did not return within %s of the sidecar's start", syncTimeout)
	}
	defer q.ShutDown()
	got := make(chan informerd.QueueKey, 1)
	go func() {
		if key, shutdown := q.Get(); !shutdown {
			got <- key
		}
	}()
	select {
	case key := <-got:
		if key.Namespace != ns || key.Name != "p0" {
			t.Errorf("the first key is %v, want %s/p0", key, ns)
		}
	case <-time.After(syncTimeout): // only so as not to hang
		t.Fatalf("no key within %s; Err() = %v", syncTimeout, q.Err())
	}
}

// TestWorkQueueRefused: a subscription the sidecar refuses is NewWorkQueue's error, naming the
// field.
func TestWorkQueueRefused(t *testing.T) {
	e := setup(t)
	ns := e.Namespace(t, "wqbad")
	sc := e.StartSidecar(t, func(socket string) string { return podsConfig(socket, []string{ns}, "") })
	c := sc.Client()
	_, err := informerd.NewWorkQueue(context.Background(), c, "pods",
		informerd.WorkQueueConfig{Debounce: time.Second, MaxDelay: time.Millisecond})
	if informerd.Reason(err) != "Invalid" {
		t.Fatalf("want Invalid, got %v", err)
	}
	if want := "subscribe.max_delay_millis"; !strings.Contains(err.Error(), want) {
		t.Errorf("the error should name %s: %v", want, err)
	}
}
