package crcache_test

// A controller started over objects that exist already reconciles each of them once at start,
// as with controller-runtime's default cache: the informer's initial list reaches its handlers
// as Adds, and the controller's workers run them.

import (
	"context"
	"fmt"
	"maps"
	"slices"
	"sync"
	"testing"

	"github.com/go-logr/logr"
	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/kubernetes/scheme"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/log"
	metricsserver "sigs.k8s.io/controller-runtime/pkg/metrics/server"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"

	"informerd.io/clients/go/crcache"
)

// seen records the requests a controller reconciled.
type seen struct {
	mu   sync.Mutex
	keys map[types.NamespacedName]int
}

func (s *seen) Reconcile(_ context.Context, req reconcile.Request) (reconcile.Result, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.keys[req.NamespacedName]++
	return reconcile.Result{}, nil
}

// missing is the keys of want not reconciled yet.
func (s *seen) missing(want []types.NamespacedName) []string {
	s.mu.Lock()
	defer s.mu.Unlock()
	var out []string
	for _, k := range want {
		if s.keys[k] == 0 {
			out = append(out, k.String())
		}
	}
	return out
}

func TestControllerReconcilesEveryExistingObjectAtStart(t *testing.T) {
	log.SetLogger(logr.Discard())
	e := setup(t)
	ns := e.Namespace(t, "initial")
	var pods, deployments []types.NamespacedName
	for d := range 3 {
		dep := deployment(ns, fmt.Sprintf("d%d", d), map[string]string{"app": fmt.Sprintf("d%d", d)})
		e.create(t, dep)
		deployments = append(deployments, client.ObjectKeyFromObject(dep))
		for i := range 10 {
			p := pod(ns, fmt.Sprintf("d%d-p%d", d, i), "", maps.Clone(dep.Spec.Selector.MatchLabels))
			p.OwnerReferences = []metav1.OwnerReference{*metav1.NewControllerRef(dep, appsv1.SchemeGroupVersion.WithKind("Deployment"))}
			e.create(t, p)
			pods = append(pods, client.ObjectKeyFromObject(p))
		}
	}
	s := e.StartSidecar(t, func(sock string) string { return config(sock, ns) })

	mgr, err := ctrl.NewManager(e.Config, ctrl.Options{
		Scheme:                 scheme.Scheme,
		Metrics:                metricsserver.Options{BindAddress: "0"},
		HealthProbeBindAddress: "0",
		NewCache:               crcache.NewCacheFunc(crcache.Options{Target: "unix://" + s.Socket}),
	})
	if err != nil {
		t.Fatal(err)
	}
	// One controller of each pod, and one of Deployments owning pods (as labelctl): each
	// reconciles what exists once the manager starts, with no change made after.
	podCtl := &seen{keys: map[types.NamespacedName]int{}}
	if err := ctrl.NewControllerManagedBy(mgr).Named("initial-pods").For(&corev1.Pod{}).Complete(podCtl); err != nil {
		t.Fatal(err)
	}
	depCtl := &seen{keys: map[types.NamespacedName]int{}}
	if err := ctrl.NewControllerManagedBy(mgr).Named("initial-deployments").For(&appsv1.Deployment{}).
		Owns(&corev1.Pod{}).Complete(depCtl); err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- mgr.Start(ctx) }()
	t.Cleanup(func() {
		cancel()
		if err := <-done; err != nil {
			t.Errorf("manager: %v", err)
		}
	})

	eventually(t, "every pod reconciled by the pod controller", func() string {
		if m := podCtl.missing(pods); len(m) > 0 {
			return fmt.Sprintf("%d of %d pods not reconciled, e.g. %v", len(m), len(pods), m[:min(3, len(m))])
		}
		return ""
	})
	eventually(t, "every Deployment reconciled by the Deployment controller", func() string {
		if m := depCtl.missing(deployments); len(m) > 0 {
			return fmt.Sprintf("Deployments not reconciled: %v", slices.Sorted(slices.Values(m)))
		}
		return ""
	})
}
