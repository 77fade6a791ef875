package main

// The manifests under deploy/ as pods on real nodes (`make test-node`, which starts a control
// plane and two nodes of its own, and sets INFORMERD_NODE_CLUSTER to its directory). Without
// that variable the tests are skipped: `make test` has no nodes.
//
// Nothing is rewritten: deploy/example is applied as `kubectl apply -k` would apply it. Its
// images are those the nodes imported (make image's informerd:0.1.0, the demo controller built
// as deploy/example/Dockerfile builds it, named as the kustomization's `images:` names it), and
// their tags make the pull policy IfNotPresent, so no overlay is needed.

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
)

const patience = 3 * time.Minute

type realNode struct {
	t          *testing.T
	clusterDir string
	kubeconfig string
	bin        string
	cs         *kubernetes.Clientset
	root       string
}

func needNodes(t *testing.T) *realNode {
	t.Helper()
	dir := os.Getenv("INFORMERD_NODE_CLUSTER")
	if dir == "" {
		t.Skip("no real nodes: `make test-node` runs these tests (INFORMERD_NODE_CLUSTER)")
	}
	root, err := filepath.Abs("../../..")
	if err != nil {
		t.Fatal(err)
	}
	r := &realNode{t: t, clusterDir: dir, kubeconfig: filepath.Join(dir, "kubeconfig"), bin: filepath.Join(root, ".cache/bin"), root: root}
	if r.cs, err = client(r.kubeconfig); err != nil {
		t.Fatal(err)
	}
	return r
}

// run runs a command (a binary of .cache/bin, or one by its absolute path) with the control
// plane's kubeconfig and returns its stdout.
func (r *realNode) run(stdin []byte, name string, args ...string) (string, error) {
	return r.runEnv(nil, stdin, name, args...)
}

// runEnv is run with more environment variables.
func (r *realNode) runEnv(env []string, stdin []byte, name string, args ...string) (string, error) {
	path := name
	if !filepath.IsAbs(path) {
		path = filepath.Join(r.bin, name)
	}
	cmd := exec.Command(path, args...)
	cmd.Dir = r.root
	cmd.Env = append(append(os.Environ(), "KUBECONFIG="+r.kubeconfig), env...)
	if stdin != nil {
		cmd.Stdin = bytes.NewReader(stdin)
	}
	var out, errb bytes.Buffer
	cmd.Stdout = &out
	cmd.Stderr = &errb
	err := cmd.Run()
	if err != nil {
		return out.String(), fmt.Errorf("%s %s: %v: %s", name, strings.Join(args, " "), err, errb.String())
	}
	return out.String(), nil
}

func (r *realNode) must(stdin []byte, name string, args ...string) string {
	r.t.Helper()
	out, err := r.run(stdin, name, args...)
	if err != nil {
		r.t.Fatal(err)
	}
	return out
}

// apply is `kubectl kustomize DIR | kubectl apply --server-side -f -`, as deploy/README.md says.
func (r *realNode) apply(dir string) {
	r.t.Helper()
	manifests := r.must(nil, "kubectl", "kustomize", dir)
	r.must([]byte(manifests), "kubectl", "apply", "--server-side", "-f", "-")
}

func (r *realNode) eventually(what string, f func() (bool, string)) {
	r.t.Helper()
	deadline := time.Now().Add(patience)
	last := ""
	for time.Now().Before(deadline) {
		var ok bool
		if ok, last = f(); ok {
			return
		}
		time.Sleep(time.Second)
	}
	r.t.Fatalf("%s: not after %s; last: %s", what, patience, last)
}

func status(p *corev1.Pod, name string) *corev1.ContainerStatus {
	for _, list := range [][]corev1.ContainerStatus{p.Status.InitContainerStatuses, p.Status.ContainerStatuses} {
		for i := range list {
			if list[i].Name == name {
				return &list[i]
			}
		}
	}
	return nil
}

// onePod waits for the one pod of the selector and returns it.
func (r *realNode) onePod(ns, selector string) *corev1.Pod {
	r.t.Helper()
	var pod *corev1.Pod
	r.eventually("one pod "+selector+" in "+ns, func() (bool, string) {
		l, err := r.cs.CoreV1().Pods(ns).List(context.Background(), metav1.ListOptions{LabelSelector: selector})
		if err != nil {
			return false, err.Error()
		}
		var live []corev1.Pod
		for _, p := range l.Items {
			if p.DeletionTimestamp == nil {
				live = append(live, p)
			}
		}
		if len(live) != 1 {
			return false, fmt.Sprintf("%d pods", len(live))
		}
		pod = &live[0]
		return true, ""
	})
	return pod
}

var viewEquals = regexp.MustCompile(`the Informer's view equals informerd's list: (\d+) pods`)

// TestDeployExampleRunsAsPodsOnARealNode: the sidecar beside the demo controller, from
// deploy/example as written. The kubelet starts informerd first (a native sidecar), its
// startup and readiness probes on the metrics port make it started and ready, and the
// controller, started after it, reads the pods through the socket on the shared emptyDir and
// finds its Informer's view equal to informerd's list, which holds every pod the apiserver has
// in the two namespaces.
func TestDeployExampleRunsAsPodsOnARealNode(t *testing.T) {
	r := needNodes(t)
	ctx := context.Background()
	want := r.cachedPods("informerd-example", 2, 20)
	start := time.Now()
	r.apply("deploy/example")
	t.Cleanup(func() { _, _ = r.run(nil, "kubectl", "delete", "namespace", "informerd-example", "--wait=false") })
	pod := r.sidecarReady("informerd-example", "app.kubernetes.io/name=controller", start)

	// The controller reads through the socket: the demo prints its Informer's view against
	// informerd's list.
	got := r.controllerReport(pod)
	if got != want {
		t.Fatalf("the controller read %d pods through informerd; the apiserver has %d in informerd-example-0 and -1", got, want)
	}

	// Start order: informerd ran before the controller's first start.
	pod, err := r.cs.CoreV1().Pods("informerd-example").Get(ctx, pod.Name, metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	inf, ctl := status(pod, "informerd"), status(pod, "controller")
	infStart := inf.State.Running.StartedAt.Time
	var ctlFirst time.Time
	for _, st := range []corev1.ContainerState{ctl.State, ctl.LastTerminationState} {
		if st.Running != nil && (ctlFirst.IsZero() || st.Running.StartedAt.Time.Before(ctlFirst)) {
			ctlFirst = st.Running.StartedAt.Time
		}
		if st.Terminated != nil && (ctlFirst.IsZero() || st.Terminated.StartedAt.Time.Before(ctlFirst)) {
			ctlFirst = st.Terminated.StartedAt.Time
		}
	}
	if ctlFirst.IsZero() || ctlFirst.Before(infStart) {
		t.Fatalf("the controller started at %v, informerd at %v: the sidecar must start first", ctlFirst, infStart)
	}
	t.Logf("the controller read %d pods through the socket; informerd started at %s, the controller at %s",
		got, infStart.Format(time.RFC3339), ctlFirst.Format(time.RFC3339))

	t.Run("killing informerd: the kubelet restarts it and it serves the socket again", func(t *testing.T) {
		r := *r
		r.t = t
		before := status(pod, "informerd")
		epoch := r.servesThroughTheSocket(pod, want)
		r.ctr(pod.Spec.NodeName, "tasks", "kill", "--signal", "SIGKILL", containerID(before))
		r.eventually("informerd restarted and ready again", func() (bool, string) {
			p, err := r.cs.CoreV1().Pods(pod.Namespace).Get(ctx, pod.Name, metav1.GetOptions{})
			if err != nil {
				return false, err.Error()
			}
			s := status(p, "informerd")
			return s.RestartCount > before.RestartCount && s.Ready && s.Started != nil && *s.Started,
				fmt.Sprintf("restarts %d, ready %v", s.RestartCount, s.Ready)
		})
		if again := r.servesThroughTheSocket(pod, want); again == epoch {
			t.Fatalf("the restarted informerd serves epoch %s, as the killed one did", again)
		}
	})

	t.Run("the controller stops: informerd keeps serving", func(t *testing.T) {
		r := *r
		r.t = t
		p, err := r.cs.CoreV1().Pods(pod.Namespace).Get(ctx, pod.Name, metav1.GetOptions{})
		if err != nil {
			t.Fatal(err)
		}
		inf, ctl := status(p, "informerd"), status(p, "controller")
		// The demo controller exits after each run; waiting for its next exit is waiting for
		// the controller to stop. Killed or exited, the sidecar must not notice.
		if running := ctl.State.Running; running != nil {
			// The controller may exit on its own between the status read and the kill:
			// containerd then has no running task for it, which is the stop waited for below.
			_, err := r.run(nil, "ctr", "--address", r.containerdSocket(p.Spec.NodeName), "-n", "k8s.io",
				"tasks", "kill", "--signal", "SIGKILL", containerID(ctl))
			if err != nil && !strings.Contains(err.Error(), "no running task found") {
				t.Fatal(err)
			}
		}
		r.eventually("the controller stopped", func() (bool, string) {
			p, err = r.cs.CoreV1().Pods(pod.Namespace).Get(ctx, pod.Name, metav1.GetOptions{})
			if err != nil {
				return false, err.Error()
			}
			c := status(p, "controller")
			return c.RestartCount > ctl.RestartCount || (c.State.Running == nil && ctl.State.Running != nil),
				fmt.Sprintf("controller restarts %d", c.RestartCount)
		})
		after := status(p, "informerd")
		if after.ContainerID != inf.ContainerID || after.RestartCount != inf.RestartCount || !after.Ready {
			t.Fatalf("informerd changed when the controller stopped: %s (%d restarts, ready %v), was %s (%d)",
				after.ContainerID, after.RestartCount, after.Ready, inf.ContainerID, inf.RestartCount)
		}
		r.servesThroughTheSocket(p, want)
	})

	t.Run("deleting the pod: the kubelet stops the controller, then informerd", func(t *testing.T) {
		r := *r
		r.t = t
		// The demo controller runs for a moment and exits, so that a deletion rarely finds it
		// running. It waits (up to 5 minutes) for informerd to sync: without the RoleBinding of
		// informerd-example-1, the next pod's informerd never syncs, and its controller waits.
		if err := r.cs.RbacV1().RoleBindings("informerd-example-1").Delete(ctx, "informerd-example", metav1.DeleteOptions{}); err != nil {
			t.Fatal(err)
		}
		if err := r.cs.CoreV1().Pods(pod.Namespace).Delete(ctx, pod.Name, metav1.DeleteOptions{}); err != nil {
			t.Fatal(err)
		}
		var next *corev1.Pod
		r.eventually("the next pod's controller running beside an unsynced informerd", func() (bool, string) {
			next = r.onePod("informerd-example", "app.kubernetes.io/name=controller")
			inf, ctl := status(next, "informerd"), status(next, "controller")
			if next.Name == pod.Name || inf == nil || ctl == nil {
				return false, "no next pod yet"
			}
			return inf.Started != nil && *inf.Started && !inf.Ready && ctl.State.Running != nil,
				fmt.Sprintf("informerd %+v, controller %+v", inf.State, ctl.State)
		})
		infID, ctlID := containerID(status(next, "informerd")), containerID(status(next, "controller"))
		sock := filepath.Join(r.clusterDir, "nodes", next.Spec.NodeName, "root/run/containerd/containerd.sock")
		events := exec.Command(filepath.Join(r.bin, "ctr"), "--address", sock, "events")
		out, err := events.StdoutPipe()
		if err != nil {
			t.Fatal(err)
		}
		if err := events.Start(); err != nil {
			t.Fatal(err)
		}
		defer func() { _ = events.Process.Kill(); _ = events.Wait() }()
		exits := make(chan string, 16)
		go func() {
			sc := bufio.NewScanner(out)
			for sc.Scan() {
				if line := sc.Text(); strings.Contains(line, "/tasks/exit") {
					exits <- line
				}
			}
			close(exits)
		}()
		time.Sleep(time.Second) // the subscription is made
		if err := r.cs.CoreV1().Pods(next.Namespace).Delete(ctx, next.Name, metav1.DeleteOptions{}); err != nil {
			t.Fatal(err)
		}
		var order []string
		timeout := time.After(patience)
		for len(order) < 2 {
			select {
			case line, ok := <-exits:
				if !ok {
					t.Fatalf("ctr events ended; exits so far: %v", order)
				}
				switch {
				case strings.Contains(line, ctlID):
					order = append(order, "controller")
				case strings.Contains(line, infID):
					order = append(order, "informerd")
				}
			case <-timeout:
				t.Fatalf("not both containers exited after %s: %v", patience, order)
			}
		}
		if order[0] != "controller" {
			t.Fatalf("the containers exited in the order %v: informerd must stop after the controller", order)
		}
		t.Logf("containerd's exit events, in order: %v", order)
	})
}

func containerID(s *corev1.ContainerStatus) string {
	_, id, _ := strings.Cut(s.ContainerID, "://")
	return id
}

// ctr runs ctr against the containerd of a node (its socket is in the node's /run, a
// directory on the host).
func (r *realNode) ctr(node string, args ...string) string {
	r.t.Helper()
	return r.must(nil, "ctr", append([]string{"--address", r.containerdSocket(node), "-n", "k8s.io"}, args...)...)
}

// containerdSocket is the socket of a node's containerd.
func (r *realNode) containerdSocket(node string) string {
	return filepath.Join(r.clusterDir, "nodes", node, "root/run/containerd/containerd.sock")
}

// servesThroughTheSocket runs `informerd status` in the sidecar's container (kubectl exec,
// through the kubelet), which asks the sidecar through the socket on the shared emptyDir.
// It returns the store's epoch, which a new informerd process draws anew.
func (r *realNode) servesThroughTheSocket(pod *corev1.Pod, want int) (epoch string) {
	r.t.Helper()
	r.eventually("informerd status through the socket", func() (bool, string) {
		out, err := r.run(nil, "kubectl", "exec", "-n", pod.Namespace, pod.Name, "-c", "informerd", "--",
			"informerd", "status", "--socket", "/run/informerd/informerd.sock", "-o", "json")
		if err != nil {
			return false, err.Error()
		}
		var st struct {
			Synced    bool `json:"synced"`
			Resources []struct {
				Name    string `json:"name"`
				Objects int    `json:"objects"`
				Epoch   string `json:"epoch"`
			} `json:"resources"`
		}
		if err := json.Unmarshal([]byte(out), &st); err != nil {
			return false, fmt.Sprintf("%v: %s", err, out)
		}
		if !st.Synced || len(st.Resources) != 1 || st.Resources[0].Objects != want {
			return false, out
		}
		epoch = st.Resources[0].Epoch
		return true, ""
	})
	return epoch
}

// TestDeployNodeServesEachNodeItsOwnPods: deploy/node on two nodes, as written, and its
// example agent with only the image set by an overlay. One informerd per node serves the pods
// of that node alone; the agent on each node reads them through the node's socket with its
// projected token; a pod of another ServiceAccount, same socket, is refused.
func TestDeployNodeServesEachNodeItsOwnPods(t *testing.T) {
	r := needNodes(t)
	ctx := context.Background()
	nodes, err := r.cs.CoreV1().Nodes().List(ctx, metav1.ListOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if len(nodes.Items) < 2 {
		t.Fatalf("%d nodes: the test needs two", len(nodes.Items))
	}
	r.apply("deploy/node")
	r.applyExampleAgent()
	t.Cleanup(func() { _, _ = r.run(nil, "kubectl", "delete", "namespace", "informerd-node", "--wait=false") })
	r.readyOnEveryNode("informerd-node", "app.kubernetes.io/name=informerd", len(nodes.Items))

	// More pods on each node for informerd to hold: the pause image, which every node has.
	if _, err := r.cs.CoreV1().Namespaces().Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: "informerd-node-pods"}}, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _, _ = r.run(nil, "kubectl", "delete", "namespace", "informerd-node-pods", "--wait=false") })
	for i, n := range nodes.Items {
		for j := 0; j <= i+1; j++ {
			p := &corev1.Pod{
				ObjectMeta: metav1.ObjectMeta{Name: fmt.Sprintf("%s-%d", n.Name, j)},
				Spec:       corev1.PodSpec{NodeName: n.Name, Containers: []corev1.Container{{Name: "pause", Image: PauseImage}}},
			}
			if _, err := r.cs.CoreV1().Pods("informerd-node-pods").Create(ctx, p, metav1.CreateOptions{}); err != nil {
				t.Fatal(err)
			}
		}
	}

	// Each node's agent: exactly the pods the apiserver has on that node, none of another.
	agents := r.agentOnEveryNode(len(nodes.Items))
	for _, a := range agents.Items {
		r.agentSeesItsNode(&a, func([]string) bool { return true })
		t.Logf("%s: %s", a.Name, r.agentReport(a.Namespace, a.Name)[0])
	}

	t.Run("killing a node's informerd: the agent's Informer relists from the new one", func(t *testing.T) {
		r := *r
		r.t = t
		a := agents.Items[0]
		before := r.agentSeesItsNode(&a, func([]string) bool { return true })
		l, err := r.cs.CoreV1().Pods("informerd-node").List(ctx, metav1.ListOptions{FieldSelector: "spec.nodeName=" + a.Spec.NodeName})
		if err != nil || len(l.Items) != 1 {
			t.Fatalf("informerd on %s: %v, %d pods", a.Spec.NodeName, err, len(l.Items))
		}
		inf := l.Items[0]
		s := status(&inf, "informerd")
		r.ctr(inf.Spec.NodeName, "tasks", "kill", "--signal", "SIGKILL", containerID(s))
		r.eventually("informerd restarted by the kubelet", func() (bool, string) {
			p, err := r.cs.CoreV1().Pods(inf.Namespace).Get(ctx, inf.Name, metav1.GetOptions{})
			if err != nil {
				return false, err.Error()
			}
			now := status(p, "informerd")
			return now.RestartCount > s.RestartCount && now.Ready, fmt.Sprintf("restarts %d, ready %v", now.RestartCount, now.Ready)
		})
		relists, _ := strconv.Atoi(before[6])
		after := r.agentSeesItsNode(&a, func(m []string) bool {
			n, _ := strconv.Atoi(m[6])
			return m[5] != before[5] && n > relists
		})
		t.Logf("before: %s; after: %s", before[0], after[0])
	})

	// Another ServiceAccount, the same socket and a token for informerd: refused.
	if _, err := r.cs.CoreV1().ServiceAccounts("informerd-agent").Create(ctx, &corev1.ServiceAccount{ObjectMeta: metav1.ObjectMeta{Name: "stranger"}}, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	spec := agents.Items[0].Spec.DeepCopy()
	spec.ServiceAccountName = "stranger"
	spec.DeprecatedServiceAccount = ""
	stranger, err := r.cs.CoreV1().Pods("informerd-agent").Create(ctx, &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{Name: "stranger"},
		Spec:       *spec,
	}, metav1.CreateOptions{})
	if err != nil {
		t.Fatal(err)
	}
	r.eventually("the stranger refused", func() (bool, string) {
		m := r.agentReport(stranger.Namespace, stranger.Name)
		if m == nil {
			return false, "no report yet"
		}
		return m[8] == "PermissionDenied", m[0]
	})
	t.Logf("stranger on %s: %s", stranger.Spec.NodeName, r.agentReport(stranger.Namespace, stranger.Name)[0])
}

// TestNodeDownLeavesTheHostAsItWas: a node of its own (beside the test's two, without a second
// scheduler or controller manager) runs a pod, then stops; the host's interfaces, addresses,
// routes, mounts, iptables rules, sysctls, cgroups and the directories a kubelet or containerd
// would write by default are as before, and none of its processes is left.
func TestNodeDownLeavesTheHostAsItWas(t *testing.T) {
	r := needNodes(t)
	ctx := context.Background()
	var first nodeConfig
	b, err := os.ReadFile(filepath.Join(r.clusterDir, "nodes", "informerd-node-1", "node.json"))
	if err == nil {
		err = json.Unmarshal(b, &first)
	}
	if err != nil {
		t.Fatal(err)
	}
	dir := t.TempDir()
	before := hostState(t, dir)
	args := []string{"up", "--cluster-dir", r.clusterDir, "--dir", dir, "--bin", r.bin, "--nodes", "1",
		"--prefix", "informerd-probe", "--controllers=false"}
	for _, img := range first.Images {
		args = append(args, "--image", img)
	}
	stopped := false
	stop := func() {
		if !stopped {
			stopped = true
			r.must(nil, "node", "down", "--dir", dir)
		}
	}
	t.Cleanup(stop)
	r.must(nil, "node", args...)
	if _, err := r.cs.CoreV1().Pods("default").Create(ctx, &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{Name: "probe"},
		Spec:       corev1.PodSpec{NodeName: "informerd-probe-1", Containers: []corev1.Container{{Name: "pause", Image: PauseImage}}},
	}, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	// Its node is gone: no kubelet will confirm a graceful deletion.
	zero := int64(0)
	t.Cleanup(func() {
		_ = r.cs.CoreV1().Pods("default").Delete(ctx, "probe", metav1.DeleteOptions{GracePeriodSeconds: &zero})
	})
	r.eventually("the probe pod running", func() (bool, string) {
		p, err := r.cs.CoreV1().Pods("default").Get(ctx, "probe", metav1.GetOptions{})
		if err != nil {
			return false, err.Error()
		}
		return p.Status.Phase == corev1.PodRunning && p.Status.PodIP != "", string(p.Status.Phase)
	})
	during := hostState(t, dir)
	stop()
	after := hostState(t, dir)
	if during["links"] == before["links"] {
		t.Fatalf("no veth on the host while the node ran: %s", during["links"])
	}
	for k, v := range before {
		if after[k] != v {
			t.Errorf("%s: before the node\n%s\nafter it stopped\n%s", k, v, after[k])
		}
	}
	if _, err := r.cs.CoreV1().Nodes().Get(ctx, "informerd-probe-1", metav1.GetOptions{}); err == nil {
		t.Errorf("node down left the Node object informerd-probe-1")
	}
}

// hostState is what a node could leave on the host, each part as text.
func hostState(t *testing.T, dir string) map[string]string {
	t.Helper()
	s := map[string]string{}
	lines := func(b []byte) []string { return strings.Split(strings.TrimSpace(string(b)), "\n") }
	ifs, err := net.Interfaces()
	if err != nil {
		t.Fatal(err)
	}
	var links, addrs []string
	for _, i := range ifs {
		links = append(links, i.Name)
		as, _ := i.Addrs()
		for _, a := range as {
			addrs = append(addrs, i.Name+" "+a.String())
		}
	}
	s["links"], s["addresses"] = strings.Join(links, " "), strings.Join(addrs, "\n")
	for _, family := range []string{"-4", "-6"} {
		out, err := exec.Command("ip", family, "route", "show", "table", "all").Output()
		if err != nil {
			t.Fatal(err)
		}
		s["routes "+family] = string(out)
	}
	b, err := os.ReadFile("/proc/self/mountinfo")
	if err != nil {
		t.Fatal(err)
	}
	var mounts []string
	for _, l := range lines(b) {
		if f := strings.Fields(l); len(f) > 4 {
			mounts = append(mounts, f[4])
		}
	}
	s["mounts"] = strings.Join(mounts, "\n")
	if out, err := exec.Command("iptables-save").Output(); err == nil {
		var rules []string
		for _, l := range lines(out) {
			if !strings.HasPrefix(l, "#") {
				rules = append(rules, regexp.MustCompile(`\[\d+:\d+\]`).ReplaceAllString(l, ""))
			}
		}
		s["iptables"] = strings.Join(rules, "\n")
	}
	for _, k := range append(kernelTunables, "net/ipv4/ip_forward") {
		b, _ := os.ReadFile(filepath.Join("/proc/sys", k))
		s["sysctl "+k] = strings.TrimSpace(string(b))
	}
	base, err := memoryCgroup()
	if err != nil {
		t.Fatal(err)
	}
	var cgroups []string
	for _, h := range hierarchies() {
		for _, pattern := range []string{filepath.Join(h, "informerd-*"), filepath.Join(h, base, "informerd-*")} {
			m, _ := filepath.Glob(pattern)
			cgroups = append(cgroups, m...)
		}
	}
	s["cgroups"] = strings.Join(cgroups, "\n")
	var exist []string
	for _, p := range []string{"/opt/containerd", "/usr/libexec/kubernetes", "/etc/cni", "/etc/containerd",
		"/var/lib/kubelet", "/var/lib/containerd", "/var/lib/cni", "/var/log/pods", "/var/log/containers",
		"/run/containerd", "/run/netns", "/run/flannel", "/var/run/informerd"} {
		if _, err := os.Lstat(p); err == nil {
			exist = append(exist, p)
		}
	}
	s["paths"] = strings.Join(exist, " ")
	// The node's processes: any that names the node's directory (its supervisor does; the
	// rest died with its PID namespace).
	var procs []string
	entries, _ := os.ReadDir("/proc")
	for _, e := range entries {
		if _, err := strconv.Atoi(e.Name()); err != nil {
			continue
		}
		cmdline, err := os.ReadFile(filepath.Join("/proc", e.Name(), "cmdline"))
		if err == nil && bytes.Contains(cmdline, []byte(dir)) {
			procs = append(procs, e.Name()+" "+strings.ReplaceAll(string(cmdline), "\x00", " "))
		}
	}
	s["processes"] = strings.Join(procs, "\n")
	return s
}
