package main

// deploy/node/example-agent on real nodes, as the node-mode tests run it against whichever
// informerd serves the nodes' socket directory (deploy/node's DaemonSet or the Helm chart's):
// the agents applied with only their image set, informerd ready on every node, and what each
// agent reports reading through its node's socket.

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"regexp"
	"strconv"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// The agent's image, as the Makefile names it (NODE_AGENT_IMAGE), imported into the nodes.
const agentImage, agentTag = "informerd-node-agent", "0.1.0"

// An agent's line: 1 node, 2 pods listed, 3 of them on another node, 4 the Informer's view,
// 5 its epoch, 6 its relists; or 7 the reason and 8 the code of an error.
var agentLine = regexp.MustCompile(`agent node=(\S+) (?:pods=(\d+) foreign=(\d+) informer=(\d+) epoch=(\d+) relists=(\d+)|error=(\S*) code=(\S+))`)

// agentReport is the last line an agent pod printed.
func (r *realNode) agentReport(ns, pod string) []string {
	out, err := r.run(nil, "kubectl", "logs", "-n", ns, pod, "--tail=1")
	if err != nil {
		return nil
	}
	return agentLine.FindStringSubmatch(out)
}

// agentSeesItsNode waits for a report of the agent in which its List and its Informer's view
// both hold exactly the pods the apiserver has on its node, none of another node, and which
// also satisfies more; it returns that report.
func (r *realNode) agentSeesItsNode(a *corev1.Pod, more func([]string) bool) []string {
	r.t.Helper()
	var got []string
	r.eventually("agent on "+a.Spec.NodeName+" holds its node's pods", func() (bool, string) {
		m := r.agentReport(a.Namespace, a.Name)
		if m == nil {
			return false, "no report yet"
		}
		if m[1] != a.Spec.NodeName || m[8] != "" {
			return false, m[0]
		}
		onNode, err := r.cs.CoreV1().Pods("").List(context.Background(), metav1.ListOptions{FieldSelector: "spec.nodeName=" + a.Spec.NodeName})
		if err != nil {
			return false, err.Error()
		}
		n, _ := strconv.Atoi(m[2])
		k, _ := strconv.Atoi(m[4])
		if n != len(onNode.Items) || k != n || n == 0 || m[3] != "0" || !more(m) {
			return false, fmt.Sprintf("%s; the apiserver has %d pods on the node", m[0], len(onNode.Items))
		}
		got = m
		return true, ""
	})
	return got
}

// applyExampleAgent applies deploy/node/example-agent with an overlay that sets only its image
// (the agent imported into the nodes); its namespace, informerd-agent, is deleted when the
// test ends.
func (r *realNode) applyExampleAgent() {
	r.t.Helper()
	overlay := r.t.TempDir()
	base, err := filepath.Rel(overlay, filepath.Join(r.root, "deploy/node/example-agent"))
	if err != nil {
		r.t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(overlay, "kustomization.yaml"), []byte(fmt.Sprintf(`apiVersion: kustomize.config.k8s.io/v1beta1
kind: Kustomization
resources:
- %s
images:
- name: agent
  newName: %s
  newTag: %s
`, base, agentImage, agentTag)), 0o644); err != nil {
		r.t.Fatal(err)
	}
	r.apply(overlay)
	r.t.Cleanup(func() { _, _ = r.run(nil, "kubectl", "delete", "namespace", "informerd-agent", "--wait=false") })
}

// readyOnEveryNode waits for exactly one pod of selector in ns on each of the nodes, its
// informerd container ready.
func (r *realNode) readyOnEveryNode(ns, selector string, nodes int) {
	r.t.Helper()
	r.eventually("an informerd ready on every node", func() (bool, string) {
		l, err := r.cs.CoreV1().Pods(ns).List(context.Background(), metav1.ListOptions{LabelSelector: selector})
		if err != nil {
			return false, err.Error()
		}
		on := map[string]bool{}
		for _, p := range l.Items {
			if s := status(&p, "informerd"); s != nil && s.Ready {
				on[p.Spec.NodeName] = true
			}
		}
		return len(on) == nodes && len(l.Items) == nodes, fmt.Sprintf("%d pods, ready on %v", len(l.Items), on)
	})
}

// agentOnEveryNode waits for the example agent's DaemonSet to have a pod bound to each node and
// returns them.
//
// Decision: bound, not only created. The DaemonSet controller creates a pod with a node
// affinity and the scheduler binds it a moment later; a pod listed in between has no
// spec.nodeName, and agentSeesItsNode, which compares the agent's report with it, waited its
// three minutes on a report that was right (a CI run of TestHelmChartNodeModeServesEachNodeItsOwnPods:
// "agent on  holds its node's pods", last report "node=informerd-node-1 pods=2 informer=2").
func (r *realNode) agentOnEveryNode(nodes int) *corev1.PodList {
	r.t.Helper()
	var agents *corev1.PodList
	r.eventually("an agent bound to every node", func() (bool, string) {
		var err error
		agents, err = r.cs.CoreV1().Pods("informerd-agent").List(context.Background(), metav1.ListOptions{LabelSelector: "app.kubernetes.io/name=agent"})
		if err != nil {
			return false, err.Error()
		}
		bound := map[string]bool{}
		for _, a := range agents.Items {
			if a.Spec.NodeName != "" {
				bound[a.Spec.NodeName] = true
			}
		}
		return len(agents.Items) == nodes && len(bound) == nodes, fmt.Sprintf("%d agents, bound to %v", len(agents.Items), bound)
	})
	return agents
}
