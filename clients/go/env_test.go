package informerd_test

// The test environment: a real kube-apiserver (INFORMERD_KUBECONFIG) and a real informerd
// binary (INFORMERD_BIN), started by each test with a configuration of its own. No mocks.

import (
	"context"
	"fmt"
	"io"
	"net"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	informerd "informerd.io/clients/go"
	"informerd.io/clients/go/internal/testenv"
)

// Generous bounds that only keep a broken run from hanging; nothing asserts on timing.
const (
	syncTimeout   = testenv.SyncTimeout
	settleTimeout = 2 * time.Minute
)

// env is the shared harness (testenv) with this suite's pod helpers.
type env struct{ *testenv.Env }

// setup reads the environment `make test` provides; it fails (never skips) without it.
func setup(t *testing.T) *env { return &env{testenv.Setup(t, "igo", "clients-go")} }

var (
	randSuffix = testenv.RandSuffix
	dialTarget = testenv.DialTarget
)

// eventually polls cond (every 200 ms) until it returns "" or the timeout passes.
func eventually(t *testing.T, timeout time.Duration, what string, cond func() string) {
	t.Helper()
	testenv.Eventually(t, timeout, 200*time.Millisecond, what, cond)
}

var zero = int64(0)

func (e *env) createPod(t *testing.T, ns, name string, labels map[string]string) *corev1.Pod {
	t.Helper()
	p, err := e.Kube.CoreV1().Pods(ns).Create(context.Background(), &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{Name: name, Labels: labels, Annotations: map[string]string{"informerd.io/n": "0"}},
		Spec:       testenv.PodSpec("registry.invalid/app:1"),
	}, metav1.CreateOptions{})
	if err != nil {
		t.Fatalf("create pod %s/%s: %v", ns, name, err)
	}
	return p
}

// mutatePod gets, changes and updates a pod (the status subresource when status is true),
// retrying on conflicts; it returns the written pod, or nil if the pod is gone.
func (e *env) mutatePod(t *testing.T, ns, name string, status bool, change func(*corev1.Pod)) *corev1.Pod {
	t.Helper()
	ctx := context.Background()
	for attempt := 0; ; attempt++ {
		p, err := e.Kube.CoreV1().Pods(ns).Get(ctx, name, metav1.GetOptions{})
		if apierrors.IsNotFound(err) {
			return nil
		}
		if err != nil {
			t.Fatalf("get pod %s/%s: %v", ns, name, err)
		}
		change(p)
		if status {
			p, err = e.Kube.CoreV1().Pods(ns).UpdateStatus(ctx, p, metav1.UpdateOptions{})
		} else {
			p, err = e.Kube.CoreV1().Pods(ns).Update(ctx, p, metav1.UpdateOptions{})
		}
		if err == nil {
			return p
		}
		if apierrors.IsNotFound(err) {
			return nil
		}
		if !apierrors.IsConflict(err) || attempt > 20 {
			t.Fatalf("update pod %s/%s: %v", ns, name, err)
		}
	}
}

func (e *env) deletePod(t *testing.T, ns, name string) {
	t.Helper()
	err := e.Kube.CoreV1().Pods(ns).Delete(context.Background(), name, metav1.DeleteOptions{GracePeriodSeconds: &zero})
	if err != nil && !apierrors.IsNotFound(err) {
		t.Fatalf("delete pod %s/%s: %v", ns, name, err)
	}
}

// apiserverPods returns "namespace/name" -> resourceVersion of the pods in the namespaces,
// optionally restricted by a label selector.
func (e *env) apiserverPods(t *testing.T, selector string, namespaces ...string) map[string]string {
	t.Helper()
	m := map[string]string{}
	for _, ns := range namespaces {
		list, err := e.Kube.CoreV1().Pods(ns).List(context.Background(), metav1.ListOptions{LabelSelector: selector})
		if err != nil {
			t.Fatalf("list pods in %s: %v", ns, err)
		}
		for _, p := range list.Items {
			m[p.Namespace+"/"+p.Name] = p.ResourceVersion
		}
	}
	return m
}

// sidecarPods lists through informerd: "namespace/name" -> resourceVersion.
func sidecarPods(ctx context.Context, c *informerd.Client, resource string, opts ...informerd.ListOption) (map[string]string, informerd.ResumeToken, error) {
	res, err := informerd.ListAs[corev1.Pod](ctx, c, resource, opts...)
	if err != nil {
		return nil, informerd.ResumeToken{}, err
	}
	m := map[string]string{}
	for _, p := range res.Items {
		m[p.Namespace+"/"+p.Name] = p.ResourceVersion
	}
	return m, res.Token, nil
}

// diff describes how two key -> resourceVersion maps differ ("" if they are equal).
func diff(wantName string, want map[string]string, gotName string, got map[string]string) string {
	var lines []string
	for k, v := range want {
		if g, ok := got[k]; !ok {
			lines = append(lines, fmt.Sprintf("%s: in %s (rv %s), missing from %s", k, wantName, v, gotName))
		} else if g != v {
			lines = append(lines, fmt.Sprintf("%s: rv %s in %s, %s in %s", k, v, wantName, g, gotName))
		}
	}
	for k, v := range got {
		if _, ok := want[k]; !ok {
			lines = append(lines, fmt.Sprintf("%s: in %s (rv %s), not in %s", k, gotName, v, wantName))
		}
	}
	slices.Sort(lines)
	if len(lines) > 20 {
		lines = append(lines[:20], fmt.Sprintf("... and %d more", len(lines)-20))
	}
	return strings.Join(lines, "\n")
}

// podsConfig is a configuration caching the pods of the namespaces, without managedFields.
func podsConfig(socket string, namespaces []string, extra string) string {
	return fmt.Sprintf(`apiVersion: informerd.io/v1alpha1
kind: Config
server:
  socket: %s
%sresources:
- name: pods
  apiVersion: v1
  kind: Pod
  namespaces: [%s]
  transform:
    drop: [metadata.managedFields]
  indexes:
  - name: image
    path: spec.containers[*].image
`, socket, extra, strings.Join(namespaces, ", "))
}

// --- a proxy whose connections the test can break ---------------------------------------------

// proxy forwards a Unix socket to the sidecar's, so that a test can break the client's
// connections (as a network would) without touching the client's code.
type proxy struct {
	ln       net.Listener
	upstream string
	mu       sync.Mutex
	conns    map[net.Conn]struct{}
	down     bool
	breaks   int
}

func newProxy(t *testing.T, upstream string) *proxy {
	t.Helper()
	path := filepath.Join(t.TempDir(), "proxy.sock")
	ln, err := net.Listen("unix", path)
	if err != nil {
		t.Fatal(err)
	}
	p := &proxy{ln: ln, upstream: upstream, conns: map[net.Conn]struct{}{}}
	go p.serve()
	t.Cleanup(func() {
		_ = ln.Close()
		p.setDown(true)
	})
	return p
}

func (p *proxy) target() string { return "unix://" + p.ln.Addr().String() }

func (p *proxy) serve() {
	for {
		c, err := p.ln.Accept()
		if err != nil {
			return
		}
		p.mu.Lock()
		down := p.down
		p.mu.Unlock()
		if down {
			_ = c.Close()
			continue
		}
		u, err := net.Dial("unix", p.upstream)
		if err != nil {
			_ = c.Close()
			continue
		}
		p.mu.Lock()
		p.conns[c], p.conns[u] = struct{}{}, struct{}{}
		p.mu.Unlock()
		pipe := func(dst, src net.Conn) {
			_, _ = io.Copy(dst, src)
			_ = dst.Close()
			_ = src.Close()
			p.mu.Lock()
			delete(p.conns, dst)
			delete(p.conns, src)
			p.mu.Unlock()
		}
		go pipe(c, u)
		go pipe(u, c)
	}
}

// breakConns closes every open connection; clients reconnect through the proxy.
func (p *proxy) breakConns() {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.breaks++
	for c := range p.conns {
		_ = c.Close()
	}
}

// setDown breaks every connection and, while down, refuses new ones.
func (p *proxy) setDown(down bool) {
	p.mu.Lock()
	p.down = down
	p.mu.Unlock()
	if down {
		p.breakConns()
	}
}

// --- recording what a handler sees ------------------------------------------------------------

// recorder is an informer handler that keeps the handler's view (key -> resourceVersion) and
// checks that each object's resourceVersions only increase as delivered.
type recorder struct {
	mu         sync.Mutex
	view       map[string]string
	last       map[string]uint64 // the last resourceVersion delivered per key, deletions included
	violations []string
	adds       int
	updates    int
	deletes    int
	unknownDel int // deletions learnt by relisting (no final state)
	log        []string
}

func newRecorder() *recorder {
	return &recorder{view: map[string]string{}, last: map[string]uint64{}}
}

func (r *recorder) handler() informerd.Handler[corev1.Pod] {
	return informerd.HandlerFuncs[corev1.Pod]{
		AddFunc: func(p *corev1.Pod) {
			r.mu.Lock()
			defer r.mu.Unlock()
			r.adds++
			key := p.Namespace + "/" + p.Name
			if _, ok := r.view[key]; ok {
				r.violations = append(r.violations, fmt.Sprintf("add of %s which the handler already has", key))
			}
			r.see(key, p.ResourceVersion, "add", false)
			r.view[key] = p.ResourceVersion
		},
		UpdateFunc: func(old informerd.Meta, p *corev1.Pod) {
			r.mu.Lock()
			defer r.mu.Unlock()
			r.updates++
			key := p.Namespace + "/" + p.Name
			if have, ok := r.view[key]; !ok {
				r.violations = append(r.violations, fmt.Sprintf("update of %s which the handler does not have", key))
			} else if have != old.ResourceVersion {
				r.violations = append(r.violations, fmt.Sprintf("update of %s: old rv %s, handler had %s", key, old.ResourceVersion, have))
			}
			r.see(key, p.ResourceVersion, "update", false)
			r.view[key] = p.ResourceVersion
		},
		DeleteFunc: func(old informerd.Meta, p *corev1.Pod) {
			r.mu.Lock()
			defer r.mu.Unlock()
			r.deletes++
			key := old.Key()
			if _, ok := r.view[key]; !ok {
				r.violations = append(r.violations, fmt.Sprintf("delete of %s which the handler does not have", key))
			}
			if p == nil {
				r.unknownDel++
				r.log = append(r.log, "delete(relist) "+key)
			} else {
				// The last state may carry the resourceVersion of the deletion or the last
				// stored one: it must not go back.
				r.see(key, p.ResourceVersion, "delete", true)
			}
			delete(r.view, key)
		},
	}
}

func (r *recorder) see(key, rv, what string, allowEqual bool) {
	n, err := strconv.ParseUint(rv, 10, 64)
	if err != nil {
		r.violations = append(r.violations, fmt.Sprintf("%s of %s: resourceVersion %q is not a number", what, key, rv))
		return
	}
	r.log = append(r.log, fmt.Sprintf("%s %s %s", what, key, rv))
	if last, ok := r.last[key]; ok && (n < last || (n == last && !allowEqual)) {
		r.violations = append(r.violations, fmt.Sprintf("%s of %s at rv %d after rv %d", what, key, n, last))
	}
	r.last[key] = n
}

func (r *recorder) snapshot() map[string]string {
	r.mu.Lock()
	defer r.mu.Unlock()
	m := make(map[string]string, len(r.view))
	for k, v := range r.view {
		m[k] = v
	}
	return m
}

func (r *recorder) check(t *testing.T) {
	t.Helper()
	r.mu.Lock()
	defer r.mu.Unlock()
	if len(r.violations) > 0 {
		t.Errorf("the handler saw %d violations:\n%s", len(r.violations), strings.Join(r.violations, "\n"))
	}
}

// runInformer runs an informer until the test ends. The function it returns reports an error
// if Run has returned early (for use in polling conditions).
func runInformer(t *testing.T, inf interface{ Run(context.Context) error }) func() error {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	var runErr error
	go func() { runErr = inf.Run(ctx); close(done) }()
	t.Cleanup(func() {
		cancel()
		<-done
		if runErr != nil && runErr != context.Canceled {
			t.Errorf("informer Run: %v", runErr)
		}
	})
	return func() error {
		select {
		case <-done:
			return fmt.Errorf("informer Run returned: %v", runErr)
		default:
			return nil
		}
	}
}
