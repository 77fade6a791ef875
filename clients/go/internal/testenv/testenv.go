// Package testenv is the test harness both Go client suites share (the plain client's and
// crcache's): a real kube-apiserver (INFORMERD_KUBECONFIG) and a real informerd binary
// (INFORMERD_BIN), which each test starts with a configuration of its own. No mocks.
//
// It exists because `_test.go` files cannot be imported across packages, and crcache is a
// module of its own; Go's `internal` rule goes by import path, so informerd.io/clients/go/crcache
// may import it while users of the client cannot. Each suite keeps its own helpers (its
// configurations, pod builders, recorders) in its own env_test.go; only what both need is here.
package testenv

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"fmt"
	"os"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/clientcmd"
)

// SyncTimeout bounds the wait for a sidecar to sync; it only keeps a broken run from hanging,
// nothing asserts on timing.
const SyncTimeout = 2 * time.Minute

// syncPoll is how often WaitSynced asks the sidecar's Status; it only decides how soon after
// the sync a test goes on.
const syncPoll = 100 * time.Millisecond

// Env is the environment `make test` provides, with a client of the kube-apiserver.
type Env struct {
	Bin        string
	Kubeconfig string
	SeedBin    string
	Config     *rest.Config
	Kube       kubernetes.Interface

	prefix, label string
}

// Setup reads the environment `make test` provides; it fails (never skips) without it. The
// namespaces Namespace creates are named prefix-HINT-RANDOM and labelled informerd.io/test=label,
// so that each suite's are told apart from other engineers' and other suites'.
func Setup(t *testing.T, prefix, label string) *Env {
	t.Helper()
	bin, kubeconfig := os.Getenv("INFORMERD_BIN"), os.Getenv("INFORMERD_KUBECONFIG")
	if bin == "" || kubeconfig == "" {
		t.Fatalf("INFORMERD_BIN and INFORMERD_KUBECONFIG must be set (got %q, %q): these tests run against a "+
			"real informerd and kube-apiserver; run `make test` from the repository root, which builds both and sets them", bin, kubeconfig)
	}
	cfg, err := clientcmd.BuildConfigFromFlags("", kubeconfig)
	if err != nil {
		t.Fatalf("kubeconfig %s: %v", kubeconfig, err)
	}
	cfg.QPS, cfg.Burst = 200, 400
	kube, err := kubernetes.NewForConfig(cfg)
	if err != nil {
		t.Fatal(err)
	}
	return &Env{Bin: bin, Kubeconfig: kubeconfig, SeedBin: os.Getenv("INFORMERD_SEED_BIN"), Config: cfg, Kube: kube,
		prefix: prefix, label: label}
}

// RandSuffix is six random hex digits, for names no other run uses.
func RandSuffix() string {
	b := make([]byte, 3)
	_, _ = rand.Read(b)
	return hex.EncodeToString(b)
}

// Namespace creates a namespace with a unique name and deletes it when the test ends.
func (e *Env) Namespace(t *testing.T, hint string) string {
	t.Helper()
	name := fmt.Sprintf("%s-%s-%s", e.prefix, hint, RandSuffix())
	_, err := e.Kube.CoreV1().Namespaces().Create(context.Background(),
		&corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: name, Labels: map[string]string{"informerd.io/test": e.label}}},
		metav1.CreateOptions{})
	if err != nil {
		t.Fatalf("create namespace %s: %v", name, err)
	}
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		defer cancel()
		// Pods first (grace period 0: no kubelet runs), then the namespace.
		zero := int64(0)
		_ = e.Kube.CoreV1().Pods(name).DeleteCollection(ctx, metav1.DeleteOptions{GracePeriodSeconds: &zero}, metav1.ListOptions{})
		_ = e.Kube.CoreV1().Namespaces().Delete(ctx, name, metav1.DeleteOptions{})
	})
	return name
}

// PodSpec is the spec of a one-container pod with no termination grace period (no kubelet
// runs, so a deleted pod goes at once).
func PodSpec(image string) corev1.PodSpec {
	zero := int64(0)
	return corev1.PodSpec{
		TerminationGracePeriodSeconds: &zero,
		Containers:                    []corev1.Container{{Name: "app", Image: image}},
	}
}

// Eventually polls cond every `every` until it returns "" (done) or the timeout passes, then
// fails with the last description cond gave.
//
// Decision: each suite keeps its own poll interval (the plain client's 200 ms, crcache's 50 ms),
// so that moving the harness here changes no test's timing: a test whose condition races with
// what it checks next (a handler's view against the informer's Stats) is not made to look
// sooner than it did.
func Eventually(t *testing.T, timeout, every time.Duration, what string, cond func() string) {
	t.Helper()
	deadline := time.Now().Add(timeout)
	for {
		msg := cond()
		if msg == "" {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("%s: still not the case after %s:\n%s", what, timeout, msg)
		}
		time.Sleep(every)
	}
}
