package crcache_test

import (
	"context"
	"fmt"
	"strings"
	"sync"
	"testing"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	toolscache "k8s.io/client-go/tools/cache"
	"sigs.k8s.io/controller-runtime/pkg/client"
)

// recorder is a handler that writes down what it receives, one line per call.
type recorder struct {
	mu    sync.Mutex
	lines []string
}

func (r *recorder) add(format string, args ...any) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.lines = append(r.lines, fmt.Sprintf(format, args...))
}

func (r *recorder) has(line string) bool {
	r.mu.Lock()
	defer r.mu.Unlock()
	for _, l := range r.lines {
		if l == line {
			return true
		}
	}
	return false
}

func (r *recorder) count() int {
	r.mu.Lock()
	defer r.mu.Unlock()
	return len(r.lines)
}

func (r *recorder) String() string {
	r.mu.Lock()
	defer r.mu.Unlock()
	return strings.Join(r.lines, "\n")
}

// describe is "Type name labels" of an object, to check both the Go type each handler gets and
// what it carries.
func describe(obj any) string {
	o, ok := obj.(client.Object)
	if !ok {
		return fmt.Sprintf("%T", obj)
	}
	return fmt.Sprintf("%T %s v=%s", o, o.GetName(), o.GetLabels()["v"])
}

func (r *recorder) handler() toolscache.ResourceEventHandler {
	return toolscache.ResourceEventHandlerDetailedFuncs{
		AddFunc: func(obj any, initial bool) { r.add("add %s initial=%t", describe(obj), initial) },
		UpdateFunc: func(old, obj any) {
			r.add("update %s -> %s", describe(old), describe(obj))
			if p, ok := old.(*corev1.Pod); ok && len(p.Spec.Containers) > 0 {
				r.add("old spec %s image=%s", p.Name, p.Spec.Containers[0].Image)
			}
		},
		DeleteFunc: func(obj any) {
			if t, ok := obj.(toolscache.DeletedFinalStateUnknown); ok {
				r.add("tombstone %s %s", t.Key, describe(t.Obj))
				return
			}
			r.add("delete %s", describe(obj))
		},
	}
}

func (r *recorder) waitFor(t *testing.T, who, line string) {
	t.Helper()
	eventually(t, who+" receives "+line, func() string {
		if r.has(line) {
			return ""
		}
		return "it has:\n" + r.String()
	})
}

func TestInformerHandlers(t *testing.T) {
	e := setup(t)
	ns := e.Namespace(t, "inf")
	s := e.StartSidecar(t, func(sock string) string { return config(sock, ns) })
	c := startCache(t, s)
	ctx := context.Background()
	before := pod(ns, "before", "", map[string]string{"v": "0"})
	e.create(t, before)
	waitSeen(t, c, before)

	typed, err := c.GetInformer(ctx, &corev1.Pod{})
	if err != nil {
		t.Fatal(err)
	}
	if !typed.HasSynced() || typed.IsStopped() {
		t.Fatalf("GetInformer after Start: HasSynced %t, IsStopped %t; want a synced, running informer", typed.HasSynced(), typed.IsStopped())
	}
	a := &recorder{}
	regA, err := typed.AddEventHandler(a.handler())
	if err != nil {
		t.Fatal(err)
	}
	eventually(t, "handler A synced", func() string {
		if regA.HasSynced() {
			return ""
		}
		return "not yet"
	})
	if !a.has("add *v1.Pod before v=0 initial=true") {
		t.Fatalf("a handler added after sync gets the current objects as initial additions; it got:\n%s", a)
	}

	p := pod(ns, "p1", "", map[string]string{"v": "1"})
	e.create(t, p)
	a.waitFor(t, "A", "add *v1.Pod p1 v=1 initial=false")
	p.Labels["v"] = "2"
	if err := e.kube.Update(ctx, p); err != nil {
		t.Fatal(err)
	}
	// The old side is the object before the update, whole (the sidecar sends it).
	a.waitFor(t, "A", "update *v1.Pod p1 v=1 -> *v1.Pod p1 v=2")
	if !a.has("old spec p1 image=" + p.Spec.Containers[0].Image) {
		t.Errorf("ObjectOld of an update carries the old spec; handler A got:\n%s", a)
	}

	// A late handler of another shape shares the same watch.
	uobj := &unstructured.Unstructured{}
	uobj.SetGroupVersionKind(podGVK)
	untyped, err := c.GetInformer(ctx, uobj)
	if err != nil {
		t.Fatal(err)
	}
	b := &recorder{}
	regB, err := untyped.AddEventHandlerWithOptions(b.handler(), toolscache.HandlerOptions{})
	if err != nil {
		t.Fatal(err)
	}
	b.waitFor(t, "B", "add *unstructured.Unstructured before v=0 initial=true")
	b.waitFor(t, "B", "add *unstructured.Unstructured p1 v=2 initial=true")
	eventually(t, "handler B synced", func() string {
		if regB.HasSynced() {
			return ""
		}
		return "not yet"
	})
	st, err := s.Client().Status(ctx, "pods")
	if err != nil {
		t.Fatal(err)
	}
	if w := st.GetResources()[0].GetWatchers(); w != 1 {
		t.Errorf("informerd serves %d watches of pods to one cache with two handlers of two shapes; want 1", w)
	}

	// A removed handler receives nothing more; removing twice is fine.
	if err := typed.RemoveEventHandler(regA); err != nil {
		t.Fatal(err)
	}
	if err := typed.RemoveEventHandler(regA); err != nil {
		t.Errorf("removing a handler twice: %v", err)
	}
	seenByA := a.count()
	p.Labels["v"] = "3"
	if err := e.kube.Update(ctx, p); err != nil {
		t.Fatal(err)
	}
	b.waitFor(t, "B", "update *unstructured.Unstructured p1 v=2 -> *unstructured.Unstructured p1 v=3")
	if err := e.kube.Delete(ctx, p, client.GracePeriodSeconds(0)); err != nil {
		t.Fatal(err)
	}
	b.waitFor(t, "B", "delete *unstructured.Unstructured p1 v=3")
	if n := a.count(); n != seenByA {
		t.Errorf("handler A received %d calls after it was removed:\n%s", n-seenByA, a)
	}

	// A deletion the watch could not see (the sidecar was down) arrives by relisting as a
	// tombstone carrying the object's identity (the process keeps no copy of its labels).
	s.Stop()
	if err := e.kube.Delete(ctx, before, client.GracePeriodSeconds(0)); err != nil {
		t.Fatal(err)
	}
	s.Start()
	s.WaitSynced()
	b.waitFor(t, "B", fmt.Sprintf("tombstone %s/before *unstructured.Unstructured before v=", ns))

	if err := c.RemoveInformer(ctx, &corev1.Pod{}); err != nil {
		t.Fatal(err)
	}
	if !typed.IsStopped() || !untyped.IsStopped() {
		t.Errorf("after RemoveInformer: IsStopped %t, %t; want true", typed.IsStopped(), untyped.IsStopped())
	}
	if _, err := typed.AddEventHandler(a.handler()); err == nil {
		t.Errorf("adding a handler to a stopped informer succeeded; client-go refuses it")
	}
}
