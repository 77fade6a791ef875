package main

// The kinds of call measured, all on one connection to the sidecar, and the pods and selectors
// they read.

import (
	"context"
	"fmt"
	"math/rand/v2"
	"sort"

	"google.golang.org/grpc/health/grpc_health_v1"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/client-go/kubernetes/scheme"
	"k8s.io/client-go/tools/clientcmd"
	"sigs.k8s.io/controller-runtime/pkg/cache"
	"sigs.k8s.io/controller-runtime/pkg/client"

	informerd "informerd.io/clients/go"
	"informerd.io/clients/go/crcache"
	"informerd.io/clients/go/informerdv1"
)

const (
	resourceName = "pods"
	// appSize is how many pods each listed selector matches.
	appSize = 5
)

// app is a label selector matching appSize pods of the namespace: a Deployment's selector.
type app struct {
	text   string            // for the plain client
	labels map[string]string // for client.MatchingLabels
}

type bench struct {
	ns       string
	sidecar  *sidecar
	ic       *informerd.Client
	health   grpc_health_v1.HealthClient
	ctrl     client.Client // controller-runtime's client, reading through crcache
	pods     []string      // names, in a fixed random order
	apps     []app         // in a fixed random order
	jsonSize float64       // average bytes of JSON per cached pod
}

// call is one kind of call: do makes call number i and returns how many objects it read.
type call struct {
	name, short string
	do          func(ctx context.Context, i int) (int, error)
}

// newBench connects (one connection for every call, crcache's included) and picks the pods
// and selectors the calls read.
func newBench(ctx context.Context, kubeconfig string, sc *sidecar, ns string) (*bench, error) {
	ic, err := informerd.Dial("unix://" + sc.Socket)
	if err != nil {
		return nil, err
	}
	b := &bench{ns: ns, sidecar: sc, ic: ic, health: grpc_health_v1.NewHealthClient(ic.Conn())}
	crc, err := crcache.New(crcache.Options{Client: ic}, cache.Options{Scheme: scheme.Scheme})
	if err != nil {
		return nil, err
	}
	cfg, err := clientcmd.BuildConfigFromFlags("", kubeconfig)
	if err != nil {
		return nil, err
	}
	// A manager's client: reads from its cache, writes to the API server.
	if b.ctrl, err = client.New(cfg, client.Options{Scheme: scheme.Scheme, Cache: &client.CacheOptions{Reader: crc}}); err != nil {
		return nil, err
	}
	if err := b.pickTargets(ctx); err != nil {
		return nil, err
	}
	return b, nil
}

func (b *bench) close() { _ = b.ic.Close() }

// pickTargets lists the namespace once: every pod is a Get target; the selectors are those of
// the ReplicaSets' pods (app.kubernetes.io/name and instance, a Deployment's selector) that
// match exactly appSize pods.
func (b *bench) pickTargets(ctx context.Context) error {
	res, err := informerd.ListAs[corev1.Pod](ctx, b.ic, resourceName, informerd.InNamespace(b.ns), informerd.WaitForSync())
	if err != nil {
		return fmt.Errorf("list the namespace %s from the sidecar: %w", b.ns, err)
	}
	var size int
	if _, _, err := b.ic.ListObjects(ctx, resourceName, func(o *informerdv1.Object) { size += len(o.GetJson()) },
		informerd.InNamespace(b.ns)); err != nil {
		return err
	}
	matches := map[string]int{}
	owned := map[string]map[string]string{}
	for _, p := range res.Items {
		b.pods = append(b.pods, p.Name)
		sel := map[string]string{
			"app.kubernetes.io/name":     p.Labels["app.kubernetes.io/name"],
			"app.kubernetes.io/instance": p.Labels["app.kubernetes.io/instance"],
		}
		key := "app.kubernetes.io/instance=" + sel["app.kubernetes.io/instance"] + ",app.kubernetes.io/name=" + sel["app.kubernetes.io/name"]
		matches[key]++
		if ref := metav1Controller(p); ref == "ReplicaSet" {
			owned[key] = sel
		}
	}
	for key, sel := range owned {
		if matches[key] == appSize {
			b.apps = append(b.apps, app{text: key, labels: sel})
		}
	}
	if len(b.pods) == 0 || len(b.apps) == 0 {
		return fmt.Errorf("the namespace %s holds %d pods and no Deployment of exactly %d pods: seed more pods (--pods)",
			b.ns, len(b.pods), appSize)
	}
	b.jsonSize = float64(size) / float64(len(res.Items))
	r := rand.New(rand.NewPCG(1, 2))
	sort.Strings(b.pods)
	sort.Slice(b.apps, func(i, j int) bool { return b.apps[i].text < b.apps[j].text })
	r.Shuffle(len(b.pods), func(i, j int) { b.pods[i], b.pods[j] = b.pods[j], b.pods[i] })
	r.Shuffle(len(b.apps), func(i, j int) { b.apps[i], b.apps[j] = b.apps[j], b.apps[i] })
	return nil
}

// metav1Controller is the kind of the pod's controlling owner, "" without one.
func metav1Controller(p *corev1.Pod) string {
	for _, ref := range p.OwnerReferences {
		if ref.Controller != nil && *ref.Controller {
			return ref.Kind
		}
	}
	return ""
}

func (b *bench) pod(i int) string { return b.pods[i%len(b.pods)] }
func (b *bench) app(i int) app    { return b.apps[i%len(b.apps)] }

// calls are the kinds measured, in the report's order. Each checks what it read, so that a
// figure is never that of a call that read nothing.
func (b *bench) calls() []call {
	one := func(name, got string) (int, error) {
		if got != name {
			return 0, fmt.Errorf("asked for the pod %s, got %q", name, got)
		}
		return 1, nil
	}
	five := func(sel string, n int) (int, error) {
		if n != appSize {
			return 0, fmt.Errorf("the selector %s matched %d pods, want %d", sel, n, appSize)
		}
		return n, nil
	}
	return []call{
		{"empty: grpc.health.v1.Health/Check", "empty", func(ctx context.Context, _ int) (int, error) {
			_, err := b.health.Check(ctx, &grpc_health_v1.HealthCheckRequest{})
			return 0, err
		}},
		{"informerd `GetObject` (raw JSON)", "GetObject", func(ctx context.Context, i int) (int, error) {
			resp, err := b.ic.GetObject(ctx, resourceName, b.ns, b.pod(i))
			if err != nil {
				return 0, err
			}
			return one(b.pod(i), resp.GetObject().GetName())
		}},
		{"informerd `Get` (unstructured)", "Get", func(ctx context.Context, i int) (int, error) {
			u, err := b.ic.Get(ctx, resourceName, b.ns, b.pod(i))
			if err != nil {
				return 0, err
			}
			return one(b.pod(i), u.GetName())
		}},
		{"informerd `GetAs[corev1.Pod]`", "GetAs", func(ctx context.Context, i int) (int, error) {
			p, err := informerd.GetAs[corev1.Pod](ctx, b.ic, resourceName, b.ns, b.pod(i))
			if err != nil {
				return 0, err
			}
			return one(b.pod(i), p.Name)
		}},
		{"informerd `ListObjects` by label selector (raw JSON)", "ListObjects", func(ctx context.Context, i int) (int, error) {
			n := 0
			_, _, err := b.ic.ListObjects(ctx, resourceName, func(*informerdv1.Object) { n++ },
				informerd.InNamespace(b.ns), informerd.WithLabelSelector(b.app(i).text))
			if err != nil {
				return 0, err
			}
			return five(b.app(i).text, n)
		}},
		{"informerd `ListAs[corev1.Pod]` by label selector", "ListAs", func(ctx context.Context, i int) (int, error) {
			res, err := informerd.ListAs[corev1.Pod](ctx, b.ic, resourceName,
				informerd.InNamespace(b.ns), informerd.WithLabelSelector(b.app(i).text))
			if err != nil {
				return 0, err
			}
			return five(b.app(i).text, len(res.Items))
		}},
		{"crcache `client.Get` of a `*corev1.Pod`", "crcache Get", func(ctx context.Context, i int) (int, error) {
			var p corev1.Pod
			if err := b.ctrl.Get(ctx, client.ObjectKey{Namespace: b.ns, Name: b.pod(i)}, &p); err != nil {
				return 0, err
			}
			return one(b.pod(i), p.Name)
		}},
		{"crcache `client.List` of a `*corev1.PodList`, `MatchingLabels`", "crcache List", func(ctx context.Context, i int) (int, error) {
			var l corev1.PodList
			if err := b.ctrl.List(ctx, &l, client.InNamespace(b.ns), client.MatchingLabels(b.app(i).labels)); err != nil {
				return 0, err
			}
			return five(b.app(i).text, len(l.Items))
		}},
	}
}
