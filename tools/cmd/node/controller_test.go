package main

// What every real-node test of a controller with informerd beside it checks, whichever way the
// sidecar got into the pod (deploy/example's manifests, the injection webhook, the Helm chart):
// pods for informerd to cache, the controller's pod with informerd started and ready on a real
// node, and the demo controller's report that its Informer's view equals informerd's list.

import (
	"context"
	"fmt"
	"strconv"
	"strings"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// cachedPods creates the namespaces PREFIX-0 .. PREFIX-(namespaces-1) with perNamespace pods
// each, for informerd to cache, deleted when the test ends; it returns how many pods it made.
// The pods are bound to a node that does not exist, so that no kubelet runs them and nothing
// deletes them (the control plane has no pod garbage collector).
func (r *realNode) cachedPods(prefix string, namespaces, perNamespace int) int {
	r.t.Helper()
	ctx := context.Background()
	made := 0
	for i := 0; i < namespaces; i++ {
		ns := fmt.Sprintf("%s-%d", prefix, i)
		if _, err := r.cs.CoreV1().Namespaces().Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: ns}}, metav1.CreateOptions{}); err != nil {
			r.t.Fatal(err)
		}
		r.t.Cleanup(func() { _, _ = r.run(nil, "kubectl", "delete", "namespace", ns, "--wait=false") })
		for j := 0; j < perNamespace; j++ {
			p := &corev1.Pod{
				ObjectMeta: metav1.ObjectMeta{Name: fmt.Sprintf("cached-%d", j)},
				Spec:       corev1.PodSpec{NodeName: "elsewhere", Containers: []corev1.Container{{Name: "c", Image: "none"}}},
			}
			if _, err := r.cs.CoreV1().Pods(ns).Create(ctx, p, metav1.CreateOptions{}); err != nil {
				r.t.Fatal(err)
			}
			made++
		}
	}
	return made
}

// sidecarReady waits for the one pod of selector in ns to have its informerd container started
// and ready by the kubelet's probes, and checks that the pod runs on a real node's pod network.
func (r *realNode) sidecarReady(ns, selector string, since time.Time) *corev1.Pod {
	r.t.Helper()
	var pod *corev1.Pod
	r.eventually("informerd started and ready by the kubelet's probes", func() (bool, string) {
		pod = r.onePod(ns, selector)
		s := status(pod, "informerd")
		if s == nil {
			return false, fmt.Sprintf("no informerd status yet: %s", pod.Status.Phase)
		}
		return s.Started != nil && *s.Started && s.Ready, fmt.Sprintf("informerd %+v", s.State)
	})
	r.t.Logf("pod %s on %s: informerd started and ready %s after the apply", pod.Name, pod.Spec.NodeName, time.Since(since).Round(time.Second))
	if pod.Spec.NodeName == "" || !strings.HasPrefix(pod.Status.PodIP, "10.244.") {
		r.t.Fatalf("pod %s: node %q, IP %q: not on a real node's pod network", pod.Name, pod.Spec.NodeName, pod.Status.PodIP)
	}
	return pod
}

// controllerReport waits for the demo controller of pod (its container `controller`) to
// report its Informer's view equal to informerd's list, and returns the number of pods in it.
// The demo exits after each run and its Deployment restarts it: a run's output is in the
// current container's log or the previous one's.
func (r *realNode) controllerReport(pod *corev1.Pod) int {
	r.t.Helper()
	var got int
	r.eventually("the controller's report", func() (bool, string) {
		for _, prev := range []string{"--previous=false", "--previous=true"} {
			out, err := r.run(nil, "kubectl", "logs", "-n", pod.Namespace, pod.Name, "-c", "controller", prev)
			if err != nil {
				continue
			}
			if m := viewEquals.FindStringSubmatch(out); m != nil {
				got, _ = strconv.Atoi(m[1])
				return true, ""
			}
		}
		return false, "no report in the controller's logs"
	})
	return got
}

// namespacesGone waits until none of the namespaces exists any more: their pods have stopped
// on their nodes (the namespace controller removes a namespace once its pods are gone).
func (r *realNode) namespacesGone(names ...string) {
	r.t.Helper()
	r.eventually("namespaces "+strings.Join(names, ", ")+" gone", func() (bool, string) {
		for _, ns := range names {
			_, err := r.cs.CoreV1().Namespaces().Get(context.Background(), ns, metav1.GetOptions{})
			if !apierrors.IsNotFound(err) {
				return false, fmt.Sprintf("%s: %v (still there)", ns, err)
			}
		}
		return true, ""
	})
}
