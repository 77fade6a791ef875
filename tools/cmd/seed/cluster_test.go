package main

// Tests against a real API server: the kubeconfig in INFORMERD_KUBECONFIG (make test sets it
// to its own control plane). Without it they are skipped, so that `go test ./...` works on a
// machine without a cluster.

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

func clusterFlags(t *testing.T, prefix string) []string {
	t.Helper()
	kc := os.Getenv("INFORMERD_KUBECONFIG")
	if kc == "" {
		t.Skip("INFORMERD_KUBECONFIG is not set: no API server to test against")
	}
	return []string{"--kubeconfig", kc, "--prefix", prefix}
}

// clusterTest is the set-up of a test against the API server: its namespaces' prefix (`name`
// and the process id), the seeder's flags for it, and a context of 5 minutes; the namespaces
// are cleaned when the test ends.
func clusterTest(t *testing.T, name string) (string, []string, context.Context) {
	t.Helper()
	prefix := fmt.Sprintf("%s-%d", name, os.Getpid())
	flags := clusterFlags(t, prefix)
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	t.Cleanup(cancel)
	t.Cleanup(func() {
		if err := runClean(context.Background(), append(flags, "--wait", "0")); err != nil {
			t.Logf("cleaning %s-*: %v", prefix, err)
		}
	})
	return prefix, flags, ctx
}

// Topping up after churn: `seed pods` run again over namespaces in which churn recreated a
// StatefulSet pod under its name with a new IP must bring the pod back to its planned status,
// with one pod IP.
func TestPodsAgainAfterChurnRecreatedAPod(t *testing.T) {
	prefix, flags, ctx := clusterTest(t, "seedtest")
	seedArgs := append(flags, "--pods", "40", "--namespaces", "1")
	if err := runPods(ctx, seedArgs); err != nil {
		t.Fatalf("seed pods: %v", err)
	}

	// What churn does to a StatefulSet pod: delete it, and create it again under its name,
	// with a new IP.
	common := commonFlags{kubeconfig: flags[1], prefix: prefix, connections: 1, timeout: time.Minute}
	clients, _, err := newClients(&common)
	if err != nil {
		t.Fatal(err)
	}
	c := clients[0]
	ns := prefix + "-0"
	pod := statefulSetPod(ctx, t, c.CoreV1().Pods(ns))
	ch := &churner{clients: clients, nodes: 20, rng: newRand(7, 0xc4a2), names: map[string]bool{}, ips: map[string]bool{pod.Status.PodIP: true}}
	if err := c.CoreV1().Pods(ns).Delete(ctx, pod.Name, metav1.DeleteOptions{GracePeriodSeconds: ptr(int64(0))}); err != nil {
		t.Fatal(err)
	}
	ch.deleted = append(ch.deleted, pod)
	if err := ch.create(ctx, c); err != nil {
		t.Fatalf("recreating %s as churn does: %v", pod.Name, err)
	}
	churned, err := c.CoreV1().Pods(ns).Get(ctx, pod.Name, metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if churned.Status.PodIP == pod.Status.PodIP {
		t.Fatalf("churn kept the IP %s: the test does not exercise a changed IP", pod.Status.PodIP)
	}

	if err := runPods(ctx, seedArgs); err != nil {
		t.Fatalf("seed pods after churn: %v", err)
	}
	got, err := c.CoreV1().Pods(ns).Get(ctx, pod.Name, metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if len(got.Status.PodIPs) != 1 || got.Status.PodIPs[0].IP != got.Status.PodIP || got.Status.PodIP != pod.Status.PodIP {
		t.Errorf("after topping up, pod %s has podIP %s and podIPs %v; want the planned %s, once",
			pod.Name, got.Status.PodIP, got.Status.PodIPs, pod.Status.PodIP)
	}
}

// statefulSetPod returns a pod of the namespace owned by a StatefulSet: churn recreates those
// under their own name.
func statefulSetPod(ctx context.Context, t *testing.T, pods interface {
	List(context.Context, metav1.ListOptions) (*corev1.PodList, error)
}) *corev1.Pod {
	t.Helper()
	list, err := pods.List(ctx, metav1.ListOptions{})
	if err != nil {
		t.Fatal(err)
	}
	for i := range list.Items {
		for _, ref := range list.Items[i].OwnerReferences {
			if ref.Kind == "StatefulSet" {
				return &list.Items[i]
			}
		}
	}
	t.Fatalf("no StatefulSet pod among the %d seeded pods", len(list.Items))
	return nil
}

// `seed pods --etcd`: the API server serves the pods written into its etcd as it serves those
// it wrote, each with a resourceVersion of its own. Only the bare pods are checked by name: the
// test control plane runs the garbage collector, which deletes pods whose owners are absent
// (this mode writes none; see etcd.go).
func TestPodsWrittenToEtcdAreServedByTheAPIServer(t *testing.T) {
	prefix, flags, ctx := clusterTest(t, "seedetcd")
	endpoint := etcdBeside(t, flags[1])
	if err := runPods(ctx, append(flags, "--pods", "300", "--namespaces", "1", "--etcd", endpoint)); err != nil {
		t.Fatalf("seed pods --etcd: %v", err)
	}
	common := commonFlags{kubeconfig: flags[1], prefix: prefix, connections: 1, timeout: time.Minute}
	clients, _, err := newClients(&common)
	if err != nil {
		t.Fatal(err)
	}
	list, err := clients[0].CoreV1().Pods(prefix+"-0").List(ctx, metav1.ListOptions{})
	if err != nil {
		t.Fatal(err)
	}
	versions := map[string]string{}
	bare := map[string]*corev1.Pod{}
	for i := range list.Items {
		p := &list.Items[i]
		if other, ok := versions[p.ResourceVersion]; ok {
			t.Errorf("pods %s and %s share resourceVersion %s", other, p.Name, p.ResourceVersion)
		}
		versions[p.ResourceVersion] = p.Name
		if len(p.OwnerReferences) == 0 {
			bare[p.Name] = p
		}
	}
	plan := newPlan(1, prefix, 300, 1, 20, time.Now())
	planned := 0
	for _, o := range plan.Owners {
		if o.Kind != kindBare {
			continue
		}
		for _, s := range o.Pods {
			planned++
			p, ok := bare[s.Name]
			if !ok {
				t.Errorf("bare pod %s was written but is not served", s.Name)
				continue
			}
			if p.UID == "" || p.Status.PodIP == "" || p.Status.QOSClass == "" || len(p.ManagedFields) != 2 || len(p.Spec.Containers) == 0 {
				t.Errorf("pod %s is not served whole: %+v", s.Name, p)
			}
		}
	}
	if planned == 0 {
		t.Fatal("the plan of 300 pods has no bare pod: the test checks nothing by name")
	}
}

// etcdBeside is the client URL of the etcd of the control plane whose kubeconfig is given
// (`cluster up` keeps its state.json beside it): from the etcd process's command line.
func etcdBeside(t *testing.T, kubeconfig string) string {
	t.Helper()
	raw, err := os.ReadFile(filepath.Join(filepath.Dir(kubeconfig), "state.json"))
	if err != nil {
		t.Skipf("no state.json beside %s (not a control plane `cluster up` started): %v", kubeconfig, err)
	}
	var st struct {
		Processes []struct {
			Name string `json:"name"`
			Pid  int    `json:"pid"`
		} `json:"processes"`
	}
	if err := json.Unmarshal(raw, &st); err != nil {
		t.Fatal(err)
	}
	for _, p := range st.Processes {
		if p.Name != "etcd" {
			continue
		}
		cmdline, err := os.ReadFile(fmt.Sprintf("/proc/%d/cmdline", p.Pid))
		if err != nil {
			t.Fatalf("etcd process %d: %v", p.Pid, err)
		}
		args := strings.Split(string(cmdline), "\x00")
		for i, a := range args {
			if a == "--listen-client-url" && i+1 < len(args) {
				return args[i+1]
			}
		}
		t.Fatalf("no --listen-client-url in etcd's command line %q", args)
	}
	t.Fatalf("no etcd in %s", filepath.Join(filepath.Dir(kubeconfig), "state.json"))
	return ""
}
