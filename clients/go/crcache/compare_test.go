package crcache_test

// The same controller, written as controller-runtime's documentation teaches, run twice at once
// over the same churn: once with the default cache, once with the informerd cache, each in a
// namespace (and on nodes) of its own. Both must end with the same objects in the API server,
// and the informerd run must never read a pod older than its own last write of it.

import (
	"context"
	"fmt"
	"maps"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/go-logr/logr"
	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/kubernetes/scheme"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/cache"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/log"
	metricsserver "sigs.k8s.io/controller-runtime/pkg/metrics/server"

	"informerd.io/clients/go/crcache"
	"informerd.io/clients/go/crcache/internal/labelctl"
)

// startManager runs a manager, set up by setup, until the test ends.
func startManager(t *testing.T, e *env, opts ctrl.Options, setup func(ctrl.Manager) error) {
	t.Helper()
	opts.Scheme = scheme.Scheme
	opts.Metrics = metricsserver.Options{BindAddress: "0"}
	opts.HealthProbeBindAddress = "0"
	mgr, err := ctrl.NewManager(e.Config, opts)
	if err != nil {
		t.Fatal(err)
	}
	if err := setup(mgr); err != nil {
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
}

// startController runs the label controller in a manager until the test ends.
func startController(t *testing.T, e *env, name string, opts ctrl.Options) *labelctl.Reconciler {
	t.Helper()
	var r *labelctl.Reconciler
	startManager(t, e, opts, func(mgr ctrl.Manager) error {
		var err error
		r, err = labelctl.Setup(context.Background(), mgr, name)
		return err
	})
	return r
}

// churnTarget is one run's namespace and nodes.
type churnTarget struct {
	ns    string
	nodes []string
	owner map[string]*appsv1.Deployment
	// views: both managers set DefaultNamespaces and a ByObject label selector on pods, which
	// only the pods labelled tracked=yes match; the others stay as created.
	views bool
}

// trackedLabel is what the ByObject label selector of the views run selects.
const trackedLabel = "tracked"

func TestControllerBothCaches(t *testing.T) { compareControllers(t, false) }

// TestControllerBothCachesWithViews: the same, both managers with the cache options a
// multi-namespace operator that caches only its labelled pods sets.
func TestControllerBothCachesWithViews(t *testing.T) { compareControllers(t, true) }

// viewOptions are the cache options of the views run, for the target's namespace.
func viewOptions(tg *churnTarget) cache.Options {
	return cache.Options{
		DefaultNamespaces: map[string]cache.Config{tg.ns: {}},
		ByObject: map[client.Object]cache.ByObject{
			&corev1.Pod{}: {Label: labels.SelectorFromSet(labels.Set{trackedLabel: "yes"})},
		},
	}
}

func compareControllers(t *testing.T, views bool) {
	log.SetLogger(logr.Discard())
	e := setup(t)
	run := randSuffix()
	targets := map[string]*churnTarget{}
	for _, which := range []string{"default", "informerd"} {
		tg := &churnTarget{ns: e.Namespace(t, "cmp"+which[:1]), owner: map[string]*appsv1.Deployment{}, views: views}
		for i := range 3 {
			n := &corev1.Node{ObjectMeta: metav1.ObjectMeta{
				Name:   fmt.Sprintf("icr-%s-%s-n%d", run, which[:1], i),
				Labels: map[string]string{"informerd.io/run": run, "zone": "z0"},
			}}
			e.create(t, n)
			t.Cleanup(func() { _ = e.kube.Delete(context.Background(), n) })
			tg.nodes = append(tg.nodes, n.Name)
		}
		targets[which] = tg
	}
	s := e.StartSidecar(t, func(sock string) string {
		return config(sock, targets["informerd"].ns) + fmt.Sprintf(`- name: nodes
  apiVersion: v1
  kind: Node
  labelSelector: informerd.io/run=%s
  transform:
    drop: [metadata.managedFields]
`, run)
	})

	defaultOpts := ctrl.Options{Cache: cache.Options{DefaultNamespaces: map[string]cache.Config{targets["default"].ns: {}}}}
	informerdOpts := ctrl.Options{NewCache: crcache.NewCacheFunc(crcache.Options{Target: "unix://" + s.Socket})}
	if views {
		defaultOpts.Cache = viewOptions(targets["default"])
		informerdOpts.Cache = viewOptions(targets["informerd"])
	}
	suffix := "" // controller names are unique in a process
	if views {
		suffix = "-views"
	}
	viaDefault := startController(t, e, "label-default"+suffix, defaultOpts)
	viaInformerd := startController(t, e, "label-informerd"+suffix, informerdOpts)

	// The churn, applied to both targets step by step.
	each := func(f func(tg *churnTarget)) {
		for _, which := range []string{"default", "informerd"} {
			f(targets[which])
		}
	}
	ctx := context.Background()
	for d := range 4 {
		each(func(tg *churnTarget) {
			name := fmt.Sprintf("d%d", d)
			dep := deployment(tg.ns, name, map[string]string{"app": name})
			dep.Labels["team"] = "t0"
			e.create(t, dep)
			tg.owner[name] = dep
			for i := range 3 {
				e.create(t, ownedPod(tg, dep, fmt.Sprintf("%s-p%d", name, i), i))
			}
		})
	}
	for round := 1; round <= 6; round++ {
		each(func(tg *churnTarget) {
			dep := tg.owner[fmt.Sprintf("d%d", round%4)]
			setLabel(t, e, dep, "team", fmt.Sprintf("t%d", round))
			setLabel(t, e, &corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: tg.nodes[round%3]}}, "zone", fmt.Sprintf("z%d", round))
			e.create(t, ownedPod(tg, dep, fmt.Sprintf("%s-r%d", dep.Name, round), round))
			if round == 3 {
				gone := &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Namespace: tg.ns, Name: "d1-p0"}}
				if err := e.kube.Delete(ctx, gone, client.GracePeriodSeconds(0)); err != nil {
					t.Fatal(err)
				}
			}
			if round == 5 {
				// The garbage collector deletes its pods (owner references).
				if err := e.kube.Delete(ctx, tg.owner["d3"], client.PropagationPolicy(metav1.DeletePropagationBackground)); err != nil {
					t.Fatal(err)
				}
			}
		})
		time.Sleep(100 * time.Millisecond)
	}

	states := map[string]map[string]string{}
	for _, which := range []string{"default", "informerd"} {
		tg := targets[which]
		eventually(t, which+" run converged", func() string {
			state, pending := e.podState(t, tg)
			states[which] = state
			return pending
		})
	}
	if d := diffStates(states["default"], states["informerd"]); d != "" {
		t.Errorf("the two runs end with different pods (name: team zone node):\n%s", d)
	}
	inf, def := viaInformerd.Stats(), viaDefault.Stats()
	if len(inf.StaleReads) > 0 {
		t.Errorf("the informerd run read pods older than its own writes:\n%s", strings.Join(inf.StaleReads, "\n"))
	}
	if inf.Writes == 0 {
		t.Errorf("the informerd run wrote nothing")
	}
	if inf.Reads == 0 {
		t.Errorf("the informerd run never read back a pod it wrote: the check above checked nothing")
	}
	t.Logf("default cache: %d writes; of %d reads of pods it wrote, %d listed and %d got older than its write (the default cache cannot wait)",
		def.Writes, def.Reads, def.StaleLists, len(def.StaleReads))
	t.Logf("informerd cache: %d writes; of %d reads of pods it wrote, %d listed older than its write, none got older",
		inf.Writes, inf.Reads, inf.StaleLists)
}

// ownedPod is a pod of the Deployment, controlled by it, on node i of the target.
func ownedPod(tg *churnTarget, d *appsv1.Deployment, name string, i int) *corev1.Pod {
	p := pod(tg.ns, name, tg.nodes[i%len(tg.nodes)], maps.Clone(d.Spec.Selector.MatchLabels))
	if tg.views && i%3 != 2 {
		p.Labels[trackedLabel] = "yes"
	}
	p.OwnerReferences = []metav1.OwnerReference{*metav1.NewControllerRef(d, appsv1.SchemeGroupVersion.WithKind("Deployment"))}
	return p
}

// setLabel merge-patches one label of an object.
func setLabel(t *testing.T, e *env, obj client.Object, key, value string) {
	t.Helper()
	patch := client.RawPatch(types.MergePatchType, fmt.Appendf(nil, `{"metadata":{"labels":{%q:%q}}}`, key, value))
	if err := e.kube.Patch(context.Background(), obj, patch); err != nil {
		t.Fatalf("label %s %s=%s: %v", obj.GetName(), key, value, err)
	}
}

// podState reads the target's pods from the API server as "name" -> "team zone node" (the node
// without its run prefix), and says what is still pending: pods whose labels are not their
// Deployment's team and their node's zone, pods of a deleted Deployment.
func (e *env) podState(t *testing.T, tg *churnTarget) (map[string]string, string) {
	t.Helper()
	ctx := context.Background()
	var pods corev1.PodList
	var deps appsv1.DeploymentList
	var nodes corev1.NodeList
	for _, l := range []struct {
		list client.ObjectList
		opts []client.ListOption
	}{{&pods, []client.ListOption{client.InNamespace(tg.ns)}}, {&deps, []client.ListOption{client.InNamespace(tg.ns)}}, {&nodes, nil}} {
		if err := e.kube.List(ctx, l.list, l.opts...); err != nil {
			t.Fatal(err)
		}
	}
	team := map[types.UID]string{}
	for _, d := range deps.Items {
		team[d.UID] = d.Labels["team"]
	}
	zone := map[string]string{}
	for _, n := range nodes.Items {
		zone[n.Name] = n.Labels["zone"]
	}
	state := map[string]string{}
	var pending []string
	for _, p := range pods.Items {
		ref := metav1.GetControllerOf(&p)
		want, live := team[ref.UID]
		switch {
		case tg.views && p.Labels[trackedLabel] != "yes":
			// Outside both managers' view: never labelled, and left by a deleted Deployment's
			// garbage collection only.
			if p.Labels["team"] != "" || p.Labels["zone"] != "" {
				pending = append(pending, fmt.Sprintf("%s: untracked, but labelled team %q zone %q", p.Name, p.Labels["team"], p.Labels["zone"]))
			}
			if !live {
				pending = append(pending, p.Name+": its Deployment is deleted")
			}
		case !live:
			pending = append(pending, p.Name+": its Deployment is deleted")
		case p.Labels["team"] != want || p.Labels["zone"] != zone[p.Spec.NodeName]:
			pending = append(pending, fmt.Sprintf("%s: team %q zone %q, want %q %q", p.Name, p.Labels["team"], p.Labels["zone"], want, zone[p.Spec.NodeName]))
		}
		node := p.Spec.NodeName[strings.LastIndex(p.Spec.NodeName, "-")+1:]
		state[p.Name] = fmt.Sprintf("%s %s %s", p.Labels["team"], p.Labels["zone"], node)
	}
	slices.Sort(pending)
	return state, strings.Join(pending, "\n")
}

func diffStates(a, b map[string]string) string {
	var lines []string
	for k, v := range a {
		if b[k] != v {
			lines = append(lines, fmt.Sprintf("%s: default [%s], informerd [%s]", k, v, b[k]))
		}
	}
	for k, v := range b {
		if _, ok := a[k]; !ok {
			lines = append(lines, fmt.Sprintf("%s: only in the informerd run [%s]", k, v))
		}
	}
	slices.Sort(lines)
	return strings.Join(lines, "\n")
}
