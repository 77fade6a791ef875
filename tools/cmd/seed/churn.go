package main

import (
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"math/rand/v2"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	corev1ac "k8s.io/client-go/applyconfigurations/core/v1"
	"k8s.io/client-go/kubernetes"
)

type opKind int

const (
	opUpdate  opKind = iota // annotation update (kubectl annotate)
	opRelabel               // toggle informerd.io/tier keep <-> drop (kubectl label)
	opStatus                // kubelet status change: container restart or readiness flip
	opDelete                // delete a pod (as a controller scaling down, or an eviction)
	opCreate                // create a pod in place of a deleted one (as its controller would)
	numOps
)

// opWeights is the mix of operations, in percent.
var opWeights = [numOps]int{opUpdate: 20, opRelabel: 25, opStatus: 35, opDelete: 10, opCreate: 10}

func runChurn(ctx context.Context, args []string) error {
	fs := flag.NewFlagSet("churn", flag.ContinueOnError)
	var (
		common      commonFlags
		namespaces  = fs.Int("namespaces", 10, "number of namespaces PREFIX-0..PREFIX-(M-1) whose pods to churn")
		rate        = fs.Float64("rate", 100, "operations per second")
		duration    = fs.Duration("duration", 30*time.Second, "how long to run")
		seed        = fs.Uint64("seed", 1, "seed of the generator")
		concurrency = fs.Int("concurrency", 32, "requests in flight at most")
		nodes       = fs.Int("nodes", 20, "number of (fake) node names new pods are bound to")
	)
	common.register(fs)
	if err := fs.Parse(args); err != nil {
		return err
	}
	if err := common.check(fs); err != nil {
		return err
	}
	if *namespaces < 1 || *rate <= 0 || *duration <= 0 || *concurrency < 1 || *nodes < 1 {
		return usageError(fs, "--namespaces, --rate, --duration, --concurrency and --nodes must be positive")
	}
	if fs.NArg() > 0 {
		return usageError(fs, "unexpected arguments %q", fs.Args())
	}
	clients, _, err := newClients(&common)
	if err != nil {
		return err
	}
	ch := newChurner(clients, *nodes, *seed)
	var nsNames []string
	for i := 0; i < *namespaces; i++ {
		nsNames = append(nsNames, fmt.Sprintf("%s-%d", common.prefix, i))
	}
	listStart := time.Now()
	if err := ch.list(ctx, nsNames, *concurrency); err != nil {
		return err
	}
	if len(ch.idle) == 0 {
		return fmt.Errorf("no pods in namespaces %s-0..%s-%d: run seed pods first", common.prefix, common.prefix, *namespaces-1)
	}
	logf("listed %d pods in %d namespaces in %.1fs", len(ch.idle), *namespaces, time.Since(listStart).Seconds())
	return ch.run(ctx, *rate, *duration, *concurrency)
}

func newChurner(clients []kubernetes.Interface, nodes int, seed uint64) *churner {
	return &churner{clients: clients, nodes: nodes, rng: newRand(seed, 0xc4a2), names: map[string]bool{}, ips: map[string]bool{}}
}

type churner struct {
	clients []kubernetes.Interface
	nodes   int

	mu      sync.Mutex
	rng     *rand.Rand
	idle    []*trackedPod   // pods no operation is working on
	deleted []*corev1.Pod   // pods deleted, waiting to be replaced
	names   map[string]bool // namespace/name of pods that exist or are being created
	ips     map[string]bool // pod IPs in use
	seq     int

	counts [numOps]atomic.Int64
	// failed counts operations given up on while the API server could not be reached (it was
	// killed or restarted under the churn): they are not in counts.
	failed atomic.Int64
}

// errTimeUp ends the operations still waiting for an unreachable API server when the churn's
// time is up (and its grace after it).
var errTimeUp = errors.New("the churn's time is up")

// opGrace is how long an operation started before the churn's end may take after it.
const opGrace = 10 * time.Second

// Decision: an operation that fails on a transient error (the API server unreachable, killed,
// restarting, overloaded; see retriable) is retried, with retry's backoff, until it succeeds
// or the churn's time (and opGrace) is up, then counted as failed and abandoned: the churn
// goes on. The chaos suite kills kube-apiserver under the churn, and a churn that gave up with
// it stopped the changes the suite was checking. Any other error (a refusal: Forbidden,
// Invalid) still ends the churn: it is a bug in the churn or the cluster, not a fault.
func persist(ctx context.Context, fn func() error) error {
	for {
		err := retry(ctx, fn)
		if err == nil || !retriable(err) || ctx.Err() != nil {
			return err
		}
	}
}

// transient reports whether err ended an operation because the API server could not be
// reached until the churn's time was up.
func transient(ctx context.Context, err error) bool {
	return retriable(err) || errors.Is(context.Cause(ctx), errTimeUp) && errors.Is(err, errTimeUp)
}

// trackedPod is what the churner keeps of a pod between operations: little, so that it can churn
// hundreds of thousands of pods. Operations that need the whole pod get it first.
type trackedPod struct {
	ns, name string
	uid      types.UID
	tier     string
	ip       string
}

func refOf(p *corev1.Pod) *trackedPod {
	return &trackedPod{ns: p.Namespace, name: p.Name, uid: p.UID, tier: p.Labels[tierLabel], ip: p.Status.PodIP}
}

func (ch *churner) list(ctx context.Context, namespaces []string, concurrency int) error {
	return parallel(ctx, min(concurrency, len(namespaces)), len(namespaces), func(ctx context.Context, w, i int) error {
		c := ch.clients[w%len(ch.clients)]
		opts := metav1.ListOptions{Limit: 500}
		for {
			var list *corev1.PodList
			err := retry(ctx, func() (err error) {
				list, err = c.CoreV1().Pods(namespaces[i]).List(ctx, opts)
				return err
			})
			if apierrors.IsResourceExpired(err) {
				return fmt.Errorf("listing pods in %s: continue token expired; try again: %w", namespaces[i], err)
			}
			if err != nil {
				return fmt.Errorf("listing pods in %s: %w", namespaces[i], err)
			}
			ch.mu.Lock()
			for j := range list.Items {
				p := &list.Items[j]
				if p.DeletionTimestamp != nil {
					continue
				}
				ch.idle = append(ch.idle, refOf(p))
				ch.names[p.Namespace+"/"+p.Name] = true
				if p.Status.PodIP != "" {
					ch.ips[p.Status.PodIP] = true
				}
			}
			ch.mu.Unlock()
			if list.Continue == "" {
				return nil
			}
			opts.Continue = list.Continue
		}
	})
}

// take removes a random idle pod from the pool; nil if there is none.
func (ch *churner) take() *trackedPod {
	ch.mu.Lock()
	defer ch.mu.Unlock()
	if len(ch.idle) == 0 {
		return nil
	}
	i := ch.rng.IntN(len(ch.idle))
	p := ch.idle[i]
	ch.idle[i] = ch.idle[len(ch.idle)-1]
	ch.idle = ch.idle[:len(ch.idle)-1]
	return p
}

func (ch *churner) release(p *corev1.Pod) {
	ch.mu.Lock()
	ch.idle = append(ch.idle, refOf(p))
	ch.mu.Unlock()
}

// putBack returns a pod taken from the pool whose operation failed.
func (ch *churner) putBack(p *trackedPod) {
	ch.mu.Lock()
	ch.idle = append(ch.idle, p)
	ch.mu.Unlock()
}

func (ch *churner) forget(p *trackedPod) {
	ch.mu.Lock()
	delete(ch.names, p.ns+"/"+p.name)
	delete(ch.ips, p.ip)
	ch.mu.Unlock()
}

func (ch *churner) pickOp() opKind {
	ch.mu.Lock()
	defer ch.mu.Unlock()
	n := ch.rng.IntN(100)
	op := opKind(0)
	for ; op < numOps-1; op++ {
		if n < opWeights[op] {
			break
		}
		n -= opWeights[op]
	}
	// Creates replace deleted pods; with none to replace, delete one so that one follows.
	// With many to replace, replace one: the population stays within a few pods of its size.
	switch {
	case op == opCreate && len(ch.deleted) == 0:
		op = opDelete
	case op == opDelete && len(ch.deleted) >= 8:
		op = opCreate
	}
	return op
}

func (ch *churner) run(ctx context.Context, rate float64, duration time.Duration, concurrency int) error {
	ctx, cancel := context.WithCancelCause(ctx)
	defer cancel(nil)
	var wg sync.WaitGroup
	sem := make(chan struct{}, concurrency)
	start := time.Now()
	interval := time.Duration(float64(time.Second) / rate)
	opCtx, stopOps := context.WithDeadlineCause(ctx, start.Add(duration+opGrace), errTimeUp)
	defer stopOps()

	total := func() (n int64) {
		for i := range ch.counts {
			n += ch.counts[i].Load()
		}
		return n
	}
	stopProgress := progress(5*time.Second, func(el time.Duration) string {
		return fmt.Sprintf("churn: %5.1fs %d ops (%.1f ops/s), %d pods, retries %d, failed %d",
			el.Seconds(), total(), float64(total())/el.Seconds(), ch.population(), retries.Load(), ch.failed.Load())
	})

	var firstErr error
	var errOnce sync.Once
	for i := 0; ; i++ {
		next := start.Add(time.Duration(i) * interval)
		if next.Sub(start) >= duration {
			break
		}
		if d := time.Until(next); d > 0 {
			select {
			case <-ctx.Done():
			case <-time.After(d):
			}
		}
		if ctx.Err() != nil {
			break
		}
		select {
		case sem <- struct{}{}:
		case <-ctx.Done():
		}
		if ctx.Err() != nil || time.Since(start) >= duration {
			break // when the API server cannot keep up, stop on time all the same
		}
		op := ch.pickOp()
		c := ch.clients[i%len(ch.clients)]
		wg.Add(1)
		go func() {
			defer wg.Done()
			defer func() { <-sem }()
			switch err := ch.do(opCtx, c, op); {
			case err == nil:
			case transient(opCtx, err):
				ch.failed.Add(1)
			default:
				errOnce.Do(func() { firstErr = err; cancel(err) })
			}
		}()
	}
	wg.Wait()
	stopProgress()
	if firstErr != nil {
		return firstErr
	}
	if err := ctx.Err(); err != nil {
		return err
	}
	el := time.Since(start).Seconds()
	n := total()
	if got := float64(n) / el; got < 0.9*rate {
		logf("warning: %.1f ops/s instead of %.1f: the API server is too slow for this rate, or --concurrency %d too low", got, rate, concurrency)
	}
	fmt.Printf("churned %d ops (%d updates, %d relabels, %d status, %d deletes, %d creates) in %.1fs (%.1f ops/s), %d failed\n",
		n, ch.counts[opUpdate].Load(), ch.counts[opRelabel].Load(), ch.counts[opStatus].Load(),
		ch.counts[opDelete].Load(), ch.counts[opCreate].Load(), el, float64(n)/el, ch.failed.Load())
	return nil
}

func (ch *churner) population() int {
	ch.mu.Lock()
	defer ch.mu.Unlock()
	return len(ch.names)
}

// do runs one operation. A pod that has vanished (someone else deleted it) is dropped from
// the pool and the operation is not counted.
func (ch *churner) do(ctx context.Context, c kubernetes.Interface, op opKind) error {
	if op == opCreate {
		return ch.create(ctx, c)
	}
	p := ch.take()
	if p == nil {
		return nil
	}
	pods := c.CoreV1().Pods(p.ns)
	var (
		got  *corev1.Pod
		full *corev1.Pod
		err  error
	)
	if op == opStatus || op == opDelete {
		// The status change starts from the current status; the replacement of a deleted pod
		// from its spec.
		err = persist(ctx, func() (err error) {
			full, err = pods.Get(ctx, p.name, metav1.GetOptions{})
			return err
		})
		if err == nil && full.UID != p.uid {
			err = apierrors.NewNotFound(corev1.Resource("pods"), p.name) // replaced by someone else
		}
	}
	switch {
	case err != nil:
	case op == opUpdate || op == opRelabel:
		field, key, value, manager := "annotations", "informerd.io/churn-seq", "", "kubectl-annotate"
		if op == opRelabel {
			field, key, value, manager = "labels", tierLabel, tierDrop, "kubectl-label"
			if p.tier == tierDrop {
				value = tierKeep
			}
		} else {
			ch.mu.Lock()
			ch.seq++
			value = strconv.Itoa(ch.seq)
			ch.mu.Unlock()
		}
		patch, _ := json.Marshal(map[string]any{"metadata": map[string]any{field: map[string]string{key: value}}})
		err = persist(ctx, func() (err error) {
			got, err = pods.Patch(ctx, p.name, types.MergePatchType, patch, metav1.PatchOptions{FieldManager: manager})
			return err
		})
	case op == opStatus:
		st := ch.statusChange(full)
		err = persist(ctx, func() (err error) {
			got, err = applyPod(ctx, pods, st, statusManager, true)
			return err
		})
	case op == opDelete:
		// Grace period 0: there is no kubelet to confirm a graceful deletion of a bound pod.
		err = persist(ctx, func() error {
			err := pods.Delete(ctx, p.name, metav1.DeleteOptions{GracePeriodSeconds: ptr(int64(0)),
				Preconditions: &metav1.Preconditions{UID: &p.uid}})
			return err
		})
		if err == nil {
			ch.forget(p)
			ch.mu.Lock()
			ch.deleted = append(ch.deleted, full)
			ch.mu.Unlock()
			ch.counts[op].Add(1)
			return nil
		}
	}
	switch {
	case apierrors.IsNotFound(err) || (op == opDelete && apierrors.IsConflict(err)):
		ch.forget(p)
		return nil
	case err != nil:
		if transient(ctx, err) {
			ch.putBack(p) // as it was: a later operation finds out what became of it
		}
		return fmt.Errorf("%s of pod %s/%s: %w", []string{"annotation update", "relabel", "status update", "delete"}[op], p.ns, p.name, err)
	}
	ch.release(got)
	ch.counts[op].Add(1)
	return nil
}

// statusChange returns the next status a kubelet would report for p: a container restart or
// a readiness flip. It starts from the status the kubelet manager owns.
func (ch *churner) statusChange(p *corev1.Pod) *corev1ac.PodApplyConfiguration {
	ch.mu.Lock()
	r := newRand(ch.rng.Uint64(), 3)
	ch.mu.Unlock()
	now := metav1.NewTime(time.Now().UTC().Truncate(time.Second))

	ac, err := corev1ac.ExtractPodStatus(p, statusManager)
	if err != nil || ac.Status == nil || len(ac.Status.ContainerStatuses) == 0 {
		// Not written by us: report a fresh status.
		spec, _ := corev1ac.ExtractPod(p, fieldManager)
		ip := p.Status.PodIP
		if ip == "" {
			ip = ch.newIP()
		}
		if spec == nil || spec.Spec == nil || len(spec.Spec.Containers) == 0 {
			return corev1ac.Pod(p.Name, p.Namespace).WithStatus(corev1ac.PodStatus().WithPhase(corev1.PodRunning).
				WithPodIP(ip).WithPodIPs(corev1ac.PodIP().WithIP(ip)))
		}
		spec.Spec.WithNodeName(p.Spec.NodeName)
		return podStatus(spec, ip, r.Uint64(), p.CreationTimestamp.Time, now.Time)
	}
	st := ac.Status
	if r.IntN(2) == 0 {
		// A container restarts.
		cs := &st.ContainerStatuses[r.IntN(len(st.ContainerStatuses))]
		var from metav1.Time
		if cs.State != nil && cs.State.Running != nil && cs.State.Running.StartedAt != nil {
			from = *cs.State.Running.StartedAt
		}
		t := terminated(r, from, metav1.NewTime(now.Add(-time.Second)))
		if cs.ContainerID != nil {
			t.WithContainerID(*cs.ContainerID)
		}
		restarts := int32(0)
		if cs.RestartCount != nil {
			restarts = *cs.RestartCount
		}
		cs.WithRestartCount(restarts + 1).
			WithLastTerminationState(corev1ac.ContainerState().WithTerminated(t)).
			WithState(corev1ac.ContainerState().WithRunning(corev1ac.ContainerStateRunning().WithStartedAt(now))).
			WithContainerID("containerd://" + randHex(r, 64))
		return ac
	}
	// Readiness flips.
	ready := true
	for _, c := range st.Conditions {
		if c.Type != nil && *c.Type == corev1.PodReady && c.Status != nil {
			ready = *c.Status == corev1.ConditionTrue
		}
	}
	ready = !ready
	var names []string
	for _, cs := range st.ContainerStatuses {
		if cs.Name != nil {
			names = append(names, *cs.Name)
		}
	}
	if len(names) > 0 {
		st.ContainerStatuses[0].WithReady(ready)
	}
	for i := range st.Conditions {
		c := &st.Conditions[i]
		if c.Type == nil || (*c.Type != corev1.PodReady && *c.Type != corev1.ContainersReady) {
			continue
		}
		c.WithLastTransitionTime(now)
		if ready {
			c.WithStatus(corev1.ConditionTrue)
			c.Reason, c.Message = nil, nil
		} else {
			c.WithStatus(corev1.ConditionFalse).WithReason("ContainersNotReady").
				WithMessage(fmt.Sprintf("containers with unready status: [%s]", strings.Join(names[:min(1, len(names))], " ")))
		}
	}
	return ac
}

// newIP returns a pod IP not in use.
func (ch *churner) newIP() string {
	ch.mu.Lock()
	defer ch.mu.Unlock()
	for {
		ip := ipFor(ch.rng.IntN(maxIPIndex))
		if !ch.ips[ip] {
			ch.ips[ip] = true
			return ip
		}
	}
}

// create replaces a deleted pod as its controller would: a StatefulSet pod under the same
// name, other pods under a new generated name; on a new node unless it is a DaemonSet pod.
func (ch *churner) create(ctx context.Context, c kubernetes.Interface) error {
	ch.mu.Lock()
	if len(ch.deleted) == 0 {
		ch.mu.Unlock()
		return nil
	}
	old := ch.deleted[0]
	ch.deleted = ch.deleted[1:]
	r := newRand(ch.rng.Uint64(), 4)
	ch.mu.Unlock()

	ac, err := corev1ac.ExtractPod(old, fieldManager)
	if err != nil || ac.Spec == nil || len(ac.Spec.Containers) == 0 {
		return nil // not one of ours: nothing to replace it with
	}
	var kind string
	for _, ref := range old.OwnerReferences {
		if ref.Controller != nil && *ref.Controller {
			kind = ref.Kind
		}
	}
	name := old.Name
	if kind != "StatefulSet" && old.GenerateName != "" {
		ch.mu.Lock()
		for {
			name = old.GenerateName + randString(r, 5)
			if !ch.names[old.Namespace+"/"+name] {
				break
			}
		}
		ch.mu.Unlock()
	}
	ch.mu.Lock()
	if ch.names[old.Namespace+"/"+name] {
		ch.mu.Unlock()
		return nil // a StatefulSet pod that came back by other means
	}
	ch.names[old.Namespace+"/"+name] = true
	ch.mu.Unlock()

	ac.WithName(name)
	tier := tierKeep
	if r.IntN(2) == 1 {
		tier = tierDrop
	}
	ac.WithLabels(map[string]string{tierLabel: tier})
	if ac.Spec.NodeName == nil || (kind != "DaemonSet" && kind != "StatefulSet") {
		ac.Spec.WithNodeName(nodeName(r.IntN(ch.nodes)))
	}
	if kind == "StatefulSet" && ac.Spec.Hostname != nil {
		ac.Spec.WithHostname(name)
	}
	pods := c.CoreV1().Pods(old.Namespace)
	err = persist(ctx, func() error {
		_, err := applyPod(ctx, pods, ac, fieldManager, false)
		return err
	})
	if err != nil {
		if transient(ctx, err) {
			// Not created (or not known to be): replace the deleted pod later.
			ch.mu.Lock()
			delete(ch.names, old.Namespace+"/"+name)
			ch.deleted = append(ch.deleted, old)
			ch.mu.Unlock()
		}
		return fmt.Errorf("creating pod %s/%s: %w", old.Namespace, name, err)
	}
	// Started just now.
	now := time.Now().UTC()
	st := podStatus(ac, ch.newIP(), r.Uint64(), now, now)
	var got *corev1.Pod
	err = persist(ctx, func() (err error) {
		got, err = applyPod(ctx, pods, st, statusManager, true)
		return err
	})
	if err != nil {
		return fmt.Errorf("applying status of pod %s/%s: %w", old.Namespace, name, err)
	}
	ch.release(got)
	ch.counts[opCreate].Add(1)
	return nil
}
