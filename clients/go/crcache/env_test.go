package crcache_test

// The test environment: a real kube-apiserver (INFORMERD_KUBECONFIG) and a real informerd
// (INFORMERD_BIN), which each test starts with a configuration of its own. No mocks.

import (
	"context"
	"fmt"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes/scheme"
	"sigs.k8s.io/controller-runtime/pkg/cache"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"informerd.io/clients/go/crcache"
	"informerd.io/clients/go/internal/testenv"
)

// A bound that only keeps a broken run from hanging; nothing asserts on timing.
const waitTimeout = 2 * time.Minute

// env is the shared harness (testenv) with a controller-runtime client, as reconcilers use.
type env struct {
	*testenv.Env
	kube client.Client
}

// setup reads the environment `make test` provides; it fails (never skips) without it.
func setup(t *testing.T) *env {
	t.Helper()
	e := testenv.Setup(t, "icr", "crcache")
	kube, err := client.New(e.Config, client.Options{Scheme: scheme.Scheme})
	if err != nil {
		t.Fatal(err)
	}
	return &env{Env: e, kube: kube}
}

type sidecar = testenv.Sidecar

var randSuffix = testenv.RandSuffix

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

// startCache returns a started informerd cache over the sidecar, stopped when the test ends.
func startCache(t *testing.T, s *sidecar) *crcache.Cache {
	t.Helper()
	return startCacheWith(t, s, cache.Options{})
}

// eventually polls cond until it returns "" or the bound passes, then fails with its last word.
func eventually(t *testing.T, what string, cond func() string) {
	t.Helper()
	testenv.Eventually(t, waitTimeout, 50*time.Millisecond, what, cond)
}

// pod is a pod of the namespace with these labels, optionally bound to a node.
func pod(ns, name, node string, labels map[string]string) *corev1.Pod {
	spec := testenv.PodSpec("registry.invalid/app:1")
	spec.NodeName = node
	spec.Tolerations = []corev1.Toleration{{Key: "informerd.io/stripped", Operator: corev1.TolerationOpExists}}
	return &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name, Labels: labels}, Spec: spec}
}

func (e *env) create(t *testing.T, obj client.Object) {
	t.Helper()
	if err := e.kube.Create(context.Background(), obj); err != nil {
		t.Fatalf("create %T %s/%s: %v", obj, obj.GetNamespace(), obj.GetName(), err)
	}
}
