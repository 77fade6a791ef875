package crcache_test

// A predicate comparing the old and new spec behaves over crcache as over the default cache:
// the old side of an update is the object before it, whole, not its metadata alone.

import (
	"context"
	"fmt"
	"slices"
	"sync"
	"testing"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/utils/ptr"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/cache"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/event"
	"sigs.k8s.io/controller-runtime/pkg/predicate"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"

	"informerd.io/clients/go/crcache"
)

// deadlineChanges records the updates a spec-comparing predicate lets through.
type deadlineChanges struct {
	mu    sync.Mutex
	lines []string
}

func (d *deadlineChanges) predicate() predicate.Funcs {
	show := func(v *int64) string {
		if v == nil {
			return "unset"
		}
		return fmt.Sprint(*v)
	}
	return predicate.Funcs{
		CreateFunc:  func(event.CreateEvent) bool { return false },
		DeleteFunc:  func(event.DeleteEvent) bool { return false },
		GenericFunc: func(event.GenericEvent) bool { return false },
		UpdateFunc: func(e event.UpdateEvent) bool {
			before, after := e.ObjectOld.(*corev1.Pod), e.ObjectNew.(*corev1.Pod)
			a, b := before.Spec.ActiveDeadlineSeconds, after.Spec.ActiveDeadlineSeconds
			if show(a) == show(b) {
				return false
			}
			d.mu.Lock()
			defer d.mu.Unlock()
			d.lines = append(d.lines, fmt.Sprintf("%s %s->%s", after.Name, show(a), show(b)))
			return true
		},
	}
}

func (d *deadlineChanges) get() []string {
	d.mu.Lock()
	defer d.mu.Unlock()
	return slices.Clone(d.lines)
}

func TestSpecPredicateBothCaches(t *testing.T) {
	e := setup(t)
	nsDefault, nsInformerd := e.Namespace(t, "predd"), e.Namespace(t, "predi")
	s := e.StartSidecar(t, func(sock string) string { return config(sock, nsInformerd) })
	seen := map[string]*deadlineChanges{}
	for _, which := range []struct{ name, ns string }{{"default", nsDefault}, {"informerd", nsInformerd}} {
		opts := ctrl.Options{Cache: cache.Options{DefaultNamespaces: map[string]cache.Config{which.ns: {}}}}
		if which.name == "informerd" {
			opts = ctrl.Options{NewCache: crcache.NewCacheFunc(crcache.Options{Target: "unix://" + s.Socket})}
		}
		d := &deadlineChanges{}
		seen[which.name] = d
		startManager(t, e, opts, func(mgr ctrl.Manager) error {
			return ctrl.NewControllerManagedBy(mgr).Named("deadline-" + which.name).
				For(&corev1.Pod{}).WithEventFilter(d.predicate()).
				Complete(reconcile.Func(func(context.Context, reconcile.Request) (reconcile.Result, error) {
					return reconcile.Result{}, nil
				}))
		})
	}
	// The same churn in both namespaces: label-only updates, which the predicate must skip,
	// between spec updates, which it must pass with the right old value.
	var want []string
	for _, ns := range []string{nsDefault, nsInformerd} {
		e.create(t, pod(ns, "p", "", map[string]string{"round": "0"}))
	}
	for i, deadline := range []int64{300, 200, 100} {
		for _, ns := range []string{nsDefault, nsInformerd} {
			var p corev1.Pod
			if err := e.kube.Get(context.Background(), client.ObjectKey{Namespace: ns, Name: "p"}, &p); err != nil {
				t.Fatal(err)
			}
			setLabel(t, e, &p, "round", fmt.Sprint(i+1))
			if err := e.kube.Get(context.Background(), client.ObjectKey{Namespace: ns, Name: "p"}, &p); err != nil {
				t.Fatal(err)
			}
			p.Spec.ActiveDeadlineSeconds = ptr.To(deadline)
			if err := e.kube.Update(context.Background(), &p); err != nil {
				t.Fatal(err)
			}
		}
		before := "unset"
		if i > 0 {
			before = fmt.Sprint([]int64{300, 200, 100}[i-1])
		}
		want = append(want, fmt.Sprintf("p %s->%d", before, deadline))
	}
	for _, which := range []string{"default", "informerd"} {
		eventually(t, which+" sees each spec change once, with its old value", func() string {
			if got := seen[which].get(); !slices.Equal(got, want) {
				return fmt.Sprintf("got %q, want %q", got, want)
			}
			return ""
		})
	}
}
