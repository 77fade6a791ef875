package main

import (
	"context"
	"encoding/json"
	"flag"
	"fmt"
	"os"
	"runtime/debug"
	"runtime/pprof"
	"strings"
	"sync/atomic"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	corev1ac "k8s.io/client-go/applyconfigurations/core/v1"
	"k8s.io/client-go/kubernetes"
	typedcorev1 "k8s.io/client-go/kubernetes/typed/core/v1"
)

func runPods(ctx context.Context, args []string) error {
	fs := flag.NewFlagSet("pods", flag.ContinueOnError)
	var (
		common      commonFlags
		pods        = fs.Int("pods", 1000, "number of pods to create")
		namespaces  = fs.Int("namespaces", 10, "number of namespaces to spread them over")
		concurrency = fs.Int("concurrency", 128, "requests in flight")
		seed        = fs.Uint64("seed", 1, "seed of the generator: the same seed writes the same pods")
		nodes       = fs.Int("nodes", 20, "number of (fake) node names pods are bound to")
		graceful    = fs.Bool("graceful", false, "give pods realistic terminationGracePeriodSeconds (30s...) instead of 0; "+
			"then only deletions with grace period 0 (as seed clean does) remove them: nothing confirms a graceful deletion")
		cpuprofile = fs.String("cpuprofile", "", "write a CPU profile of the seeder to this file")
		mode       = fs.String("mode", "apply", `how pods are written: "apply" (server-side apply of pod and status) or "create" (create, then update status, as controllers and kubelets do)`)
		daemonsets = fs.Int("daemonsets", 0, "instead of --pods: this many DaemonSets, each with a pod on every one of --nodes nodes "+
			"(daemonsets.go; the profile of GPU clusters, whose per-node agents are most of the pods)")
		etcd = fs.String("etcd", "", "write the pods straight into the API server's etcd at this client URL instead of through the API server "+
			"(hundreds of thousands of pods in minutes; owners are not written: only for a control plane without the garbage collector, see etcd.go)")
	)
	common.register(fs)
	if err := fs.Parse(args); err != nil {
		return err
	}
	if err := common.check(fs); err != nil {
		return err
	}
	if *pods < 0 || *namespaces < 1 || *concurrency < 1 || *nodes < 1 {
		return usageError(fs, "--pods must be >= 0, --namespaces, --concurrency and --nodes >= 1")
	}
	if *daemonsets < 0 || (*daemonsets > 0 && isSet(fs, "pods")) {
		return usageError(fs, "--daemonsets must be >= 0, and it replaces --pods (there are --daemonsets x --nodes pods): give one of them")
	}
	if *mode != "apply" && *mode != "create" {
		return usageError(fs, "--mode must be apply or create")
	}
	if fs.NArg() > 0 {
		return usageError(fs, "unexpected arguments %q", fs.Args())
	}
	clients, _, err := newClients(&common)
	if err != nil {
		return err
	}

	if *cpuprofile != "" {
		f, err := os.Create(*cpuprofile)
		if err != nil {
			return err
		}
		defer f.Close()
		if err := pprof.StartCPUProfile(f); err != nil {
			return err
		}
		defer pprof.StopCPUProfile()
	}
	// The seeder allocates a lot of short-lived garbage and has memory to spare.
	debug.SetGCPercent(400)
	start := time.Now()
	var p *plan
	if *daemonsets > 0 {
		p = newDaemonSetPlan(*seed, common.prefix, *daemonsets, *namespaces, *nodes, start.UTC())
	} else {
		p = newPlanWith(*seed, common.prefix, *pods, *namespaces, *nodes, start.UTC(), *graceful)
	}
	s := &seeder{clients: clients, plan: p, concurrency: *concurrency, mode: *mode, etcd: *etcd}
	if err := s.run(ctx); err != nil {
		return err
	}
	elapsed := time.Since(start).Seconds()
	fmt.Printf("seeded %d pods in %d namespaces in %.1fs (%.1f pods/s)\n",
		p.Pods, *namespaces, elapsed, float64(p.Pods)/elapsed)
	return nil
}

type seeder struct {
	clients     []kubernetes.Interface
	plan        *plan
	concurrency int
	mode        string // "apply" (server-side apply) or "create" (create and update, as controllers do)
	etcd        string // when set, pods go straight into this etcd (etcd.go) and owners are not written

	owners atomic.Int64
	pods   atomic.Int64
}

func (s *seeder) client(worker int) kubernetes.Interface { return s.clients[worker%len(s.clients)] }

func (s *seeder) run(ctx context.Context) error {
	nOwners := 0
	for _, o := range s.plan.Owners {
		if o.Kind == kindBare {
			continue // no owner object
		}
		nOwners++
		if o.Kind == kindReplicaSet {
			nOwners++ // and its Deployment
		}
	}
	if s.etcd != "" {
		nOwners = 0 // not written (etcd.go)
	}
	var lastPods int64
	var lastAt time.Duration
	stopProgress := progress(5*time.Second, func(el time.Duration) string {
		n := s.pods.Load()
		rate := float64(n-lastPods) / (el - lastAt).Seconds()
		lastPods, lastAt = n, el
		return fmt.Sprintf("seed: %5.1fs owners %d/%d, pods %d/%d (%.0f pods/s now), retries %d",
			el.Seconds(), s.owners.Load(), nOwners, n, s.plan.Pods, rate, retries.Load())
	})

	defer stopProgress()

	t0 := time.Now()
	if err := s.namespaces(ctx); err != nil {
		return err
	}
	t1 := time.Now()
	writePods := s.createPods
	if s.etcd != "" {
		writePods = func(ctx context.Context) error { return s.writePodsToEtcd(ctx, s.etcd) }
	} else if err := s.createOwners(ctx); err != nil {
		return err
	}
	t2 := time.Now()
	if err := writePods(ctx); err != nil {
		return err
	}
	stopProgress()
	logf("namespaces %.1fs, %d owners %.1fs, %d pods %.1fs (%.1f pods/s), %d retries", t1.Sub(t0).Seconds(),
		nOwners, t2.Sub(t1).Seconds(), s.plan.Pods, time.Since(t2).Seconds(),
		float64(s.plan.Pods)/time.Since(t2).Seconds(), retries.Load())
	return nil
}

// namespaces creates the namespaces (or finds them) and waits for their default ServiceAccount,
// without which the ServiceAccount admission plugin rejects pods.
func (s *seeder) namespaces(ctx context.Context) error {
	names := s.plan.Namespaces
	return parallel(ctx, min(s.concurrency, 32), len(names), func(ctx context.Context, w, i int) error {
		c := s.client(w)
		ns := &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: names[i], Labels: map[string]string{seedLabel: "true"}}}
		err := retry(ctx, func() error {
			_, err := c.CoreV1().Namespaces().Create(ctx, ns, metav1.CreateOptions{FieldManager: fieldManager})
			if apierrors.IsAlreadyExists(err) {
				got, gerr := c.CoreV1().Namespaces().Get(ctx, names[i], metav1.GetOptions{})
				if gerr != nil {
					return gerr
				}
				if got.DeletionTimestamp != nil {
					return fmt.Errorf("namespace %s is being deleted; wait until it is gone (seed clean --prefix ... waits)", names[i])
				}
				return nil
			}
			return err
		})
		if err != nil {
			return fmt.Errorf("creating namespace %s: %w", names[i], err)
		}
		return waitForServiceAccount(ctx, c, names[i], 2*time.Minute)
	})
}

func waitForServiceAccount(ctx context.Context, c kubernetes.Interface, ns string, timeout time.Duration) error {
	deadline := time.Now().Add(timeout)
	for {
		_, err := c.CoreV1().ServiceAccounts(ns).Get(ctx, "default", metav1.GetOptions{})
		if err == nil {
			return nil
		}
		if !apierrors.IsNotFound(err) && !retriable(err) {
			return fmt.Errorf("waiting for ServiceAccount %s/default: %w", ns, err)
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("ServiceAccount %s/default did not appear within %s: is kube-controller-manager (serviceaccount controller) running? last error: %w", ns, timeout, err)
		}
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-time.After(100 * time.Millisecond):
		}
	}
}

// createOwners creates the owner objects, Deployments before their ReplicaSets, and records
// their UIDs. Objects that already exist (a re-run) are looked up instead.
func (s *seeder) createOwners(ctx context.Context) error {
	owners := s.plan.Owners
	err := parallel(ctx, s.concurrency, len(owners), func(ctx context.Context, w, i int) error {
		o := owners[i]
		if o.Kind == kindBare {
			return nil
		}
		c := s.client(w)
		var (
			uid types.UID
			err error
		)
		switch o.Kind {
		case kindReplicaSet:
			uid, err = s.createDeployment(ctx, c, o)
			o.DeploymentUID = uid
		case kindDaemonSet:
			uid, err = createOrGet(ctx, o, o.Name, o.daemonSetObject,
				c.AppsV1().DaemonSets(o.Namespace).Create, c.AppsV1().DaemonSets(o.Namespace).Get)
			o.UID = uid
		case kindStatefulSet:
			uid, err = createOrGet(ctx, o, o.Name, o.statefulSetObject,
				c.AppsV1().StatefulSets(o.Namespace).Create, c.AppsV1().StatefulSets(o.Namespace).Get)
			o.UID = uid
		case kindJob:
			uid, err = createOrGet(ctx, o, o.Name, o.jobObject,
				c.BatchV1().Jobs(o.Namespace).Create, c.BatchV1().Jobs(o.Namespace).Get)
			o.UID = uid
		}
		if err != nil {
			return err
		}
		s.owners.Add(1)
		return nil
	})
	if err != nil {
		return err
	}
	var rs []*owner
	for _, o := range owners {
		if o.Kind == kindReplicaSet {
			rs = append(rs, o)
		}
	}
	return parallel(ctx, s.concurrency, len(rs), func(ctx context.Context, w, i int) error {
		o := rs[i]
		c := s.client(w)
		uid, err := createOrGet(ctx, o, o.Name, o.replicaSetObject,
			c.AppsV1().ReplicaSets(o.Namespace).Create, c.AppsV1().ReplicaSets(o.Namespace).Get)
		if err != nil {
			return err
		}
		o.UID = uid
		s.owners.Add(1)
		return nil
	})
}

func (s *seeder) createDeployment(ctx context.Context, c kubernetes.Interface, o *owner) (types.UID, error) {
	return createOrGet(ctx, o, o.Deployment, o.deploymentObject,
		c.AppsV1().Deployments(o.Namespace).Create, c.AppsV1().Deployments(o.Namespace).Get)
}

// createOrGet creates the object build returns, or gets the existing one of that name, and
// returns its UID.
func createOrGet[T metav1.Object](ctx context.Context, o *owner, name string, build func() (T, error),
	create func(context.Context, T, metav1.CreateOptions) (T, error),
	get func(context.Context, string, metav1.GetOptions) (T, error)) (types.UID, error) {
	obj, err := build()
	if err != nil {
		return "", fmt.Errorf("building %s/%s: %w", o.Namespace, name, err)
	}
	var uid types.UID
	err = retry(ctx, func() error {
		got, err := create(ctx, obj, metav1.CreateOptions{FieldManager: fieldManager})
		if apierrors.IsAlreadyExists(err) {
			got, err = get(ctx, name, metav1.GetOptions{})
		}
		if err == nil {
			uid = got.GetUID()
		}
		return err
	})
	if err != nil {
		kind := fmt.Sprintf("%T", obj)
		kind = kind[strings.LastIndex(kind, ".")+1:]
		return "", fmt.Errorf("creating %s %s/%s: %w", kind, o.Namespace, name, err)
	}
	return uid, nil
}

type podRef struct {
	o *owner
	s *podSlot
}

// createPods applies every pod, then its status.
func (s *seeder) createPods(ctx context.Context) error {
	var refs []podRef
	for _, o := range s.plan.Owners {
		for _, slot := range o.Pods {
			refs = append(refs, podRef{o, slot})
		}
	}
	return parallel(ctx, s.concurrency, len(refs), func(ctx context.Context, w, i int) error {
		o, slot := refs[i].o, refs[i].s
		c := s.client(w)
		pods := c.CoreV1().Pods(o.Namespace)
		pa := o.podApply(slot)
		if s.mode == "create" {
			return s.createPod(ctx, pods, pa, slot)
		}
		err := retry(ctx, func() error { return applyPodQuietly(ctx, c, pa, fieldManager, false) })
		if apierrors.IsInvalid(err) && strings.Contains(err.Error(), "pod updates may not change fields") {
			// A pod of the same name from an earlier run with other flags: replace it.
			err = retry(ctx, func() error {
				err := pods.Delete(ctx, slot.Name, metav1.DeleteOptions{GracePeriodSeconds: ptr(int64(0))})
				if err != nil && !apierrors.IsNotFound(err) {
					return err
				}
				return applyPodQuietly(ctx, c, pa, fieldManager, false)
			})
		}
		if err != nil {
			return fmt.Errorf("applying pod %s/%s: %w", o.Namespace, slot.Name, err)
		}
		st := podStatus(pa, ipFor(slot.IP), slot.Seed, seedStartTime(slot.Seed, s.plan.Base), s.plan.Base)
		if err := retry(ctx, func() error { return applyPodQuietly(ctx, c, st, statusManager, true) }); err != nil {
			return fmt.Errorf("applying status of pod %s/%s: %w", o.Namespace, slot.Name, err)
		}
		s.pods.Add(1)
		return nil
	})
}

// logf prints a diagnostic line to stderr.
func logf(format string, args ...any) { fmt.Fprintf(os.Stderr, "seed: "+format+"\n", args...) }

// createPod writes a pod as a controller and a kubelet do: create, then update the status.
func (s *seeder) createPod(ctx context.Context, pods typedcorev1.PodInterface, pa *corev1ac.PodApplyConfiguration, slot *podSlot) error {
	var pod corev1.Pod
	if err := convert(pa, &pod); err != nil {
		return err
	}
	var got *corev1.Pod
	err := retry(ctx, func() (err error) {
		got, err = pods.Create(ctx, &pod, metav1.CreateOptions{FieldManager: fieldManager})
		if apierrors.IsAlreadyExists(err) {
			got, err = pods.Get(ctx, pod.Name, metav1.GetOptions{})
		}
		return err
	})
	if err != nil {
		return fmt.Errorf("creating pod %s/%s: %w", pod.Namespace, pod.Name, err)
	}
	var st corev1.Pod
	if err := convert(podStatus(pa, ipFor(slot.IP), slot.Seed, seedStartTime(slot.Seed, s.plan.Base), s.plan.Base), &st); err != nil {
		return err
	}
	got.Status = st.Status
	err = retry(ctx, func() error {
		_, err := pods.UpdateStatus(ctx, got, metav1.UpdateOptions{FieldManager: statusManager})
		if apierrors.IsConflict(err) {
			cur, gerr := pods.Get(ctx, got.Name, metav1.GetOptions{})
			if gerr != nil {
				return gerr
			}
			cur.Status = st.Status
			got = cur
		}
		return err
	})
	if err != nil {
		return fmt.Errorf("updating status of pod %s/%s: %w", pod.Namespace, pod.Name, err)
	}
	s.pods.Add(1)
	return nil
}

// convert turns an apply configuration into the typed object.
func convert(in, out any) error {
	b, err := json.Marshal(in)
	if err == nil {
		err = json.Unmarshal(b, out)
	}
	return err
}
