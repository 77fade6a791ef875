package crcache_test

// The test environment: a real kube-apiserver (INFORMERD_KUBECONFIG) and a real informerd
// (INFORMERD_BIN), which each test starts with a configuration of its own. No mocks.

import (
	"bytes"
	"context"
	"crypto/rand"
	"encoding/hex"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes/scheme"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/clientcmd"
	"sigs.k8s.io/controller-runtime/pkg/cache"
	"sigs.k8s.io/controller-runtime/pkg/client"

	informerd "informerd.io/clients/go"
	"informerd.io/clients/go/crcache"
)

// A bound that only keeps a broken run from hanging; nothing asserts on timing.
const waitTimeout = 2 * time.Minute

type env struct {
	bin        string
	kubeconfig string
	cfg        *rest.Config
	kube       client.Client
}

// setup reads the environment `make test` provides; it fails (never skips) without it.
func setup(t *testing.T) *env {
	t.Helper()
	bin, kubeconfig := os.Getenv("INFORMERD_BIN"), os.Getenv("INFORMERD_KUBECONFIG")
	if bin == "" || kubeconfig == "" {
		t.Fatalf("INFORMERD_BIN and INFORMERD_KUBECONFIG must be set (got %q, %q): these tests run against a "+
			"real informerd and kube-apiserver; run `make test` from the repository root", bin, kubeconfig)
	}
	cfg, err := clientcmd.BuildConfigFromFlags("", kubeconfig)
	if err != nil {
		t.Fatalf("kubeconfig %s: %v", kubeconfig, err)
	}
	cfg.QPS, cfg.Burst = 200, 400
	kube, err := client.New(cfg, client.Options{Scheme: scheme.Scheme})
	if err != nil {
		t.Fatal(err)
	}
	return &env{bin: bin, kubeconfig: kubeconfig, cfg: cfg, kube: kube}
}

func randSuffix() string {
	b := make([]byte, 3)
	_, _ = rand.Read(b)
	return hex.EncodeToString(b)
}

// namespace creates a namespace with a unique name, deleted when the test ends.
func (e *env) namespace(t *testing.T, hint string) string {
	t.Helper()
	name := fmt.Sprintf("icr-%s-%s", hint, randSuffix())
	ns := &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: name, Labels: map[string]string{"informerd.io/test": "crcache"}}}
	if err := e.kube.Create(context.Background(), ns); err != nil {
		t.Fatalf("create namespace %s: %v", name, err)
	}
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		defer cancel()
		// Pods first with no grace period (no kubelet runs), then the namespace.
		_ = e.kube.DeleteAllOf(ctx, &corev1.Pod{}, client.InNamespace(name), client.GracePeriodSeconds(0))
		_ = e.kube.Delete(ctx, ns)
	})
	return name
}

// config caches pods (indexed by spec.nodeName, and by controller name under the name
// ".metadata.controller") and Deployments of the namespaces; no Services.
func config(socket string, namespaces ...string) string {
	ns := strings.Join(namespaces, ", ")
	return fmt.Sprintf(`apiVersion: informerd.io/v1alpha1
kind: Config
server:
  socket: %s
resources:
- name: pods
  apiVersion: v1
  kind: Pod
  namespaces: [%s]
  transform:
    drop: [metadata.managedFields, spec.tolerations]
  indexes:
  - name: node
    path: spec.nodeName
  - name: .metadata.controller
    cel: 'has(object.metadata.ownerReferences) ? object.metadata.ownerReferences.filter(o, has(o.controller) && o.controller).map(o, o.name) : []'
- name: deployments
  apiVersion: apps/v1
  kind: Deployment
  namespaces: [%s]
  transform:
    drop: [metadata.managedFields]
`, socket, ns, ns)
}

type sidecar struct {
	t      *testing.T
	e      *env
	config string
	socket string
	log    *lockedBuffer
	cmd    *exec.Cmd
	exited chan struct{}
}

// startSidecar runs informerd with the configuration mkConfig(socket) until the test ends and
// waits until it has synced.
func (e *env) startSidecar(t *testing.T, mkConfig func(socket string) string) *sidecar {
	t.Helper()
	s := e.newSidecar(t, mkConfig)
	s.start()
	return s
}

// newSidecar writes the configuration of a sidecar, which start runs.
func (e *env) newSidecar(t *testing.T, mkConfig func(socket string) string) *sidecar {
	t.Helper()
	dir := t.TempDir()
	s := &sidecar{t: t, e: e, socket: filepath.Join(dir, "informerd.sock"), log: &lockedBuffer{}}
	s.config = filepath.Join(dir, "informerd.yaml")
	if err := os.WriteFile(s.config, []byte(mkConfig(s.socket)), 0o644); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		s.stop()
		if t.Failed() {
			t.Logf("informerd log:\n%s", s.log.String())
		}
	})
	return s
}

func (s *sidecar) start() {
	s.t.Helper()
	cmd := exec.Command(s.e.bin, "serve", "--config", s.config, "--kubeconfig", s.e.kubeconfig)
	cmd.Stdout, cmd.Stderr = s.log, s.log
	cmd.Env = append(os.Environ(), "RUST_LOG=info")
	if err := cmd.Start(); err != nil {
		s.t.Fatalf("start %s: %v", s.e.bin, err)
	}
	exited := make(chan struct{})
	go func() { _ = cmd.Wait(); close(exited) }()
	s.cmd, s.exited = cmd, exited

	c := s.client()
	ctx, cancel := context.WithTimeout(context.Background(), waitTimeout)
	defer cancel()
	done := make(chan error, 1)
	go func() { done <- c.WaitForSynced(ctx, 100*time.Millisecond) }()
	select {
	case err := <-done:
		if err != nil {
			s.t.Fatalf("informerd did not sync: %v\nlog:\n%s", err, s.log.String())
		}
	case <-exited:
		s.t.Fatalf("informerd exited before it synced\nlog:\n%s", s.log.String())
	}
}

// stop asks informerd to stop (SIGINT), killing it after 10 s.
func (s *sidecar) stop() {
	if s.cmd == nil {
		return
	}
	_ = s.cmd.Process.Signal(os.Interrupt)
	select {
	case <-s.exited:
	case <-time.After(10 * time.Second):
		_ = s.cmd.Process.Signal(syscall.SIGKILL)
		<-s.exited
	}
	s.cmd = nil
}

// client is a connection to the sidecar, closed when the test ends.
func (s *sidecar) client() *informerd.Client {
	c, err := informerd.Dial("unix://" + s.socket)
	if err != nil {
		s.t.Fatal(err)
	}
	s.t.Cleanup(func() { _ = c.Close() })
	return c
}

// cache returns a started informerd cache over the sidecar, stopped when the test ends.
func (s *sidecar) cache(t *testing.T) *crcache.Cache {
	t.Helper()
	c, err := crcache.New(crcache.Options{Client: s.client()}, cache.Options{Scheme: scheme.Scheme})
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

type lockedBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (l *lockedBuffer) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.Write(p)
}

func (l *lockedBuffer) String() string {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.String()
}

// eventually polls cond until it returns "" or the bound passes, then fails with its last word.
func eventually(t *testing.T, what string, cond func() string) {
	t.Helper()
	deadline := time.Now().Add(waitTimeout)
	for {
		msg := cond()
		if msg == "" {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("%s: still not the case after %s: %s", what, waitTimeout, msg)
		}
		time.Sleep(50 * time.Millisecond)
	}
}

var zero = int64(0)

// pod is a pod of the namespace with these labels, optionally bound to a node.
func pod(ns, name, node string, labels map[string]string) *corev1.Pod {
	return &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name, Labels: labels},
		Spec: corev1.PodSpec{
			NodeName:                      node,
			TerminationGracePeriodSeconds: &zero,
			Tolerations:                   []corev1.Toleration{{Key: "informerd.io/stripped", Operator: corev1.TolerationOpExists}},
			Containers:                    []corev1.Container{{Name: "app", Image: "registry.invalid/app:1"}},
		},
	}
}

func (e *env) create(t *testing.T, obj client.Object) {
	t.Helper()
	if err := e.kube.Create(context.Background(), obj); err != nil {
		t.Fatalf("create %T %s/%s: %v", obj, obj.GetNamespace(), obj.GetName(), err)
	}
}
