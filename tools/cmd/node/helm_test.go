package main

// deploy/helm/informerd installed for real with the helm the Makefile builds: in node mode its
// DaemonSet serves each node's agents their node's pods, as deploy/node does; in sidecar mode,
// included in a controller's own chart exactly as the chart's README shows, it serves the demo
// controller beside it. tests/helm renders the same and has the apiserver dry-run it; these
// run it on kubelets.

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

const chartDir = "deploy/helm/informerd"

// helm runs .cache/bin/helm with its cache and configuration in the repository's
// .cache/helm-home, as tests/helm does, and returns its output.
func (r *realNode) helm(args ...string) string {
	r.t.Helper()
	out, err := r.tryHelm(args...)
	if err != nil {
		r.t.Fatal(err)
	}
	return out
}

func (r *realNode) tryHelm(args ...string) (string, error) {
	home := filepath.Join(r.root, ".cache/helm-home")
	return r.runEnv([]string{
		"HELM_CACHE_HOME=" + filepath.Join(home, "cache"),
		"HELM_CONFIG_HOME=" + filepath.Join(home, "config"),
		"HELM_DATA_HOME=" + filepath.Join(home, "data"),
	}, nil, "helm", args...)
}

// helmInstall installs chart as release in a new namespace ns (with labels), uninstalled and
// deleted when the test ends.
func (r *realNode) helmInstall(release, chart, ns string, labels map[string]string, args ...string) {
	r.t.Helper()
	if _, err := r.cs.CoreV1().Namespaces().Create(context.Background(), &corev1.Namespace{
		ObjectMeta: metav1.ObjectMeta{Name: ns, Labels: labels},
	}, metav1.CreateOptions{}); err != nil {
		r.t.Fatal(err)
	}
	r.t.Cleanup(func() { _, _ = r.run(nil, "kubectl", "delete", "namespace", ns, "--wait=false") })
	r.t.Logf("%s", r.helm(append([]string{"install", release, chart, "--namespace", ns}, args...)...))
	r.t.Cleanup(func() {
		if _, err := r.tryHelm("uninstall", release, "--namespace", ns); err != nil {
			r.t.Error(err)
		}
	})
}

// TestHelmChartNodeModeServesEachNodeItsOwnPods: `helm install --set mode=node` as the chart's
// README gives it, on two nodes: the DaemonSet's informerd is ready on each node, and
// deploy/node's example agent on each node reads, with its projected token, exactly the pods
// the apiserver has on its node through the socket the chart's informerd serves.
func TestHelmChartNodeModeServesEachNodeItsOwnPods(t *testing.T) {
	r := needNodes(t)
	nodes, err := r.cs.CoreV1().Nodes().List(context.Background(), metav1.ListOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if len(nodes.Items) < 2 {
		t.Fatalf("%d nodes: the test needs two", len(nodes.Items))
	}
	// Decision: the chart serves the socket in the nodes' /var/run/informerd, as deploy/node
	// does, and the agent is deploy/node's, in its namespace. So this test starts once
	// TestDeployNodeServesEachNodeItsOwnPods's pods are gone and ends once its own are, rather
	// than either test's agents reading the other's informerd.
	r.namespacesGone("informerd-node", "informerd-agent")
	const ns, release = "informerd-helm-node", "informerd-helm"
	t.Cleanup(func() { r.namespacesGone(ns, "informerd-agent") })
	r.helmInstall(release, chartDir, ns, map[string]string{"pod-security.kubernetes.io/enforce": "privileged"},
		"--set", "mode=node")
	r.readyOnEveryNode(ns, "app.kubernetes.io/instance="+release, len(nodes.Items))
	r.applyExampleAgent()
	for _, a := range r.agentOnEveryNode(len(nodes.Items)).Items {
		m := r.agentSeesItsNode(&a, func([]string) bool { return true })
		t.Logf("%s: %s", a.Name, m[0])
	}
}

// readmeDeployment is the Deployment template the chart's README shows a controller's chart
// writing (tests/helm renders the same block).
func (r *realNode) readmeDeployment() string {
	r.t.Helper()
	b, err := os.ReadFile(filepath.Join(r.root, chartDir, "README.md"))
	if err != nil {
		r.t.Fatal(err)
	}
	const open = "```yaml\n# templates/deployment.yaml"
	_, block, ok := strings.Cut(string(b), open)
	block, _, closed := strings.Cut(block, "```")
	if !ok || !closed {
		r.t.Fatalf("%s/README.md shows no controller chart's templates/deployment.yaml in a yaml block", chartDir)
	}
	return "# templates/deployment.yaml" + block
}

// TestHelmChartSidecarInAControllersChartServesIt: a controller's chart that depends on the
// informerd chart and includes the sidecar in its Deployment with the README's template,
// installed with the demo controller as its image. The demo is given no arguments: it reads
// the socket from the INFORMERD_SOCKET the chart's env template sets, and the pods of its
// default namespaces, demo-0 to demo-4, which the values list under informerd.config.
func TestHelmChartSidecarInAControllersChartServesIt(t *testing.T) {
	r := needNodes(t)
	want := r.cachedPods("demo", 5, 4)
	chart := t.TempDir()
	write := func(name, content string) {
		path := filepath.Join(chart, name)
		if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(path, []byte(content), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	write("Chart.yaml", fmt.Sprintf(`apiVersion: v2
name: controller
version: 0.1.0
dependencies:
- name: informerd
  version: 0.1.0
  repository: file://%s
`, filepath.Join(r.root, chartDir)))
	// The demo looks pods up by the index `node`, as deploy/sidecar/informerd.yaml has it.
	write("values.yaml", fmt.Sprintf(`image: %s
informerd:
  config:
    resources:
    - name: pods
      apiVersion: v1
      kind: Pod
      namespaces: [demo-0, demo-1, demo-2, demo-3, demo-4]
      indexes:
      - {name: node, path: spec.nodeName}
`, demoImage))
	write("templates/deployment.yaml", r.readmeDeployment())
	r.helm("dependency", "build", chart)

	const ns, release = "informerd-helm", "ctl"
	start := time.Now()
	r.helmInstall(release, chart, ns, nil)
	pod := r.sidecarReady(ns, "app.kubernetes.io/name=controller,app.kubernetes.io/instance="+release, start)
	if got := r.controllerReport(pod); got != want {
		t.Fatalf("the controller read %d pods through the chart's informerd; the apiserver has %d in demo-0 to demo-4", got, want)
	}
	t.Logf("the controller read %d pods through the sidecar its chart included", want)
}
