package informerd_test

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"maps"
	"math/rand/v2"
	"net"
	"os/exec"
	"slices"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"

	informerd "informerd.io/clients/go"
	"informerd.io/clients/go/informerdv1"
)

func callCtx(t *testing.T) context.Context {
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	t.Cleanup(cancel)
	return ctx
}

// TestListEverything: List (and Get) through informerd equal what the apiserver holds, with
// every read option.
func TestListEverything(t *testing.T) {
	e := setup(t)
	ns := e.Namespace(t, "list")
	for i := range 25 {
		tier := []string{"keep", "drop"}[i%2]
		p := e.createPod(t, ns, fmt.Sprintf("pod-%d", i), map[string]string{"app": "web", "tier": tier})
		if i%3 == 0 {
			e.mutatePod(t, ns, p.Name, false, func(p *corev1.Pod) { p.Spec.Containers[0].Image = "registry.invalid/app:2" })
		}
	}
	port := freePort(t)
	s := e.StartSidecar(t, func(sock string) string {
		return podsConfig(sock, []string{ns}, fmt.Sprintf("  listen: 127.0.0.1:%d\n", port))
	})
	c := s.Client()
	ctx := callCtx(t)

	t.Run("all", func(t *testing.T) {
		want := e.apiserverPods(t, "", ns)
		got, token, err := sidecarPods(ctx, c, "pods")
		if err != nil {
			t.Fatal(err)
		}
		if d := diff("apiserver", want, "informerd", got); d != "" {
			t.Fatalf("List differs from the apiserver:\n%s", d)
		}
		if token.Epoch == 0 || token.Revision == 0 {
			t.Errorf("List token %v: want a non-zero epoch and revision", token)
		}
		// The same over the loopback TCP listener.
		tcp := dialTarget(t, fmt.Sprintf("127.0.0.1:%d", port))
		got, tcpToken, err := sidecarPods(ctx, tcp, "pods")
		if err != nil {
			t.Fatalf("List over TCP: %v", err)
		}
		if d := diff("apiserver", want, "informerd over TCP", got); d != "" || tcpToken != token {
			t.Fatalf("List over TCP (token %s, unix socket %s) differs from the apiserver:\n%s", tcpToken, token, d)
		}
	})

	t.Run("namespace and chunks", func(t *testing.T) {
		want := e.apiserverPods(t, "", ns)
		res, err := c.List(ctx, "pods", informerd.InNamespace(ns), informerd.WithChunkSize(4))
		if err != nil {
			t.Fatal(err)
		}
		if !res.Synced {
			t.Errorf("List: synced = false after Status reported synced")
		}
		got := map[string]string{}
		for _, u := range res.Items {
			got[u.GetNamespace()+"/"+u.GetName()] = u.GetResourceVersion()
			if u.GetAPIVersion() != "v1" || u.GetKind() != "Pod" {
				t.Errorf("%s: apiVersion %q kind %q, want v1 Pod", u.GetName(), u.GetAPIVersion(), u.GetKind())
			}
			if u.GetManagedFields() != nil {
				t.Errorf("%s: managedFields were not dropped", u.GetName())
			}
		}
		if d := diff("apiserver", want, "informerd", got); d != "" {
			t.Fatalf("chunked List differs:\n%s", d)
		}
		other, err := c.List(ctx, "pods", informerd.InNamespace("igo-no-such-namespace"))
		if err != nil {
			t.Fatal(err)
		}
		if len(other.Items) != 0 {
			t.Errorf("List in another namespace: %d objects, want 0", len(other.Items))
		}
	})

	t.Run("label selector", func(t *testing.T) {
		for _, sel := range []string{"tier=keep", "tier in (drop),app=web", "!tier", "tier!=keep"} {
			want := e.apiserverPods(t, sel, ns)
			got, _, err := sidecarPods(ctx, c, "pods", informerd.WithLabelSelector(sel))
			if err != nil {
				t.Fatalf("%s: %v", sel, err)
			}
			if d := diff("apiserver", want, "informerd", got); d != "" {
				t.Errorf("label selector %q:\n%s", sel, d)
			}
		}
	})

	t.Run("field selector and index", func(t *testing.T) {
		got, _, err := sidecarPods(ctx, c, "pods", informerd.WithFieldSelector("metadata.name=pod-3"))
		if err != nil {
			t.Fatal(err)
		}
		if len(got) != 1 || got[ns+"/pod-3"] == "" {
			t.Errorf("field selector metadata.name=pod-3: got %v", slices.Sorted(maps.Keys(got)))
		}
		got, _, err = sidecarPods(ctx, c, "pods", informerd.WithIndex("image", "registry.invalid/app:2"))
		if err != nil {
			t.Fatal(err)
		}
		want := map[string]string{}
		for k, v := range e.apiserverPods(t, "", ns) {
			var n int
			fmt.Sscanf(k[len(ns)+1:], "pod-%d", &n)
			if n%3 == 0 {
				want[k] = v
			}
		}
		if d := diff("apiserver (image app:2)", want, "informerd index", got); d != "" {
			t.Errorf("index image=registry.invalid/app:2:\n%s", d)
		}
	})

	t.Run("limit", func(t *testing.T) {
		all, err := c.List(ctx, "pods", informerd.InNamespace(ns))
		if err != nil {
			t.Fatal(err)
		}
		res, err := c.List(ctx, "pods", informerd.InNamespace(ns), informerd.WithLimit(4), informerd.WithChunkSize(3))
		if err != nil {
			t.Fatal(err)
		}
		var got, want []string
		for i, u := range res.Items {
			got = append(got, u.GetName())
			want = append(want, all.Items[i].GetName())
		}
		if !slices.Equal(got, want) || len(got) != 4 {
			t.Errorf("List with limit 4: %v, want the first 4 of the list: %v", got, want)
		}
		_, err = c.List(ctx, "pods", informerd.WithLimit(-1))
		checkErr(t, "List with a negative limit", err, codes.InvalidArgument, informerd.ReasonInvalid)
	})

	t.Run("fields", func(t *testing.T) {
		res, err := c.List(ctx, "pods", informerd.WithFields("status.phase", `metadata.labels["tier"]`))
		if err != nil {
			t.Fatal(err)
		}
		if len(res.Items) != 25 {
			t.Fatalf("List with fields: %d objects, want 25", len(res.Items))
		}
		for _, u := range res.Items {
			if _, ok := u.Object["spec"]; ok {
				t.Fatalf("%s: spec returned although only status.phase and a label were asked for: %v", u.GetName(), u.Object)
			}
			if u.GetName() == "" || u.GetResourceVersion() == "" {
				t.Fatalf("identity fields missing: %v", u.Object)
			}
			if l := u.GetLabels(); l["tier"] == "" || l["app"] != "" {
				t.Fatalf("%s: labels %v, want only tier", u.GetName(), l)
			}
		}
		p, err := informerd.GetAs[corev1.Pod](ctx, c, "pods", ns, "pod-1", informerd.WithFields("spec.containers[*].image"))
		if err != nil {
			t.Fatal(err)
		}
		if p.Name != "pod-1" || len(p.Spec.Containers) != 1 || p.Spec.Containers[0].Image == "" || p.Spec.Containers[0].Name != "" {
			t.Errorf("Get with fields: %+v", p)
		}
	})

	t.Run("get", func(t *testing.T) {
		want, err := e.Kube.CoreV1().Pods(ns).Get(ctx, "pod-7", metav1.GetOptions{})
		if err != nil {
			t.Fatal(err)
		}
		u, err := c.Get(ctx, "pods", ns, "pod-7")
		if err != nil {
			t.Fatal(err)
		}
		if u.GetResourceVersion() != want.ResourceVersion || u.GetUID() != want.UID {
			t.Errorf("Get: rv %s uid %s, apiserver has rv %s uid %s", u.GetResourceVersion(), u.GetUID(), want.ResourceVersion, want.UID)
		}
		p, err := informerd.GetAs[corev1.Pod](ctx, c, "pods", ns, "pod-7", informerd.WaitForSync())
		if err != nil {
			t.Fatal(err)
		}
		if p.ResourceVersion != want.ResourceVersion || p.Spec.Containers[0].Image != want.Spec.Containers[0].Image {
			t.Errorf("GetAs: %s %s, want %s %s", p.ResourceVersion, p.Spec.Containers[0].Image, want.ResourceVersion, want.Spec.Containers[0].Image)
		}
		resp, err := c.GetObject(ctx, "pods", ns, "pod-7")
		if err != nil {
			t.Fatal(err)
		}
		if resp.GetEpoch() == 0 || resp.GetObject().GetRevision() == 0 || resp.GetRevision() < resp.GetObject().GetRevision() {
			t.Errorf("GetObject: epoch %d, read at revision %d, object revision %d", resp.GetEpoch(), resp.GetRevision(), resp.GetObject().GetRevision())
		}
		if resp.GetObject().GetLabels()["tier"] != want.Labels["tier"] || resp.GetObject().GetUid() != string(want.UID) {
			t.Errorf("GetObject identity: %v", resp.GetObject())
		}
		// OmitLabels: no labels map, the labels still in the JSON that GetAs and ListAs decode.
		bare, err := c.GetObject(ctx, "pods", ns, "pod-7", informerd.OmitLabels())
		if err != nil {
			t.Fatal(err)
		}
		if len(bare.GetObject().GetLabels()) != 0 || string(bare.GetObject().GetJson()) != string(resp.GetObject().GetJson()) {
			t.Errorf("GetObject with OmitLabels: labels %v, JSON equal %v", bare.GetObject().GetLabels(), string(bare.GetObject().GetJson()) == string(resp.GetObject().GetJson()))
		}
		var listed []*informerdv1.Object
		if _, _, err := c.ListObjects(ctx, "pods", func(o *informerdv1.Object) { listed = append(listed, o) },
			informerd.InNamespace(ns), informerd.WithLabelSelector("tier="+want.Labels["tier"]), informerd.OmitLabels()); err != nil {
			t.Fatal(err)
		}
		if len(listed) == 0 || len(listed[0].GetLabels()) != 0 {
			t.Errorf("ListObjects with OmitLabels: %d objects, the first's labels %v", len(listed), listed)
		}
		if p.Labels["tier"] != want.Labels["tier"] {
			t.Errorf("GetAs (which omits the labels map): labels %v, want tier %q", p.Labels, want.Labels["tier"])
		}
	})

	t.Run("read your writes", func(t *testing.T) {
		written := e.mutatePod(t, ns, "pod-2", false, func(p *corev1.Pod) { p.Labels["written"] = "yes" })
		p, err := informerd.GetAs[corev1.Pod](ctx, c, "pods", ns, "pod-2", informerd.MinResourceVersion(written.ResourceVersion))
		if err != nil {
			t.Fatal(err)
		}
		if p.Labels["written"] != "yes" || p.ResourceVersion != written.ResourceVersion {
			t.Errorf("Get with min_resource_version %s: rv %s labels %v", written.ResourceVersion, p.ResourceVersion, p.Labels)
		}
		created := e.createPod(t, ns, "pod-new", map[string]string{"app": "web"})
		p, err = informerd.GetAs[corev1.Pod](ctx, c, "pods", ns, "pod-new", informerd.MinResourceVersion(created.ResourceVersion))
		if err != nil {
			t.Fatalf("Get of a just-created pod with min_resource_version %s: %v", created.ResourceVersion, err)
		}
		if p.UID != created.UID {
			t.Errorf("Get of a just-created pod: uid %s, want %s", p.UID, created.UID)
		}
		relabeled := e.mutatePod(t, ns, "pod-3", false, func(p *corev1.Pod) { p.Labels["listed"] = "yes" })
		res, err := informerd.ListAs[corev1.Pod](ctx, c, "pods", informerd.InNamespace(ns),
			informerd.WithLabelSelector("listed=yes"), informerd.MinResourceVersion(relabeled.ResourceVersion))
		if err != nil {
			t.Fatalf("List with min_resource_version %s: %v", relabeled.ResourceVersion, err)
		}
		if len(res.Items) != 1 || res.Items[0].ResourceVersion != relabeled.ResourceVersion {
			t.Errorf("List with min_resource_version %s: %d items, want pod-3 at that version", relabeled.ResourceVersion, len(res.Items))
		}
	})

	t.Run("errors", func(t *testing.T) {
		_, err := c.Get(ctx, "pods", ns, "no-such-pod")
		checkErr(t, "Get of a missing pod", err, codes.NotFound, informerd.ReasonNotFound)
		if !errors.Is(err, informerd.ErrNotFound) || !informerd.IsNotFound(err) {
			t.Errorf("errors.Is(%v, ErrNotFound) = false", err)
		}
		_, err = c.Get(ctx, "no-such-resource", ns, "pod-1")
		checkErr(t, "Get of a missing resource", err, codes.NotFound, informerd.ReasonNotFound)
		_, err = c.List(ctx, "no-such-resource")
		checkErr(t, "List of a missing resource", err, codes.NotFound, informerd.ReasonNotFound)
		_, err = c.List(ctx, "pods", informerd.WithLabelSelector("tier in in ("))
		checkErr(t, "List with a bad label selector", err, codes.InvalidArgument, informerd.ReasonInvalid)
		_, err = c.List(ctx, "pods", informerd.WithIndex("no-such-index", "x"))
		checkErr(t, "List with an unknown index", err, codes.InvalidArgument, informerd.ReasonInvalid)
		_, err = c.List(ctx, "pods", informerd.WithFields("spec..x"))
		checkErr(t, "List with a bad field mask", err, codes.InvalidArgument, informerd.ReasonInvalid)
		w, err := c.Watch(ctx, "pods", informerd.WithPredicateCEL("object.spec +"))
		if err == nil {
			_, err = w.Next()
			w.Close()
		}
		checkErr(t, "Watch with a bad CEL predicate", err, codes.InvalidArgument, informerd.ReasonInvalid)
		short, cancel := context.WithTimeout(ctx, 2*time.Second)
		defer cancel()
		_, err = c.Get(short, "pods", ns, "pod-1", informerd.MinResourceVersion("999999999"))
		switch {
		case status.Code(err) != codes.DeadlineExceeded:
			t.Errorf("Get with an unreachable min_resource_version: %v, want DEADLINE_EXCEEDED NotCaughtUp", err)
		case informerd.Reason(err) != informerd.ReasonNotCaughtUp:
			// The client's own deadline may end the call before the server answers.
			t.Logf("Get with an unreachable min_resource_version ended without a reason: %v", err)
		}
	})
}

// checkIdentity checks that an event's identity fields agree with its JSON.
func checkIdentity(t *testing.T, ev *informerdv1.WatchEvent) {
	t.Helper()
	obj := ev.GetObject()
	var p corev1.Pod
	if err := json.Unmarshal(obj.GetJson(), &p); err != nil {
		t.Fatalf("%s: %v", ev.GetType(), err)
	}
	if p.Namespace != obj.GetNamespace() || p.Name != obj.GetName() || string(p.UID) != obj.GetUid() ||
		p.ResourceVersion != obj.GetResourceVersion() || !maps.Equal(p.Labels, obj.GetLabels()) {
		t.Errorf("%s %s: the identity fields (rv %s, labels %v) disagree with the JSON (rv %s, labels %v)",
			ev.GetType(), obj.GetName(), obj.GetResourceVersion(), obj.GetLabels(), p.ResourceVersion, p.Labels)
	}
}

func checkErr(t *testing.T, what string, err error, code codes.Code, reason string) {
	t.Helper()
	if err == nil {
		t.Errorf("%s: no error, want %s %s", what, code, reason)
		return
	}
	if status.Code(err) != code || informerd.Code(err) != code || informerd.Reason(err) != reason {
		t.Errorf("%s: %v (code %s, reason %q), want code %s reason %q", what, err, status.Code(err), informerd.Reason(err), code, reason)
	}
}

// follower is a hand-written resume loop over the raw Watch: it starts from a List's token,
// and after every broken stream resumes with since = the last token it received.
type follower struct {
	mu         sync.Mutex
	view       map[string]string
	last       map[string]string
	token      informerd.ResumeToken
	resumes    int
	violations []string
	err        error
}

func (f *follower) run(ctx context.Context, c *informerd.Client, opts ...informerd.WatchOption) {
	for ctx.Err() == nil {
		f.mu.Lock()
		token := f.token
		f.mu.Unlock()
		w, err := c.Watch(ctx, "pods", append(slices.Clone(opts), informerd.Since(token))...)
		if err == nil {
			for {
				var ev *informerdv1.WatchEvent
				ev, err = w.Next()
				if err != nil {
					break
				}
				f.apply(ev)
			}
			w.Close()
		}
		if ctx.Err() != nil {
			return
		}
		if informerd.IsRelist(err) || informerd.Code(err) == codes.InvalidArgument || informerd.Code(err) == codes.NotFound {
			f.mu.Lock()
			f.err = err
			f.mu.Unlock()
			return
		}
		f.mu.Lock()
		f.resumes++
		f.mu.Unlock()
		time.Sleep(50 * time.Millisecond)
	}
}

func (f *follower) apply(ev *informerdv1.WatchEvent) {
	f.mu.Lock()
	defer f.mu.Unlock()
	if ev.GetEpoch() != f.token.Epoch || ev.GetRevision() < f.token.Revision ||
		(ev.GetRevision() == f.token.Revision && ev.GetType() != informerd.Bookmark) {
		f.violations = append(f.violations, fmt.Sprintf("event %s at %d/%d after token %s", ev.GetType(), ev.GetEpoch(), ev.GetRevision(), f.token))
	}
	f.token = informerd.TokenOf(ev)
	obj := ev.GetObject()
	key := informerd.Key(obj)
	rv := obj.GetResourceVersion()
	switch ev.GetType() {
	case informerd.Added, informerd.Modified:
		if prev, ok := f.last[key]; ok && rvLess(rv, prev, false) {
			f.violations = append(f.violations, fmt.Sprintf("%s %s at rv %s after rv %s", ev.GetType(), key, rv, prev))
		}
		f.view[key], f.last[key] = rv, rv
	case informerd.Deleted:
		if prev, ok := f.last[key]; ok && rvLess(rv, prev, true) {
			f.violations = append(f.violations, fmt.Sprintf("DELETED %s at rv %s after rv %s", key, rv, prev))
		}
		if _, ok := f.view[key]; !ok {
			f.violations = append(f.violations, fmt.Sprintf("DELETED %s, which the follower does not have", key))
		}
		delete(f.view, key)
		f.last[key] = rv
	}
}

// rvLess reports whether resourceVersion a does not come after b (equal allowed if allowEqual).
func rvLess(a, b string, allowEqual bool) bool {
	var x, y uint64
	fmt.Sscan(a, &x)
	fmt.Sscan(b, &y)
	return x < y || (x == y && !allowEqual)
}

func (f *follower) snapshot() (map[string]string, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	return maps.Clone(f.view), f.err
}

// churn runs n random operations on the pods of ns: creations, updates, relabels, status
// updates and deletions; every breakEvery operations it calls brk.
func churn(t *testing.T, e *env, ns string, seed uint64, n, breakEvery int, brk func()) {
	t.Helper()
	rng := rand.New(rand.NewPCG(seed, 7))
	names := slices.Sorted(maps.Keys(e.apiserverPods(t, "", ns)))
	for i := range names {
		names[i] = strings.TrimPrefix(names[i], ns+"/")
	}
	next := 0
	pick := func() string {
		if len(names) == 0 {
			return ""
		}
		return names[rng.IntN(len(names))]
	}
	for i := range n {
		if breakEvery > 0 && i > 0 && i%breakEvery == 0 {
			brk()
		}
		switch op := rng.IntN(100); {
		case op < 15 || len(names) < 5:
			name := fmt.Sprintf("churn-%d", next)
			next++
			e.createPod(t, ns, name, map[string]string{"app": "web", "tier": "keep"})
			names = append(names, name)
		case op < 35:
			if name := pick(); name != "" {
				e.mutatePod(t, ns, name, false, func(p *corev1.Pod) {
					p.Annotations["informerd.io/n"] = fmt.Sprint(i)
				})
			}
		case op < 60:
			if name := pick(); name != "" {
				e.mutatePod(t, ns, name, false, func(p *corev1.Pod) {
					if p.Labels["tier"] == "keep" {
						p.Labels["tier"] = "drop"
					} else {
						p.Labels["tier"] = "keep"
					}
				})
			}
		case op < 85:
			if name := pick(); name != "" {
				e.mutatePod(t, ns, name, true, func(p *corev1.Pod) {
					p.Status.Phase = corev1.PodPending
					p.Status.Message = fmt.Sprintf("churn %d", i)
				})
			}
		default:
			if name := pick(); name != "" {
				e.deletePod(t, ns, name)
				names = slices.DeleteFunc(names, func(s string) bool { return s == name })
			}
		}
	}
}

// TestWatchResumeDuringChurn: a watch from a List's revision and an Informer, both through a
// proxy whose connections are broken again and again while pods are created, updated,
// relabelled, have their status updated and are deleted, end with exactly the apiserver's
// state and the sidecar's, having seen every object's resourceVersions only increase.
func TestWatchResumeDuringChurn(t *testing.T) {
	e := setup(t)
	ns := e.Namespace(t, "churn")
	for i := range 30 {
		e.createPod(t, ns, fmt.Sprintf("pod-%d", i), map[string]string{"app": "web", "tier": "keep"})
	}
	s := e.StartSidecar(t, func(sock string) string { return podsConfig(sock, []string{ns}, "") })
	direct := s.Client()
	px := newProxy(t, s.Socket)
	c := dialTarget(t, px.target())
	ctx := callCtx(t)

	// The raw protocol: List, then Watch since its token.
	res, err := informerd.ListAs[corev1.Pod](ctx, c, "pods", informerd.InNamespace(ns))
	if err != nil {
		t.Fatal(err)
	}
	f := &follower{view: map[string]string{}, last: map[string]string{}, token: res.Token}
	for _, p := range res.Items {
		f.view[p.Namespace+"/"+p.Name] = p.ResourceVersion
		f.last[p.Namespace+"/"+p.Name] = p.ResourceVersion
	}
	fctx, fcancel := context.WithCancel(context.Background())
	fdone := make(chan struct{})
	go func() {
		f.run(fctx, c, informerd.InNamespace(ns), informerd.WithBookmarkInterval(time.Second))
		close(fdone)
	}()
	t.Cleanup(func() { fcancel(); <-fdone })

	// The Informer.
	rec := newRecorder()
	inf := informerd.NewInformer[corev1.Pod](c, "pods", rec.handler(), informerd.InNamespace(ns), informerd.WithBookmarkInterval(time.Second))
	var reasons sync.Map
	inf.OnError = func(err error, decision string) {
		reasons.Store(fmt.Sprintf("%s/%s", informerd.Reason(err), decision), true)
	}
	alive := runInformer(t, inf)
	eventually(t, syncTimeout, "the informer syncs", func() string {
		if err := alive(); err != nil {
			return err.Error()
		}
		if !inf.HasSynced() {
			return "HasSynced() = false"
		}
		return ""
	})

	churn(t, e, ns, 1, 300, 20, px.breakConns)
	t.Logf("broke the proxy's connections %d times during 300 operations", px.breaks)

	want := e.apiserverPods(t, "", ns)
	eventually(t, settleTimeout, "informerd, the watch and the informer end with the apiserver's pods", func() string {
		if err := alive(); err != nil {
			return err.Error()
		}
		got, _, err := sidecarPods(ctx, direct, "pods", informerd.InNamespace(ns))
		if err != nil {
			return "List: " + err.Error()
		}
		if d := diff("apiserver", want, "informerd List", got); d != "" {
			return d
		}
		fview, ferr := f.snapshot()
		if ferr != nil {
			return fmt.Sprintf("the watch ended: %v", ferr)
		}
		if d := diff("apiserver", want, "resumed watch", fview); d != "" {
			return d
		}
		if d := diff("apiserver", want, "informer handler", rec.snapshot()); d != "" {
			return d
		}
		return diff("apiserver", want, "informer Known()", inf.Known())
	})
	rec.check(t)
	f.mu.Lock()
	if len(f.violations) > 0 {
		t.Errorf("the resumed watch saw:\n%s", strings.Join(f.violations, "\n"))
	}
	t.Logf("resumed watch: %d resumes, ended at %s", f.resumes, f.token)
	if f.resumes == 0 {
		t.Errorf("the raw watch never resumed although the proxy broke its connection %d times", px.breaks)
	}
	f.mu.Unlock()
	st := inf.Stats()
	t.Logf("informer: %+v; handler: %d adds, %d updates, %d deletes", st, rec.adds, rec.updates, rec.deletes)
	if st.Resumes == 0 {
		t.Errorf("the informer never resumed although the proxy broke its connection %d times", px.breaks)
	}
	if st.Relists != 0 {
		t.Errorf("the informer relisted %d times (errors seen: %v); every break should have resumed from its token", st.Relists, keys(&reasons))
	}
	if st.Anomalies != 0 {
		t.Errorf("the informer counted %d protocol anomalies", st.Anomalies)
	}
}

func keys(m *sync.Map) []string {
	var out []string
	m.Range(func(k, _ any) bool { out = append(out, k.(string)); return true })
	slices.Sort(out)
	return out
}

// TestGenerationChangedPredicate: with GENERATION_CHANGED, status-only updates of Pods are
// not delivered and spec changes are. (kube-apiserver 1.36 bumps metadata.generation of a
// Pod on spec updates such as activeDeadlineSeconds or a container image, and not on status
// updates: checked at the start.)
func TestGenerationChangedPredicate(t *testing.T) {
	e := setup(t)
	ns := e.Namespace(t, "gen")
	for i := range 3 {
		e.createPod(t, ns, fmt.Sprintf("pod-%d", i), map[string]string{"app": "web"})
	}
	s := e.StartSidecar(t, func(sock string) string { return podsConfig(sock, []string{ns}, "") })
	c := s.Client()
	ctx := callCtx(t)

	// Every update, as a control: the status updates do reach the cache.
	start, err := c.List(ctx, "pods", informerd.InNamespace(ns))
	if err != nil {
		t.Fatal(err)
	}
	all, err := c.Watch(ctx, "pods", informerd.InNamespace(ns), informerd.Since(start.Token))
	if err != nil {
		t.Fatal(err)
	}
	defer all.Close()

	type update struct{ name, rv string }
	var mu sync.Mutex
	var updates []update
	inf := informerd.NewInformer[corev1.Pod](c, "pods", informerd.HandlerFuncs[corev1.Pod]{
		UpdateFunc: func(old informerd.Meta, p *corev1.Pod) {
			mu.Lock()
			defer mu.Unlock()
			updates = append(updates, update{p.Name, p.ResourceVersion})
		},
	}, informerd.InNamespace(ns), informerd.WithPredicates(informerd.GenerationChanged))
	alive := runInformer(t, inf)
	// The same with a CEL predicate over the whole stored objects, delivering only one field.
	var celUpdates []update
	celInf := informerd.NewInformer[corev1.Pod](c, "pods", informerd.HandlerFuncs[corev1.Pod]{
		UpdateFunc: func(old informerd.Meta, p *corev1.Pod) {
			mu.Lock()
			defer mu.Unlock()
			celUpdates = append(celUpdates, update{p.Name, p.ResourceVersion})
			if p.Spec.Containers != nil || p.Status.Phase != "" {
				t.Errorf("update of %s with fields spec.activeDeadlineSeconds: got containers %v, phase %q", p.Name, p.Spec.Containers, p.Status.Phase)
			}
		},
	}, informerd.InNamespace(ns), informerd.WithPredicateCEL("object.spec != oldObject.spec"),
		informerd.WithFields("spec.activeDeadlineSeconds"))
	celAlive := runInformer(t, celInf)
	eventually(t, syncTimeout, "the informers sync", func() string {
		for _, err := range []error{alive(), celAlive()} {
			if err != nil {
				return err.Error()
			}
		}
		if !inf.HasSynced() || !celInf.HasSynced() {
			return "HasSynced() = false"
		}
		return ""
	})

	gen := func(p *corev1.Pod) int64 { return p.Generation }
	p0 := e.mutatePod(t, ns, "pod-0", true, func(p *corev1.Pod) {
		p.Status.Phase = corev1.PodRunning
		p.Status.Message = "status update"
	})
	g0 := gen(p0)
	p0 = e.mutatePod(t, ns, "pod-0", true, func(p *corev1.Pod) {
		p.Status.Conditions = []corev1.PodCondition{{Type: corev1.PodReady, Status: corev1.ConditionTrue}}
	})
	patch := []byte(`{"status":{"message":"patched status","reason":"Test"}}`)
	p1, err := e.Kube.CoreV1().Pods(ns).Patch(ctx, "pod-1", types.MergePatchType, patch, metav1.PatchOptions{}, "status")
	if err != nil {
		t.Fatalf("patch status of pod-1: %v", err)
	}
	deadline := int64(3600)
	p2 := e.mutatePod(t, ns, "pod-2", false, func(p *corev1.Pod) { p.Spec.ActiveDeadlineSeconds = &deadline })
	p0b := e.mutatePod(t, ns, "pod-0", false, func(p *corev1.Pod) { p.Spec.Containers[0].Image = "registry.invalid/app:3" })
	if gen(p0) != g0 || gen(p1) != 1 {
		t.Fatalf("status updates changed metadata.generation (pod-0 %d -> %d, pod-1 %d): this apiserver does not fit the test", g0, gen(p0), gen(p1))
	}
	if gen(p2) <= 1 || gen(p0b) <= gen(p0) {
		t.Fatalf("spec updates did not bump metadata.generation (pod-2 %d, pod-0 %d -> %d): use a kind with generation", gen(p2), gen(p0), gen(p0b))
	}

	// The control watch sees all five updates.
	seen := map[string]bool{}
	for len(seen) < 5 {
		ev, err := all.Next()
		if err != nil {
			t.Fatalf("the control watch ended: %v (saw %v)", err, seen)
		}
		if ev.GetType() == informerd.Modified {
			seen[ev.GetObject().GetName()+"@"+ev.GetObject().GetResourceVersion()] = true
		}
	}
	for _, p := range []*corev1.Pod{p0, p1, p2, p0b} {
		if !seen[p.Name+"@"+p.ResourceVersion] {
			t.Errorf("the control watch did not see %s at rv %s: %v", p.Name, p.ResourceVersion, seen)
		}
	}

	// The informer gets the two spec changes; the last one comes after every status update.
	last := update{"pod-0", p0b.ResourceVersion}
	eventually(t, settleTimeout, "the informers receive the spec changes", func() string {
		for _, err := range []error{alive(), celAlive()} {
			if err != nil {
				return err.Error()
			}
		}
		mu.Lock()
		defer mu.Unlock()
		if !slices.Contains(updates, last) || !slices.Contains(celUpdates, last) {
			return fmt.Sprintf("updates so far: GENERATION_CHANGED %v, CEL %v", updates, celUpdates)
		}
		return ""
	})
	mu.Lock()
	defer mu.Unlock()
	want := []update{{"pod-2", p2.ResourceVersion}, last}
	if !slices.Equal(updates, want) {
		t.Errorf("with GENERATION_CHANGED the informer got updates %v, want only the spec changes %v", updates, want)
	}
	if !slices.Equal(celUpdates, want) {
		t.Errorf("with the CEL predicate object.spec != oldObject.spec the informer got updates %v, want %v", celUpdates, want)
	}
}

// TestLabelSelectorWatch: an object whose labels stop matching a watch's selector is DELETED
// for it, and ADDED when they match again.
func TestLabelSelectorWatch(t *testing.T) {
	e := setup(t)
	ns := e.Namespace(t, "sel")
	e.createPod(t, ns, "a", map[string]string{"tier": "keep"})
	e.createPod(t, ns, "b", map[string]string{"tier": "drop"})
	s := e.StartSidecar(t, func(sock string) string { return podsConfig(sock, []string{ns}, "") })
	c := s.Client()
	ctx := callCtx(t)

	w, err := c.Watch(ctx, "pods", informerd.InNamespace(ns), informerd.WithLabelSelector("tier=keep"), informerd.SendInitialState())
	if err != nil {
		t.Fatal(err)
	}
	defer w.Close()
	rec := newRecorder()
	inf := informerd.NewInformer[corev1.Pod](c, "pods", rec.handler(), informerd.InNamespace(ns), informerd.WithLabelSelector("tier=keep"))
	alive := runInformer(t, inf)
	eventually(t, syncTimeout, "the informer syncs", func() string {
		if err := alive(); err != nil {
			return err.Error()
		}
		if !inf.HasSynced() {
			return "HasSynced() = false"
		}
		return ""
	})

	next := func() *informerdv1.WatchEvent {
		t.Helper()
		for {
			ev, err := w.Next()
			if err != nil {
				t.Fatalf("the watch ended: %v", err)
			}
			if ev.GetType() != informerd.Bookmark {
				return ev
			}
		}
	}
	expect := func(typ informerd.EventType, name string) *informerdv1.WatchEvent {
		t.Helper()
		ev := next()
		// Deleting a pod first sets its deletionTimestamp (an update), then removes it.
		for typ == informerd.Deleted && ev.GetType() == informerd.Modified && ev.GetObject().GetName() == name {
			ev = next()
		}
		if ev.GetType() != typ || ev.GetObject().GetName() != name {
			t.Fatalf("got %s %q, want %s %q", ev.GetType(), ev.GetObject().GetName(), typ, name)
		}
		checkIdentity(t, ev)
		return ev
	}
	relabel := func(name, tier string) *corev1.Pod {
		return e.mutatePod(t, ns, name, false, func(p *corev1.Pod) { p.Labels["tier"] = tier })
	}

	expect(informerd.Added, "a")
	if ev := next(); ev.GetType() != informerd.Synced {
		t.Fatalf("got %s after the initial state, want SYNCED", ev.GetType())
	}
	aDrop := relabel("a", "drop")
	ev := expect(informerd.Deleted, "a")
	// Leaving the filter is DELETED at the version of the write that moved it out.
	if ev.GetObject().GetResourceVersion() != aDrop.ResourceVersion {
		t.Errorf("DELETED a (no longer matching) carries rv %s, the write was rv %s",
			ev.GetObject().GetResourceVersion(), aDrop.ResourceVersion)
	}
	bKeep := relabel("b", "keep")
	ev = expect(informerd.Added, "b")
	if ev.GetObject().GetResourceVersion() != bKeep.ResourceVersion {
		t.Errorf("ADDED b carries rv %s, the write was rv %s", ev.GetObject().GetResourceVersion(), bKeep.ResourceVersion)
	}
	e.mutatePod(t, ns, "b", false, func(p *corev1.Pod) { p.Annotations["x"] = "y" })
	expect(informerd.Modified, "b")
	e.mutatePod(t, ns, "a", false, func(p *corev1.Pod) { p.Annotations["x"] = "y" }) // not matching: nothing
	relabel("a", "keep")
	expect(informerd.Added, "a")
	e.deletePod(t, ns, "b")
	expect(informerd.Deleted, "b")

	want := e.apiserverPods(t, "tier=keep", ns)
	eventually(t, settleTimeout, "the informer's view is the apiserver's tier=keep pods", func() string {
		if err := alive(); err != nil {
			return err.Error()
		}
		return diff("apiserver tier=keep", want, "informer handler", rec.snapshot())
	})
	rec.check(t)
	rec.mu.Lock()
	defer rec.mu.Unlock()
	// a added, deleted (relabel), b added, b updated (annotation), a added again, b updated
	// (deletionTimestamp set) and deleted.
	if rec.adds != 3 || rec.deletes != 2 || rec.updates != 2 {
		t.Errorf("handler calls: %d adds, %d updates, %d deletes; want 3, 2, 2\n%s", rec.adds, rec.updates, rec.deletes, strings.Join(rec.log, "\n"))
	}
}

// TestSidecarRestartRelists: when the sidecar is killed and restarted on the same socket, the
// informer's token is from another epoch: it relists by a delta resume (only what changed is
// sent) and delivers the differences.
func TestSidecarRestartRelists(t *testing.T) {
	e := setup(t)
	ns := e.Namespace(t, "restart")
	for i := range 20 {
		e.createPod(t, ns, fmt.Sprintf("pod-%d", i), map[string]string{"app": "web"})
	}
	s := e.StartSidecar(t, func(sock string) string { return podsConfig(sock, []string{ns}, "") })
	c := s.Client()
	ctx := callCtx(t)

	rec := newRecorder()
	inf := informerd.NewInformer[corev1.Pod](c, "pods", rec.handler(), informerd.InNamespace(ns))
	var mu sync.Mutex
	var errs []string
	inf.OnError = func(err error, decision string) {
		mu.Lock()
		defer mu.Unlock()
		errs = append(errs, fmt.Sprintf("%s -> %s", err, decision))
	}
	alive := runInformer(t, inf)
	eventually(t, syncTimeout, "the informer has the apiserver's pods", func() string {
		if err := alive(); err != nil {
			return err.Error()
		}
		return diff("apiserver", e.apiserverPods(t, "", ns), "informer handler", rec.snapshot())
	})
	before := inf.Stats()
	oldToken := before.Token

	s.Kill()
	// While it is down: additions, updates, deletions the informer can only learn by relisting.
	for i := range 3 {
		e.createPod(t, ns, fmt.Sprintf("new-%d", i), map[string]string{"app": "web"})
		e.mutatePod(t, ns, fmt.Sprintf("pod-%d", i), false, func(p *corev1.Pod) { p.Labels["changed"] = "yes" })
		e.deletePod(t, ns, fmt.Sprintf("pod-%d", 10+i))
	}
	s.Start()
	s.WaitSynced()

	want := e.apiserverPods(t, "", ns)
	eventually(t, settleTimeout, "the informer's view is the apiserver's after the restart", func() string {
		if err := alive(); err != nil {
			return err.Error()
		}
		return diff("apiserver", want, "informer handler", rec.snapshot())
	})
	after := inf.Stats()
	mu.Lock()
	t.Logf("informer before %+v\nafter %+v\nstream errors:\n%s", before, after, strings.Join(errs, "\n"))
	mu.Unlock()
	if after.DeltaResumes != before.DeltaResumes+1 || after.Relists != before.Relists {
		t.Errorf("delta resumes %d -> %d, full relists %d -> %d: want one delta resume and no full relist",
			before.DeltaResumes, after.DeltaResumes, before.Relists, after.Relists)
	}
	if after.Token.Epoch == oldToken.Epoch {
		t.Errorf("the epoch did not change across the restart (%d)", oldToken.Epoch)
	}
	if after.Anomalies != 0 {
		t.Errorf("the informer counted %d protocol anomalies", after.Anomalies)
	}
	if after.LastError == nil || informerd.Reason(after.LastError) != informerd.ReasonEpochChanged {
		t.Errorf("the informer's last stream error is %v, want EpochChanged", after.LastError)
	}
	rec.check(t)
	rec.mu.Lock()
	if rec.unknownDel != 3 {
		t.Errorf("%d deletions learnt by relisting, want 3\n%s", rec.unknownDel, strings.Join(rec.log, "\n"))
	}
	rec.mu.Unlock()

	// The raw protocol: the old token is refused with OUT_OF_RANGE EpochChanged.
	w, err := c.Watch(ctx, "pods", informerd.Since(oldToken))
	if err == nil {
		_, err = w.Next()
		w.Close()
	}
	checkErr(t, "Watch since a token of the previous run", err, codes.OutOfRange, informerd.ReasonEpochChanged)
}

// TestInformerDeltaRefusedRelistsInFull: a sidecar whose limits.maxRequestSize is below the
// held entries (70 pods: 1,120 bytes, over 1 KiB) refuses the delta resume with
// RequestTooLarge; the informer relists in full at once, delivers the differences all the same,
// and does not ask for a delta again.
func TestInformerDeltaRefusedRelistsInFull(t *testing.T) {
	e := setup(t)
	ns := e.Namespace(t, "delta-refused")
	for i := range 70 {
		e.createPod(t, ns, fmt.Sprintf("pod-%d", i), map[string]string{"app": "web"})
	}
	s := e.StartSidecar(t, func(sock string) string {
		return podsConfig(sock, []string{ns}, "limits:\n  maxRequestSize: 1Ki\n")
	})
	rec := newRecorder()
	inf := informerd.NewInformer[corev1.Pod](s.Client(), "pods", rec.handler(), informerd.InNamespace(ns))
	alive := runInformer(t, inf)
	eventually(t, syncTimeout, "the informer has the apiserver's pods", func() string {
		if err := alive(); err != nil {
			return err.Error()
		}
		return diff("apiserver", e.apiserverPods(t, "", ns), "informer handler", rec.snapshot())
	})
	s.Kill()
	e.deletePod(t, ns, "pod-0")
	e.createPod(t, ns, "new", map[string]string{"app": "web"})
	s.Start()
	s.WaitSynced()
	want := e.apiserverPods(t, "", ns)
	eventually(t, settleTimeout, "the informer's view is the apiserver's after the restart", func() string {
		if err := alive(); err != nil {
			return err.Error()
		}
		return diff("apiserver", want, "informer handler", rec.snapshot())
	})
	st := inf.Stats()
	if st.DeltaResumes != 1 || st.Relists != 1 {
		t.Errorf("delta resumes %d, full relists %d: want one refused delta, then one full relist", st.DeltaResumes, st.Relists)
	}
	rec.check(t)
	rec.mu.Lock()
	defer rec.mu.Unlock()
	if rec.adds != 71 || rec.deletes != 1 || rec.unknownDel != 1 {
		t.Errorf("handler calls: %d adds, %d deletes (%d from the relist); want 71, 1 (1)\n%s",
			rec.adds, rec.deletes, rec.unknownDel, strings.Join(rec.log, "\n"))
	}
}

// TestInformerRelistOnExpired: an informer cut off while more changes happen than the change
// log holds gets Expired on resuming, relists by a delta resume, and delivers exactly the
// differences.
func TestInformerRelistOnExpired(t *testing.T) {
	e := setup(t)
	ns := e.Namespace(t, "expired")
	for i := range 10 {
		e.createPod(t, ns, fmt.Sprintf("pod-%d", i), map[string]string{"app": "web"})
	}
	s := e.StartSidecar(t, func(sock string) string {
		return podsConfig(sock, []string{ns}, "changeLog:\n  maxEvents: 5\n")
	})
	px := newProxy(t, s.Socket)
	c := dialTarget(t, px.target())
	ctx := callCtx(t)

	rec := newRecorder()
	inf := informerd.NewInformer[corev1.Pod](c, "pods", rec.handler(), informerd.InNamespace(ns))
	alive := runInformer(t, inf)
	eventually(t, syncTimeout, "the informer has the apiserver's pods", func() string {
		if err := alive(); err != nil {
			return err.Error()
		}
		// The initial pods reach the handler before the SYNCED event sets the resume token:
		// wait for the token too, or the Watch below would start from nothing.
		if inf.Stats().Token.IsZero() {
			return "the informer has no resume token yet (SYNCED not handled)"
		}
		return diff("apiserver", e.apiserverPods(t, "", ns), "informer handler", rec.snapshot())
	})
	oldToken := inf.Stats().Token

	px.setDown(true)
	for i := range 4 {
		e.createPod(t, ns, fmt.Sprintf("new-%d", i), map[string]string{"app": "web"})
		e.mutatePod(t, ns, fmt.Sprintf("pod-%d", i), false, func(p *corev1.Pod) { p.Labels["changed"] = "yes" })
		e.mutatePod(t, ns, fmt.Sprintf("pod-%d", i), true, func(p *corev1.Pod) { p.Status.Message = "changed" })
		e.deletePod(t, ns, fmt.Sprintf("pod-%d", 5+i))
	}
	want := e.apiserverPods(t, "", ns)
	// Wait until the sidecar has all of it, so that the token is surely out of its log.
	direct := s.Client()
	eventually(t, settleTimeout, "informerd has the apiserver's pods", func() string {
		got, _, err := sidecarPods(ctx, direct, "pods", informerd.InNamespace(ns))
		if err != nil {
			return err.Error()
		}
		return diff("apiserver", want, "informerd", got)
	})
	w, err := direct.Watch(ctx, "pods", informerd.Since(oldToken))
	if err == nil {
		_, err = w.Next()
		w.Close()
	}
	checkErr(t, "Watch since a token older than the change log", err, codes.OutOfRange, informerd.ReasonExpired)

	px.setDown(false)
	eventually(t, settleTimeout, "the informer's view is the apiserver's after relisting", func() string {
		if err := alive(); err != nil {
			return err.Error()
		}
		return diff("apiserver", want, "informer handler", rec.snapshot())
	})
	st := inf.Stats()
	t.Logf("informer: %+v", st)
	if st.DeltaResumes != 1 || st.Relists != 0 || informerd.Reason(st.LastError) != informerd.ReasonExpired {
		t.Errorf("delta resumes %d, full relists %d, last error %v: want one delta resume after Expired",
			st.DeltaResumes, st.Relists, st.LastError)
	}
	rec.check(t)
	rec.mu.Lock()
	defer rec.mu.Unlock()
	// 10 initial adds, then 4 adds, 4 updates (label and status of pod-0..3 seen as one), 4
	// deletions without a final state.
	if rec.adds != 14 || rec.updates != 4 || rec.deletes != 4 || rec.unknownDel != 4 {
		t.Errorf("handler calls: %d adds, %d updates, %d deletes (%d from the relist); want 14, 4, 4 (4)\n%s",
			rec.adds, rec.updates, rec.deletes, rec.unknownDel, strings.Join(rec.log, "\n"))
	}
}

// TestWatchEndsWithReason: a token of an unknown epoch is refused with OUT_OF_RANGE
// EpochChanged; a watch since a List's token follows on from it.
func TestWatchEndsWithReason(t *testing.T) {
	e := setup(t)
	ns := e.Namespace(t, "reason")
	e.createPod(t, ns, "a", nil)
	s := e.StartSidecar(t, func(sock string) string { return podsConfig(sock, []string{ns}, "") })
	c := s.Client()
	ctx := callCtx(t)
	res, err := c.List(ctx, "pods")
	if err != nil {
		t.Fatal(err)
	}
	// A token of an epoch that never was.
	w, err := c.Watch(ctx, "pods", informerd.Since(informerd.ResumeToken{Epoch: res.Token.Epoch ^ 0x5a5a, Revision: 1}))
	if err == nil {
		_, err = w.Next()
		w.Close()
	}
	checkErr(t, "Watch since another epoch's token", err, codes.OutOfRange, informerd.ReasonEpochChanged)
	// Bookmarks: a quiet watch learns how far it has got.
	w, err = c.Watch(ctx, "pods", informerd.InNamespace(ns), informerd.Since(res.Token), informerd.WithBookmarkInterval(time.Second))
	if err != nil {
		t.Fatal(err)
	}
	ev, err := w.Next()
	w.Close()
	if err != nil {
		t.Fatalf("watch with bookmarks: %v", err)
	}
	if ev.GetType() != informerd.Bookmark || ev.GetEpoch() != res.Token.Epoch || ev.GetRevision() < res.Token.Revision || ev.GetObject() != nil {
		t.Errorf("first event of a quiet watch with bookmarks: %s at %d/%d (object %v), want a BOOKMARK at %s or later",
			ev.GetType(), ev.GetEpoch(), ev.GetRevision(), ev.GetObject(), res.Token)
	}
	// Following on from the List, as JSON a controller without Go types decodes.
	w, err = c.Watch(ctx, "pods", informerd.InNamespace(ns), informerd.Since(res.Token))
	if err != nil {
		t.Fatal(err)
	}
	defer w.Close()
	e.createPod(t, ns, "b", map[string]string{"x": "y"})
	for {
		ev, err := w.Next()
		if err != nil {
			t.Fatalf("watch: %v", err)
		}
		if ev.GetType() != informerd.Added {
			continue
		}
		var obj map[string]any
		if err := json.Unmarshal(ev.GetObject().GetJson(), &obj); err != nil {
			t.Fatal(err)
		}
		if obj["kind"] != "Pod" || ev.GetObject().GetName() != "b" || ev.GetObject().GetLabels()["x"] != "y" {
			t.Errorf("ADDED: %v %v", obj["kind"], ev.GetObject())
		}
		if ev.GetEpoch() != res.Token.Epoch || ev.GetRevision() <= res.Token.Revision {
			t.Errorf("ADDED at %d/%d, after the List at %s", ev.GetEpoch(), ev.GetRevision(), res.Token)
		}
		return
	}
}

func freePort(t *testing.T) int {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	return ln.Addr().(*net.TCPAddr).Port
}

// TestFellBehindResumes: an informer whose handler stalls while more changes happen than the
// sidecar buffers for it is ended with RESOURCE_EXHAUSTED FellBehind, resumes from the last
// event it handled (no relist) and ends with exactly the apiserver's state.
func TestFellBehindResumes(t *testing.T) {
	e := setup(t)
	ns := e.Namespace(t, "behind")
	const pods = 40
	for i := range pods {
		e.createPod(t, ns, fmt.Sprintf("pod-%d", i), map[string]string{"app": "web"})
	}
	s := e.StartSidecar(t, func(sock string) string { return podsConfig(sock, []string{ns}, "") })
	// Fixed HTTP/2 windows (no dynamic growth): the client's transport holds little, so the
	// sidecar's own buffer fills.
	c, err := informerd.Dial("unix://"+s.Socket, informerd.WithGRPCDialOptions(
		grpc.WithInitialWindowSize(1<<16), grpc.WithInitialConnWindowSize(1<<16)))
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	direct := s.Client()
	ctx := callCtx(t)

	rec := newRecorder()
	h := rec.handler().(informerd.HandlerFuncs[corev1.Pod])
	gate := make(chan struct{})
	var stalled sync.Once
	update := h.UpdateFunc
	h.UpdateFunc = func(old informerd.Meta, p *corev1.Pod) {
		stalled.Do(func() { <-gate })
		update(old, p)
	}
	inf := informerd.NewInformer[corev1.Pod](c, "pods", h, informerd.InNamespace(ns))
	var mu sync.Mutex
	var errs []string
	inf.OnError = func(err error, decision string) {
		mu.Lock()
		defer mu.Unlock()
		errs = append(errs, fmt.Sprintf("%s -> %s", err, decision))
	}
	alive := runInformer(t, inf)
	eventually(t, syncTimeout, "the informer syncs", func() string {
		if err := alive(); err != nil {
			return err.Error()
		}
		if !inf.HasSynced() {
			return "HasSynced() = false"
		}
		return ""
	})

	// 1,440 updates (more than the sidecar's 1,024-event buffer per watcher plus what the
	// HTTP/2 windows hold) while the handler is stuck in its first update.
	var wg sync.WaitGroup
	for w := range 8 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := range 180 {
				name := fmt.Sprintf("pod-%d", (w*5+i)%pods)
				if e.mutatePod(t, ns, name, false, func(p *corev1.Pod) { p.Annotations["informerd.io/n"] = fmt.Sprint(i) }) == nil {
					t.Errorf("pod %s vanished", name)
					return
				}
			}
		}()
	}
	wg.Wait()
	eventually(t, settleTimeout, "informerd ends the stalled watch", func() string {
		st, err := direct.Status(ctx, "pods")
		if err != nil {
			return err.Error()
		}
		if len(st.GetResources()) != 1 || st.GetResources()[0].GetDroppedWatches() == 0 {
			return fmt.Sprintf("status: %v", st.GetResources())
		}
		return ""
	})
	close(gate)

	want := e.apiserverPods(t, "", ns)
	eventually(t, settleTimeout, "the informer's view is the apiserver's", func() string {
		if err := alive(); err != nil {
			return err.Error()
		}
		return diff("apiserver", want, "informer handler", rec.snapshot())
	})
	st := inf.Stats()
	mu.Lock()
	t.Logf("informer: %+v\nstream errors:\n%s", st, strings.Join(errs, "\n"))
	mu.Unlock()
	if st.Relists != 0 || st.Resumes == 0 || st.Anomalies != 0 {
		t.Errorf("relists %d, resumes %d, anomalies %d: want a resume and no relist", st.Relists, st.Resumes, st.Anomalies)
	}
	if informerd.Reason(st.LastError) != informerd.ReasonFellBehind || informerd.Code(st.LastError) != codes.ResourceExhausted {
		t.Errorf("the informer's last stream error is %v, want RESOURCE_EXHAUSTED FellBehind", st.LastError)
	}
	rec.check(t)
}

// TestShutdownReason: a sidecar asked to stop ends its watches with UNAVAILABLE ShuttingDown.
func TestShutdownReason(t *testing.T) {
	e := setup(t)
	ns := e.Namespace(t, "stop")
	e.createPod(t, ns, "a", nil)
	s := e.StartSidecar(t, func(sock string) string { return podsConfig(sock, []string{ns}, "") })
	c := s.Client()
	w, err := c.Watch(callCtx(t), "pods", informerd.SendInitialState())
	if err != nil {
		t.Fatal(err)
	}
	defer w.Close()
	for {
		ev, err := w.Next()
		if err != nil {
			t.Fatal(err)
		}
		if ev.GetType() == informerd.Synced {
			break
		}
	}
	s.Stop()
	for {
		ev, err := w.Next()
		if err != nil {
			checkErr(t, "a watch open while the sidecar stops", err, codes.Unavailable, informerd.ReasonShuttingDown)
			return
		}
		t.Logf("event while stopping: %s", ev.GetType())
	}
}

// TestSeederChurn: the project's seeder writes realistic pods (server-side apply, status as
// the kubelet writes it) and churns them while the informer's connection is broken again and
// again; the informer ends with exactly the apiserver's state. Needs INFORMERD_SEED_BIN.
func TestSeederChurn(t *testing.T) {
	e := setup(t)
	if e.SeedBin == "" {
		t.Skip("INFORMERD_SEED_BIN is not set (make test sets it to the seeder, .cache/bin/seed)")
	}
	prefix := "igo-seed-" + randSuffix()
	seed := func(args ...string) {
		t.Helper()
		args = append(args[:1:1], append([]string{"--kubeconfig", e.Kubeconfig, "--prefix", prefix}, args[1:]...)...)
		out, err := exec.Command(e.SeedBin, args...).CombinedOutput()
		if err != nil {
			t.Fatalf("seed %s: %v\n%s", strings.Join(args, " "), err, out)
		}
		lines := strings.Split(strings.TrimSpace(string(out)), "\n")
		t.Logf("seed %s: %s", args[0], lines[len(lines)-1])
	}
	t.Cleanup(func() {
		out, err := exec.Command(e.SeedBin, "clean", "--kubeconfig", e.Kubeconfig, "--prefix", prefix, "--wait", "0").CombinedOutput()
		if err != nil {
			t.Logf("seed clean: %v\n%s", err, out)
		}
	})
	seed("pods", "--pods", "300", "--namespaces", "2")
	namespaces := []string{prefix + "-0", prefix + "-1"}
	s := e.StartSidecar(t, func(sock string) string { return podsConfig(sock, namespaces, "") })
	px := newProxy(t, s.Socket)
	c := dialTarget(t, px.target())
	direct := s.Client()
	ctx := callCtx(t)

	rec := newRecorder()
	inf := informerd.NewInformer[corev1.Pod](c, "pods", rec.handler())
	alive := runInformer(t, inf)
	eventually(t, syncTimeout, "the informer has the seeded pods", func() string {
		if err := alive(); err != nil {
			return err.Error()
		}
		return diff("apiserver", e.apiserverPods(t, "", namespaces...), "informer handler", rec.snapshot())
	})

	stop := make(chan struct{})
	broken := make(chan struct{})
	go func() {
		defer close(broken)
		for {
			select {
			case <-stop:
				return
			case <-time.After(400 * time.Millisecond):
				px.breakConns()
			}
		}
	}()
	seed("churn", "--namespaces", "2", "--rate", "60", "--duration", "8s")
	close(stop)
	<-broken

	want := e.apiserverPods(t, "", namespaces...)
	eventually(t, settleTimeout, "informerd and the informer end with the apiserver's pods", func() string {
		if err := alive(); err != nil {
			return err.Error()
		}
		got, _, err := sidecarPods(ctx, direct, "pods")
		if err != nil {
			return err.Error()
		}
		if d := diff("apiserver", want, "informerd List", got); d != "" {
			return d
		}
		return diff("apiserver", want, "informer handler", rec.snapshot())
	})
	st := inf.Stats()
	t.Logf("informer: %+v (proxy broke its connections %d times); handler: %d adds, %d updates, %d deletes",
		st, px.breaks, rec.adds, rec.updates, rec.deletes)
	if st.Relists != 0 || st.Resumes == 0 || st.Anomalies != 0 {
		t.Errorf("relists %d, resumes %d, anomalies %d: want resumes only", st.Relists, st.Resumes, st.Anomalies)
	}
	rec.check(t)
}

// TestInformerWithPrevious: with WithPrevious, each update's Meta carries the object before the
// change, so a handler compares old and new spec without keeping a copy of either.
func TestInformerWithPrevious(t *testing.T) {
	e := setup(t)
	ns := e.Namespace(t, "prev")
	e.createPod(t, ns, "pod-0", map[string]string{"round": "0"})
	s := e.StartSidecar(t, func(sock string) string { return podsConfig(sock, []string{ns}, "") })
	c := s.Client()
	var mu sync.Mutex
	var seen []string
	inf := informerd.NewInformer[corev1.Pod](c, "pods", informerd.HandlerFuncs[corev1.Pod]{
		UpdateFunc: func(old informerd.Meta, p *corev1.Pod) {
			mu.Lock()
			defer mu.Unlock()
			if old.Previous == nil {
				seen = append(seen, "no previous")
				return
			}
			var before corev1.Pod
			if err := json.Unmarshal(old.Previous.GetJson(), &before); err != nil {
				t.Error(err)
			}
			seen = append(seen, fmt.Sprintf("%s->%s rv %s->%s", before.Labels["round"], p.Labels["round"],
				old.Previous.GetResourceVersion(), p.ResourceVersion))
			if before.ResourceVersion != old.ResourceVersion {
				t.Errorf("Previous is at %s, Meta at %s", before.ResourceVersion, old.ResourceVersion)
			}
		},
	}, informerd.InNamespace(ns), informerd.WithPrevious())
	alive := runInformer(t, inf)
	eventually(t, syncTimeout, "the informer syncs", func() string {
		if err := alive(); err != nil {
			return err.Error()
		}
		if !inf.HasSynced() {
			return "HasSynced() = false"
		}
		return ""
	})
	var want []string
	for i := 1; i <= 3; i++ {
		before := e.mutatePod(t, ns, "pod-0", false, func(*corev1.Pod) {})
		after := e.mutatePod(t, ns, "pod-0", false, func(p *corev1.Pod) { p.Labels["round"] = strconv.Itoa(i) })
		want = append(want, fmt.Sprintf("%d->%d rv %s->%s", i-1, i, before.ResourceVersion, after.ResourceVersion))
	}
	eventually(t, syncTimeout, "each update arrives with its previous state", func() string {
		mu.Lock()
		defer mu.Unlock()
		if slices.Equal(seen, want) {
			return ""
		}
		return fmt.Sprintf("got %q, want %q", seen, want)
	})
}
