package crcache_test

import (
	"context"
	"errors"
	"fmt"
	"maps"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/fields"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/client-go/kubernetes/scheme"
	toolscache "k8s.io/client-go/tools/cache"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/cache"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"informerd.io/clients/go/crcache"
	"informerd.io/clients/go/crcache/internal/labelctl"
)

var podGVK = corev1.SchemeGroupVersion.WithKind("Pod")

// waitSeen waits until the sidecar holds this resourceVersion of the pod (or a later one).
func waitSeen(t *testing.T, c *crcache.Cache, p *corev1.Pod) {
	t.Helper()
	var got corev1.Pod
	if err := c.Get(context.Background(), client.ObjectKeyFromObject(p), &got, crcache.MinResourceVersion(p.ResourceVersion)); err != nil {
		t.Fatalf("get %s at resourceVersion %s or later: %v", p.Name, p.ResourceVersion, err)
	}
}

func TestGetEachShape(t *testing.T) {
	e := setup(t)
	ns := e.Namespace(t, "get")
	s := e.StartSidecar(t, func(sock string) string { return config(sock, ns) })
	c := startCache(t, s)
	ctx := context.Background()

	p := pod(ns, "web-0", "node-1", map[string]string{"app": "web"})
	e.create(t, p)
	waitSeen(t, c, p)
	key := client.ObjectKeyFromObject(p)

	var typed corev1.Pod
	typed.Spec.NodeName = "left over from the caller" // Get replaces what out held
	if err := c.Get(ctx, key, &typed); err != nil {
		t.Fatal(err)
	}
	if typed.ResourceVersion != p.ResourceVersion || typed.Labels["app"] != "web" || typed.Spec.NodeName != "node-1" {
		t.Errorf("typed Get: rv %s labels %v node %q; want rv %s, app=web, node-1", typed.ResourceVersion, typed.Labels, typed.Spec.NodeName, p.ResourceVersion)
	}
	if typed.GroupVersionKind() != podGVK {
		t.Errorf("typed Get: GVK %v, want %v (the default cache sets it)", typed.GroupVersionKind(), podGVK)
	}
	// The sidecar's transform drops these: a reconciler must not rely on them.
	if len(typed.ManagedFields) != 0 || len(typed.Spec.Tolerations) != 0 {
		t.Errorf("typed Get: managedFields %d, tolerations %v; the sidecar's transform drops both", len(typed.ManagedFields), typed.Spec.Tolerations)
	}

	u := &unstructured.Unstructured{}
	u.SetGroupVersionKind(podGVK)
	if err := c.Get(ctx, key, u); err != nil {
		t.Fatal(err)
	}
	node, _, _ := unstructured.NestedString(u.Object, "spec", "nodeName")
	if u.GetResourceVersion() != p.ResourceVersion || node != "node-1" || u.GroupVersionKind() != podGVK {
		t.Errorf("unstructured Get: rv %s node %q GVK %v", u.GetResourceVersion(), node, u.GroupVersionKind())
	}

	m := &metav1.PartialObjectMetadata{}
	m.SetGroupVersionKind(podGVK)
	if err := c.Get(ctx, key, m); err != nil {
		t.Fatal(err)
	}
	if m.ResourceVersion != p.ResourceVersion || m.Labels["app"] != "web" || m.UID != p.UID || m.GroupVersionKind() != podGVK {
		t.Errorf("metadata Get: %+v", m)
	}

	// A missing object: the API's NotFound, with the kind as the resource (as the default cache).
	err := c.Get(ctx, client.ObjectKey{Namespace: ns, Name: "missing"}, &corev1.Pod{})
	var status apierrors.APIStatus
	if !apierrors.IsNotFound(err) {
		t.Fatalf("Get of a missing pod: %v, want NotFound", err)
	}
	if ok := asStatus(err, &status); !ok || status.Status().Details.Kind != "Pod" || status.Status().Details.Name != "missing" {
		t.Errorf("NotFound details: %+v", status.Status().Details)
	}
	if err := c.Get(ctx, client.ObjectKey{Name: "web-0"}, &corev1.Pod{}); !apierrors.IsNotFound(err) {
		t.Errorf("Get of a namespaced kind without namespace: %v, want NotFound", err)
	}

	// Another group: apps/v1 Deployments.
	d := deployment(ns, "web", map[string]string{"app": "web"})
	e.create(t, d)
	eventually(t, "deployment readable", func() string {
		var got appsv1.Deployment
		err := c.Get(ctx, client.ObjectKeyFromObject(d), &got, crcache.MinResourceVersion(d.ResourceVersion))
		if err != nil {
			return err.Error()
		}
		if got.Spec.Selector.MatchLabels["app"] != "web" {
			return fmt.Sprintf("selector %v", got.Spec.Selector)
		}
		return ""
	})
}

func asStatus(err error, out *apierrors.APIStatus) bool {
	s, ok := err.(apierrors.APIStatus)
	*out = s
	return ok
}

func deployment(ns, name string, labels map[string]string) *appsv1.Deployment {
	return &appsv1.Deployment{
		ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name, Labels: maps.Clone(labels)},
		Spec: appsv1.DeploymentSpec{
			Replicas: ptr.To[int32](2),
			Selector: &metav1.LabelSelector{MatchLabels: maps.Clone(labels)},
			Template: corev1.PodTemplateSpec{
				ObjectMeta: metav1.ObjectMeta{Labels: maps.Clone(labels)},
				Spec:       corev1.PodSpec{Containers: []corev1.Container{{Name: "app", Image: "registry.invalid/app:1"}}},
			},
		},
	}
}

func names(list client.ObjectList) []string {
	var out []string
	switch l := list.(type) {
	case *corev1.PodList:
		for _, p := range l.Items {
			out = append(out, p.Namespace+"/"+p.Name)
		}
	case *unstructured.UnstructuredList:
		for _, p := range l.Items {
			out = append(out, p.GetNamespace()+"/"+p.GetName())
		}
	case *metav1.PartialObjectMetadataList:
		for _, p := range l.Items {
			out = append(out, p.Namespace+"/"+p.Name)
		}
	}
	slices.Sort(out)
	return out
}

func TestListOptions(t *testing.T) {
	e := setup(t)
	a, b := e.Namespace(t, "lista"), e.Namespace(t, "listb")
	s := e.StartSidecar(t, func(sock string) string { return config(sock, a, b) })
	c := startCache(t, s)
	ctx := context.Background()
	if err := c.IndexField(ctx, &corev1.Pod{}, "spec.nodeName", func(o client.Object) []string {
		return []string{o.(*corev1.Pod).Spec.NodeName}
	}); err != nil {
		t.Fatal(err)
	}
	if err := c.IndexField(ctx, &corev1.Pod{}, ".metadata.controller", func(o client.Object) []string {
		if ref := metav1.GetControllerOf(o); ref != nil {
			return []string{ref.Name}
		}
		return nil
	}); err != nil {
		t.Fatal(err)
	}
	// The index named "node" is a path index (spec.nodeName), so it combines with the named
	// cel index in one List.
	if err := c.IndexField(ctx, &corev1.Pod{}, "node", func(o client.Object) []string {
		return []string{o.(*corev1.Pod).Spec.NodeName}
	}); err != nil {
		t.Fatal(err)
	}
	owner := deployment(a, "owner", map[string]string{"app": "owned"})
	e.create(t, owner)
	var last *corev1.Pod
	for i, ns := range []string{a, a, a, b, b} {
		tier := []string{"web", "db"}[i%2]
		p := pod(ns, fmt.Sprintf("p%d", i), fmt.Sprintf("node-%d", i%2), map[string]string{"tier": tier})
		if i == 0 {
			p.OwnerReferences = []metav1.OwnerReference{*metav1.NewControllerRef(owner, appsv1.SchemeGroupVersion.WithKind("Deployment"))}
		}
		e.create(t, p)
		last = p
	}
	waitSeen(t, c, last)
	all := fmt.Sprintf("%s/p0 %s/p1 %s/p2 %s/p3 %s/p4", a, a, a, b, b)
	webSel, _ := labels.Parse("tier=web")

	cases := []struct {
		name string
		opts []client.ListOption
		want string
	}{
		{"everything", nil, all},
		{"InNamespace", []client.ListOption{client.InNamespace(b)}, fmt.Sprintf("%s/p3 %s/p4", b, b)},
		{"MatchingLabels", []client.ListOption{client.MatchingLabels{"tier": "web"}}, fmt.Sprintf("%s/p0 %s/p2 %s/p4", a, a, b)},
		{"MatchingLabelsSelector", []client.ListOption{client.InNamespace(a), client.MatchingLabelsSelector{Selector: webSel}}, fmt.Sprintf("%s/p0 %s/p2", a, a)},
		{"labels.Nothing", []client.ListOption{client.MatchingLabelsSelector{Selector: labels.Nothing()}}, ""},
		{"MatchingFields path index", []client.ListOption{client.MatchingFields{"spec.nodeName": "node-1"}}, fmt.Sprintf("%s/p1 %s/p3", a, b)},
		{"MatchingFields with namespace", []client.ListOption{client.InNamespace(a), client.MatchingFields{"spec.nodeName": "node-0"}}, fmt.Sprintf("%s/p0 %s/p2", a, a)},
		{"MatchingFields named index", []client.ListOption{client.MatchingFields{".metadata.controller": "owner"}}, a + "/p0"},
		{"MatchingFields two fields", []client.ListOption{client.MatchingFields{".metadata.controller": "owner", "spec.nodeName": "node-1"}}, ""},
		{"MatchingFields two named indexes", []client.ListOption{client.MatchingFields{".metadata.controller": "owner", "node": "node-0"}}, a + "/p0"},
		{"MatchingFields two indexes on one path", []client.ListOption{client.MatchingFields{"node": "node-0", "spec.nodeName": "node-0"}}, fmt.Sprintf("%s/p0 %s/p2 %s/p4", a, a, b)},
		{"Limit", []client.ListOption{client.InNamespace(a), client.Limit(2)}, fmt.Sprintf("%s/p0 %s/p1", a, a)},
		{"Limit of the matches", []client.ListOption{client.MatchingLabels{"tier": "web"}, client.Limit(2)}, fmt.Sprintf("%s/p0 %s/p2", a, a)},
		{"negative Limit (every item, as the default cache)", []client.ListOption{client.InNamespace(b), client.Limit(-1)}, fmt.Sprintf("%s/p3 %s/p4", b, b)},
	}
	for _, tc := range cases {
		for _, list := range []client.ObjectList{&corev1.PodList{}, unstructuredList(), metadataList()} {
			err := c.List(ctx, list, tc.opts...)
			if err != nil {
				t.Errorf("%s (%T): %v", tc.name, list, err)
				continue
			}
			if got := strings.Join(names(list), " "); got != tc.want {
				t.Errorf("%s (%T): got [%s], want [%s]", tc.name, list, got, tc.want)
			}
			if list.GetContinue() != "continue-not-supported" || list.GetResourceVersion() != "" {
				t.Errorf("%s (%T): continue %q, resourceVersion %q; the default cache gives \"continue-not-supported\" and \"\"", tc.name, list, list.GetContinue(), list.GetResourceVersion())
			}
		}
	}
	var pods corev1.PodList
	if err := c.List(ctx, &pods, client.InNamespace(a)); err != nil {
		t.Fatal(err)
	}
	for _, p := range pods.Items {
		if p.GroupVersionKind() != podGVK || p.Spec.Containers[0].Image == "" {
			t.Errorf("typed list item %s: GVK %v, containers %v", p.Name, p.GroupVersionKind(), p.Spec.Containers)
		}
	}
}

func unstructuredList() *unstructured.UnstructuredList {
	l := &unstructured.UnstructuredList{}
	l.SetGroupVersionKind(corev1.SchemeGroupVersion.WithKind("PodList"))
	return l
}

func metadataList() *metav1.PartialObjectMetadataList {
	l := &metav1.PartialObjectMetadataList{}
	l.SetGroupVersionKind(corev1.SchemeGroupVersion.WithKind("PodList"))
	return l
}

// TestBadInput: every unsupported request is an error naming what to do, never a silently
// wrong answer.
func TestBadInput(t *testing.T) {
	e := setup(t)
	ns := e.Namespace(t, "bad")
	s := e.StartSidecar(t, func(sock string) string { return config(sock, ns) })
	c := startCache(t, s)
	ctx := context.Background()
	p := pod(ns, "p", "node-1", nil)
	e.create(t, p)
	waitSeen(t, c, p)

	expect := func(what string, err error, words ...string) {
		t.Helper()
		if err == nil {
			t.Errorf("%s: no error", what)
			return
		}
		for _, w := range words {
			if !strings.Contains(err.Error(), w) {
				t.Errorf("%s: error %q does not say %q", what, err, w)
			}
		}
	}
	err := c.Get(ctx, client.ObjectKey{Namespace: ns, Name: "svc"}, &corev1.Service{})
	expect("Get of an uncached kind", err, "does not cache", "kind: Service", "apiVersion: v1")
	if !crcache.IsNotCached(err) {
		t.Errorf("IsNotCached(%v) is false", err)
	}
	var notCached *cache.ErrResourceNotCached
	if !errors.As(err, &notCached) || notCached.GVK.Kind != "Service" {
		t.Errorf("errors.As(err, *cache.ErrResourceNotCached) does not find the kind: %v", err)
	}
	expect("List of an uncached kind", c.List(ctx, &corev1.ServiceList{}), "does not cache", "kind: Service")
	_, err = c.GetInformer(ctx, &corev1.Service{})
	expect("GetInformer of an uncached kind", err, "does not cache")

	expect("IndexField on a field informerd does not index", c.IndexField(ctx, &corev1.Pod{}, "status.podIP", nil),
		"status.podIP", "indexes:", "path: status.podIP")
	expect("MatchingFields on an unregistered field", c.List(ctx, &corev1.PodList{}, client.MatchingFields{"spec.nodeName": "node-1"}),
		"field:spec.nodeName does not exist", "IndexField")
	if err := c.IndexField(ctx, &corev1.Pod{}, "spec.nodeName", nil); err != nil {
		t.Fatal(err)
	}
	expect("a second IndexField of the same field", c.IndexField(ctx, &corev1.Pod{}, "spec.nodeName", nil), "already indexed")
	notEqual := &client.ListOptions{FieldSelector: mustFieldSelector(t, "spec.nodeName!=node-1")}
	expect("a non-exact field selector", c.List(ctx, &corev1.PodList{}, notEqual), "non-exact field matches are not supported")
	expect("Continue", c.List(ctx, &corev1.PodList{}, client.Continue("abc")), "continue list option is not supported")
	inf, err := c.GetInformer(ctx, &corev1.Pod{})
	if err != nil {
		t.Fatal(err)
	}
	expect("AddIndexers", inf.AddIndexers(nil), "IndexField")

	_, err = crcache.New(crcache.Options{Client: s.Client()}, cache.Options{Scheme: scheme.Scheme,
		NewInformer: func(toolscache.ListerWatcher, runtime.Object, time.Duration, toolscache.Indexers) toolscache.SharedIndexInformer {
			return nil
		}})
	expect("cache.Options.NewInformer", err, "NewInformer", "remove the option")
	other, err := crcache.New(crcache.Options{Client: s.Client(), Resources: map[schema.GroupVersionKind]string{podGVK: "pods-elsewhere"}}, cache.Options{})
	if err != nil {
		t.Fatal(err)
	}
	expect("Options.Resources naming a resource informerd lacks", other.Get(ctx, client.ObjectKeyFromObject(p), &corev1.Pod{}), "pods-elsewhere", "Options.Resources")
}

// TestMinResourceVersion: a Get or List with the resourceVersion of one's own write never
// reads an older object.
func TestMinResourceVersion(t *testing.T) {
	e := setup(t)
	ns := e.Namespace(t, "rv")
	s := e.StartSidecar(t, func(sock string) string { return config(sock, ns) })
	c := startCache(t, s)
	ctx := context.Background()
	p := pod(ns, "p", "", map[string]string{"n": "0"})
	e.create(t, p)
	for i := 1; i <= 30; i++ {
		p.Labels["n"] = strconv.Itoa(i)
		if err := e.kube.Update(ctx, p); err != nil {
			t.Fatal(err)
		}
		var got corev1.Pod
		// The two spellings: the helper, and the API's own GetOptions.
		var opt client.GetOption = crcache.MinResourceVersion(p.ResourceVersion)
		if i%2 == 0 {
			opt = &client.GetOptions{Raw: &metav1.GetOptions{ResourceVersion: p.ResourceVersion}}
		}
		if err := c.Get(ctx, client.ObjectKeyFromObject(p), &got, opt); err != nil {
			t.Fatalf("update %d: %v", i, err)
		}
		if got.Labels["n"] != strconv.Itoa(i) || labelctl.RVLess(got.ResourceVersion, p.ResourceVersion) {
			t.Fatalf("update %d (rv %s): read rv %s with n=%s, older than the write", i, p.ResourceVersion, got.ResourceVersion, got.Labels["n"])
		}
	}
	// List: the same two spellings, each after a write the List must hold.
	for i := 31; i <= 50; i++ {
		p.Labels["n"] = strconv.Itoa(i)
		if err := e.kube.Update(ctx, p); err != nil {
			t.Fatal(err)
		}
		var listOpt client.ListOption = crcache.MinResourceVersion(p.ResourceVersion)
		if i%2 == 0 {
			listOpt = &client.ListOptions{Raw: &metav1.ListOptions{ResourceVersion: p.ResourceVersion}}
		}
		var got corev1.PodList
		if err := c.List(ctx, &got, client.InNamespace(ns), listOpt); err != nil {
			t.Fatalf("update %d: List: %v", i, err)
		}
		if len(got.Items) != 1 || got.Items[0].Labels["n"] != strconv.Itoa(i) || labelctl.RVLess(got.Items[0].ResourceVersion, p.ResourceVersion) {
			t.Fatalf("update %d (rv %s): List read %v, older than the write", i, p.ResourceVersion, got.Items)
		}
	}
}

func mustFieldSelector(t *testing.T, text string) fields.Selector {
	t.Helper()
	sel, err := fields.ParseSelector(text)
	if err != nil {
		t.Fatal(err)
	}
	return sel
}

// TestSidecarStartingLater: a read made before the sidecar listens waits for it (the sidecar
// starts beside the controller, maybe a moment later).
func TestSidecarStartingLater(t *testing.T) {
	e := setup(t)
	ns := e.Namespace(t, "late")
	p := pod(ns, "p", "", nil)
	e.create(t, p)
	s := e.NewSidecar(t, func(sock string) string { return config(sock, ns) })
	c, err := crcache.New(crcache.Options{Target: "unix://" + s.Socket}, cache.Options{})
	if err != nil {
		t.Fatal(err)
	}
	got := make(chan error, 1)
	go func() {
		got <- c.Get(context.Background(), client.ObjectKeyFromObject(p), &corev1.Pod{}, crcache.MinResourceVersion(p.ResourceVersion))
	}()
	s.Start()
	s.WaitSynced()
	if err := <-got; err != nil {
		t.Fatalf("a Get made before the sidecar listened: %v", err)
	}
}
