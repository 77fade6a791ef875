package crcache_test

// The cache options a multi-namespace or selective operator sets (DefaultNamespaces, ByObject,
// label and field selectors, transforms) narrow what the manager reads and watches, as they do
// with controller-runtime's default cache.

import (
	"context"
	"slices"
	"strings"
	"testing"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/fields"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/client-go/kubernetes/scheme"
	"sigs.k8s.io/controller-runtime/pkg/cache"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"informerd.io/clients/go/crcache"
)

// startCacheWith is startCache with controller-runtime's cache options.
func startCacheWith(t *testing.T, s *sidecar, opts cache.Options) *crcache.Cache {
	t.Helper()
	opts.Scheme = scheme.Scheme
	c, err := crcache.New(crcache.Options{Client: s.Client()}, opts)
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- c.Start(ctx) }()
	t.Cleanup(func() {
		cancel()
		if err := <-done; err != nil {
			t.Errorf("cache Start: %v", err)
		}
	})
	return c
}

// mark is a transform that labels what it sees, so that a test sees it ran.
func mark(obj any) (any, error) {
	o := obj.(client.Object)
	l := o.GetLabels()
	if l == nil {
		l = map[string]string{}
	}
	l["transformed"] = "yes"
	o.SetLabels(l)
	return o, nil
}

func podKeys(list *corev1.PodList) []string {
	var out []string
	for _, p := range list.Items {
		out = append(out, p.Namespace+"/"+p.Name+" "+p.Labels["transformed"])
	}
	slices.Sort(out)
	return out
}

func TestDefaultNamespacesAndSelectors(t *testing.T) {
	e := setup(t)
	ns1, ns2, ns3 := e.Namespace(t, "view-a"), e.Namespace(t, "view-b"), e.Namespace(t, "view-c")
	s := e.StartSidecar(t, func(sock string) string { return config(sock, ns1, ns2, ns3) })
	ctx := context.Background()
	web := map[string]string{"app": "web"}
	pods := []*corev1.Pod{
		pod(ns1, "a", "node-1", web), pod(ns1, "b", "node-1", map[string]string{"app": "db"}),
		pod(ns2, "c", "node-2", web), pod(ns3, "d", "node-1", web),
	}
	for _, p := range pods {
		e.create(t, p)
	}
	all := startCache(t, s)
	for _, p := range pods {
		waitSeen(t, all, p)
	}

	c := startCacheWith(t, s, cache.Options{
		DefaultNamespaces: map[string]cache.Config{
			ns1: {LabelSelector: labels.SelectorFromSet(web)},
			ns2: {},
		},
		DefaultTransform: mark,
	})
	var list corev1.PodList
	if err := c.List(ctx, &list); err != nil {
		t.Fatal(err)
	}
	want := []string{ns1 + "/a yes", ns2 + "/c yes"}
	if got := podKeys(&list); !slices.Equal(got, want) {
		t.Errorf("List of every namespace: %v, want %v (b's labels and d's namespace are outside the view)", got, want)
	}
	if err := c.List(ctx, &list, client.InNamespace(ns3)); err == nil || !strings.Contains(err.Error(), "unknown namespace") {
		t.Errorf("List of a namespace outside DefaultNamespaces: %v, want the default cache's unknown-namespace error", err)
	}
	var got corev1.Pod
	if err := c.Get(ctx, client.ObjectKeyFromObject(pods[0]), &got); err != nil || got.Labels["transformed"] != "yes" {
		t.Errorf("Get %s/a: %v, labels %v; want it, transformed", ns1, err, got.Labels)
	}
	if err := c.Get(ctx, client.ObjectKeyFromObject(pods[1]), &got); !apierrors.IsNotFound(err) {
		t.Errorf("Get of an object outside the namespace's label selector: %v, want NotFound", err)
	}
	if err := c.Get(ctx, client.ObjectKeyFromObject(pods[3]), &got); err == nil || !strings.Contains(err.Error(), "unknown namespace") {
		t.Errorf("Get in a namespace outside DefaultNamespaces: %v, want the unknown-namespace error", err)
	}

	// The informer's initial state is the view, and an object leaving the selector is deleted.
	inf, err := c.GetInformer(ctx, &corev1.Pod{})
	if err != nil {
		t.Fatal(err)
	}
	rec := &recorder{}
	reg, err := inf.AddEventHandler(rec.handler())
	if err != nil {
		t.Fatal(err)
	}
	eventually(t, "the handler syncs", func() string {
		if reg.HasSynced() {
			return ""
		}
		return "not synced"
	})
	if rec.count() != 2 || !rec.has("add *v1.Pod a v= initial=true") || !rec.has("add *v1.Pod c v= initial=true") {
		t.Errorf("initial additions: %s; want a and c only", rec)
	}
	setLabel(t, e, pods[0], "app", "db")
	rec.waitFor(t, "the handler", "delete *v1.Pod a v=")

	// A namespace the sidecar does not cache is an error naming the configuration to add,
	// never an empty list.
	wider := startCacheWith(t, s, cache.Options{DefaultNamespaces: map[string]cache.Config{ns1: {}, "elsewhere": {}}})
	err = wider.List(ctx, &list)
	if err == nil || !strings.Contains(err.Error(), "elsewhere") || !strings.Contains(err.Error(), "`namespaces:`") {
		t.Errorf("DefaultNamespaces with a namespace informerd does not cache: %v; want an error naming it and `namespaces:`", err)
	}
}

func TestByObjectSelectors(t *testing.T) {
	e := setup(t)
	ns1, ns2 := e.Namespace(t, "byobj-a"), e.Namespace(t, "byobj-b")
	s := e.StartSidecar(t, func(sock string) string { return config(sock, ns1, ns2) })
	ctx := context.Background()
	pods := []*corev1.Pod{pod(ns1, "a", "node-1", nil), pod(ns1, "b", "node-2", nil), pod(ns2, "c", "node-1", nil)}
	for _, p := range pods {
		e.create(t, p)
	}
	all := startCache(t, s)
	for _, p := range pods {
		waitSeen(t, all, p)
	}

	// A field the sidecar indexes by path (spec.nodeName) and one it always can (metadata.name).
	c := startCacheWith(t, s, cache.Options{ByObject: map[client.Object]cache.ByObject{
		&corev1.Pod{}: {Field: fields.OneTermEqualSelector("spec.nodeName", "node-1"), Transform: mark},
	}})
	var list corev1.PodList
	if err := c.List(ctx, &list); err != nil {
		t.Fatal(err)
	}
	if got, want := podKeys(&list), []string{ns1 + "/a yes", ns2 + "/c yes"}; !slices.Equal(got, want) {
		t.Errorf("ByObject field selector spec.nodeName=node-1: %v, want %v", got, want)
	}
	var got corev1.Pod
	if err := c.Get(ctx, client.ObjectKeyFromObject(pods[1]), &got); !apierrors.IsNotFound(err) {
		t.Errorf("Get of a pod outside the field selector: %v, want NotFound", err)
	}
	byName := startCacheWith(t, s, cache.Options{
		DefaultFieldSelector: fields.OneTermEqualSelector("metadata.name", "b"),
		ByObject: map[client.Object]cache.ByObject{
			&corev1.Pod{}: {Namespaces: map[string]cache.Config{ns1: {}}},
		},
	})
	if err := byName.List(ctx, &list); err != nil {
		t.Fatal(err)
	}
	if got, want := podKeys(&list), []string{ns1 + "/b "}; !slices.Equal(got, want) {
		t.Errorf("ByObject namespaces with the default field selector metadata.name=b: %v, want %v", got, want)
	}

	// A field the sidecar cannot select by is an error naming what it can, never a silent
	// superset.
	bad := startCacheWith(t, s, cache.Options{DefaultFieldSelector: fields.OneTermEqualSelector("spec.restartPolicy", "Never")})
	err := bad.List(ctx, &list)
	if err == nil || !strings.Contains(err.Error(), "spec.restartPolicy") || !strings.Contains(err.Error(), "spec.nodeName") {
		t.Errorf("a field selector on a field informerd does not index: %v; want an error naming the field and the selectable ones", err)
	}
}
