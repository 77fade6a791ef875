// Package labelctl is the controller written as controller-runtime's documentation teaches that
// both the comparison test (compare_test.go: same churn, default cache against crcache) and the
// heap benchmark (cmd/heapbench) run, so that the benchmark measures the controller the test
// proves equivalent. It copies each Deployment's "team" label, and the "zone" label of each
// pod's node, onto the Deployment's pods: For Deployments, Owns pods, Watches nodes (mapped
// through an index on spec.nodeName). It records its own writes and read-backs so that a test
// can check it never read a pod older than its own last write.
package labelctl

import (
	"context"
	"fmt"
	"strconv"
	"sync"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/handler"
	"sigs.k8s.io/controller-runtime/pkg/log"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"
)

// NodeNameField is the index the controller maps a node to its pods' Deployments by.
const NodeNameField = "spec.nodeName"

// Reconciler is the label controller's reconciler.
type Reconciler struct {
	client.Client

	mu         sync.Mutex
	lastWrite  map[types.NamespacedName]string // pod -> resourceVersion of our last write
	stats      Stats
	reconciles int
	reconciled map[types.NamespacedName]struct{} // Deployments reconciled at least once
}

// Stats is what the reconciler saw of its own writes.
type Stats struct {
	Writes     int      // pod patches
	Reads      int      // Gets of pods we wrote, at our last write's resourceVersion
	StaleLists int      // listed pods older than our last write of them
	StaleReads []string // Gets that returned a pod older than our last write
}

// Setup registers the spec.nodeName index and the controller named name with the manager.
func Setup(ctx context.Context, mgr ctrl.Manager, name string) (*Reconciler, error) {
	r := &Reconciler{Client: mgr.GetClient(), lastWrite: map[types.NamespacedName]string{},
		reconciled: map[types.NamespacedName]struct{}{}}
	if err := mgr.GetFieldIndexer().IndexField(ctx, &corev1.Pod{}, NodeNameField, func(o client.Object) []string {
		return []string{o.(*corev1.Pod).Spec.NodeName}
	}); err != nil {
		return nil, err
	}
	err := ctrl.NewControllerManagedBy(mgr).
		Named(name).
		For(&appsv1.Deployment{}).
		Owns(&corev1.Pod{}).
		Watches(&corev1.Node{}, handler.EnqueueRequestsFromMapFunc(r.deploymentsOnNode)).
		Complete(r)
	return r, err
}

// Stats returns a copy of what the reconciler saw so far.
func (r *Reconciler) Stats() Stats {
	r.mu.Lock()
	defer r.mu.Unlock()
	s := r.stats
	s.StaleReads = append([]string(nil), s.StaleReads...)
	return s
}

// Reconciles is how many reconciles have run.
func (r *Reconciler) Reconciles() int {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.reconciles
}

// Reconciled reports whether the Deployment key has been reconciled at least once.
func (r *Reconciler) Reconciled(key types.NamespacedName) bool {
	r.mu.Lock()
	defer r.mu.Unlock()
	_, ok := r.reconciled[key]
	return ok
}

func (r *Reconciler) Reconcile(ctx context.Context, req reconcile.Request) (reconcile.Result, error) {
	r.mu.Lock()
	r.reconciles++
	r.reconciled[req.NamespacedName] = struct{}{}
	r.mu.Unlock()
	var d appsv1.Deployment
	if err := r.Get(ctx, req.NamespacedName, &d); err != nil {
		return reconcile.Result{}, client.IgnoreNotFound(err)
	}
	sel, err := metav1.LabelSelectorAsSelector(d.Spec.Selector)
	if err != nil {
		return reconcile.Result{}, err
	}
	var pods corev1.PodList
	if err := r.List(ctx, &pods, client.InNamespace(d.Namespace), client.MatchingLabelsSelector{Selector: sel}); err != nil {
		return reconcile.Result{}, err
	}
	for i := range pods.Items {
		if !metav1.IsControlledBy(&pods.Items[i], &d) {
			continue
		}
		p, err := r.fresh(ctx, &pods.Items[i])
		if err != nil {
			return reconcile.Result{}, client.IgnoreNotFound(err)
		}
		zone := ""
		var node corev1.Node
		if err := r.Get(ctx, client.ObjectKey{Name: p.Spec.NodeName}, &node); err == nil {
			zone = node.Labels["zone"]
		} else if !apierrors.IsNotFound(err) {
			return reconcile.Result{}, err
		}
		if p.Labels["team"] == d.Labels["team"] && p.Labels["zone"] == zone {
			continue
		}
		patch := client.MergeFrom(p.DeepCopy())
		if p.Labels == nil {
			p.Labels = map[string]string{}
		}
		p.Labels["team"], p.Labels["zone"] = d.Labels["team"], zone
		if err := r.Patch(ctx, p, patch); err != nil {
			return reconcile.Result{}, client.IgnoreNotFound(err)
		}
		r.mu.Lock()
		r.lastWrite[client.ObjectKeyFromObject(p)] = p.ResourceVersion
		r.stats.Writes++
		r.mu.Unlock()
	}
	return reconcile.Result{}, nil
}

// fresh returns the listed pod or, if we have written it, the pod read with Get at our last
// write's resourceVersion or later ("not older than", as the API server reads it; the default
// cache ignores it, the informerd cache waits for it).
func (r *Reconciler) fresh(ctx context.Context, p *corev1.Pod) (*corev1.Pod, error) {
	key := client.ObjectKeyFromObject(p)
	r.mu.Lock()
	written := r.lastWrite[key]
	r.mu.Unlock()
	if written == "" {
		return p, nil
	}
	var got corev1.Pod
	if err := r.Get(ctx, key, &got, &client.GetOptions{Raw: &metav1.GetOptions{ResourceVersion: written}}); err != nil {
		return nil, err
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	r.stats.Reads++
	if RVLess(p.ResourceVersion, written) {
		r.stats.StaleLists++
	}
	if RVLess(got.ResourceVersion, written) {
		r.stats.StaleReads = append(r.stats.StaleReads, fmt.Sprintf("%s: read rv %s after writing rv %s", key, got.ResourceVersion, written))
	}
	return &got, nil
}

// deploymentsOnNode maps a node to the Deployments of the pods on it, by the spec.nodeName index.
func (r *Reconciler) deploymentsOnNode(ctx context.Context, node client.Object) []reconcile.Request {
	var pods corev1.PodList
	if err := r.List(ctx, &pods, client.MatchingFields{NodeNameField: node.GetName()}); err != nil {
		log.FromContext(ctx).Error(err, "list pods on node")
		return nil
	}
	var reqs []reconcile.Request
	for _, p := range pods.Items {
		if ref := metav1.GetControllerOf(&p); ref != nil && ref.Kind == "Deployment" {
			reqs = append(reqs, reconcile.Request{NamespacedName: types.NamespacedName{Namespace: p.Namespace, Name: ref.Name}})
		}
	}
	return reqs
}

// RVLess reports whether resourceVersion a is older than b. Kubernetes calls resourceVersions
// opaque; the control plane these tests run (etcd) gives numbers, which the tests compare.
func RVLess(a, b string) bool {
	x, _ := strconv.ParseUint(a, 10, 64)
	y, _ := strconv.ParseUint(b, 10, 64)
	return x < y
}
