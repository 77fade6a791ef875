package main

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net"
	"net/url"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"time"

	corev1 "k8s.io/api/core/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/tools/clientcmd"
)

// The nodes' addresses. Each node's network namespace is its own, so they only need to stay
// clear of the Service range (10.0.0.0/24, the control plane's --service-cluster-ip-range).
const (
	// APIAddress is where the `kubernetes` Service's endpoint points (the control plane's
	// --advertise-address): inside every node it is a local address on which the node's
	// forwarder serves the apiserver's port, so in-cluster configuration works unchanged.
	APIAddress = "10.245.0.1"
	// The cluster's pod network: node i's pods get addresses from 10.244.i.0/24.
	podNetwork = "10.244.0.0/16"
)

func podCIDR(i int) string { return fmt.Sprintf("10.244.%d.0/24", i) }

// A node and the host are joined by a veth pair, 10.246.S.0/30 for the node's slot S: the
// node's address (its InternalIP, where the apiserver reaches the kubelet for logs and exec)
// and the host's end, infd-S. Slots are taken on the host, so that the nodes of several
// control planes (a developer's and make test-node's) can run side by side.
func nodeIP(slot int) string   { return fmt.Sprintf("10.246.%d.2", slot) }
func hostIP(slot int) string   { return fmt.Sprintf("10.246.%d.1", slot) }
func hostLink(slot int) string { return fmt.Sprintf("infd-%d", slot) }

// freeSlot returns the first slot after prev whose veth does not exist on the host.
func freeSlot(prev int) (int, error) {
	for slot := prev + 1; slot < 255; slot++ {
		if _, err := net.InterfaceByName(hostLink(slot)); err != nil {
			return slot, nil
		}
	}
	return 0, fmt.Errorf("no free slot for a node's veth (infd-1 to infd-254 exist)")
}

// nodeConfig is what one node's supervisor and init read (DIR/NAME/node.json).
type nodeConfig struct {
	Name        string   `json:"name"`
	Index       int      `json:"index"`
	Dir         string   `json:"dir"`
	Bin         string   `json:"bin"`
	APIPort     int      `json:"apiPort"`
	KubeletPort int      `json:"kubeletPort"`
	PodCIDR     string   `json:"podCIDR"`
	NodeIP      string   `json:"nodeIP"`
	HostIP      string   `json:"hostIP"`
	HostLink    string   `json:"hostLink"`
	Images      []string `json:"images"`
	CgroupRoot  string   `json:"cgroupRoot"`
}

func (c nodeConfig) path(parts ...string) string {
	return filepath.Join(append([]string{c.Dir}, parts...)...)
}

type upOptions struct {
	clusterDir, dir, bin, prefix string
	nodes                        int
	images                       flagList
	// controllers: also start kube-scheduler and the controllers pods need (once per control
	// plane: a second set would race the first).
	controllers bool
}

// state is what `up` records so that `down` stops exactly what it started.
type state struct {
	Processes []proc   `json:"processes"`
	Nodes     []string `json:"nodes"`
	// Kubeconfig is the control plane's admin kubeconfig, to delete the Node objects on `down`.
	Kubeconfig string `json:"kubeconfig"`
}

type proc struct {
	Name string `json:"name"`
	Pid  int    `json:"pid"`
	Bin  string `json:"bin"`
}

type clusterState struct {
	Server string `json:"server"`
}

func up(o upOptions) error {
	var err error
	if o.clusterDir, err = filepath.Abs(o.clusterDir); err != nil {
		return err
	}
	if o.dir, err = filepath.Abs(o.dir); err != nil {
		return err
	}
	if o.bin, err = filepath.Abs(o.bin); err != nil {
		return err
	}
	for i, img := range o.images {
		if o.images[i], err = filepath.Abs(img); err != nil {
			return err
		}
	}
	for _, under := range []string{"/run", "/var/lib", "/var/log"} {
		if o.dir == under || strings.HasPrefix(o.dir, under+"/") {
			return fmt.Errorf("--dir %s: a node mounts its own %s, so its directory cannot be under it", o.dir, under)
		}
	}
	b, err := os.ReadFile(filepath.Join(o.clusterDir, "state.json"))
	if err != nil {
		return fmt.Errorf("the control plane is not running (start it with `make cluster`): %w", err)
	}
	var cs clusterState
	if err := json.Unmarshal(b, &cs); err != nil {
		return err
	}
	u, err := url.Parse(cs.Server)
	if err != nil {
		return err
	}
	apiPort, err := strconv.Atoi(u.Port())
	if err != nil {
		return fmt.Errorf("the control plane's server %q: %w", cs.Server, err)
	}
	return withLock(o.dir, func() error {
		if st, err := readState(o.dir); err == nil {
			if allAlive(st) && len(st.Nodes) == o.nodes {
				return nil
			}
			fmt.Fprintln(os.Stderr, "node: previous nodes are partly down or another count; restarting them")
			stop(o.dir, st)
		}
		return start(o, apiPort)
	})
}

func start(o upOptions, apiPort int) error {
	p := pki{clusterDir: o.clusterDir, dir: filepath.Join(o.dir, "pki")}
	if err := os.MkdirAll(p.dir, 0o700); err != nil {
		return err
	}
	st := &state{Kubeconfig: filepath.Join(o.clusterDir, "kubeconfig")}
	fail := func(err error) error {
		stop(o.dir, st)
		return err
	}
	cs, err := client(st.Kubeconfig)
	if err != nil {
		return err
	}
	// The control plane authorizes with RBAC alone (no Node authorizer): the kubelets get the
	// role that Kubernetes defines for them, system:node, through their group.
	ctx := context.Background()
	_, err = cs.RbacV1().ClusterRoleBindings().Create(ctx, &rbacv1.ClusterRoleBinding{
		ObjectMeta: metav1.ObjectMeta{Name: "informerd-local:nodes"},
		RoleRef:    rbacv1.RoleRef{APIGroup: "rbac.authorization.k8s.io", Kind: "ClusterRole", Name: "system:node"},
		Subjects:   []rbacv1.Subject{{APIGroup: "rbac.authorization.k8s.io", Kind: "Group", Name: "system:nodes"}},
	}, metav1.CreateOptions{})
	if err != nil && !apierrors.IsAlreadyExists(err) {
		return err
	}

	local := fmt.Sprintf("https://127.0.0.1:%d", apiPort)
	schedConfig, err := p.kubeconfig("kube-scheduler", "system:kube-scheduler", nil, local)
	if err != nil {
		return err
	}
	ports, err := freePorts(2 + o.nodes)
	if err != nil {
		return err
	}
	logs := filepath.Join(o.dir, "logs")
	if err := os.MkdirAll(logs, 0o755); err != nil {
		return err
	}
	if o.controllers {
		sched, err := spawn(logs, o.bin, "kube-scheduler", nil,
			"--kubeconfig", schedConfig,
			"--authentication-kubeconfig", schedConfig,
			"--authorization-kubeconfig", schedConfig,
			"--authentication-skip-lookup=true",
			"--bind-address", "127.0.0.1",
			"--secure-port", strconv.Itoa(ports[0]),
			"--leader-elect=false",
			"--v", "1")
		if err != nil {
			return fail(err)
		}
		st.Processes = append(st.Processes, sched)
		// The controllers the control plane's own manager leaves out (cluster's defaultControllers
		// are those a cache needs), which pods on nodes need: Deployments, ReplicaSets, DaemonSets,
		// the EndpointSlices of Services and the node lifecycle
		// (it lifts the not-ready taint a new node registers with, and sets it when a node stops).
		kcmConfig := filepath.Join(o.clusterDir, "controller-manager.kubeconfig")
		kcm, err := spawn(logs, o.bin, "kube-controller-manager", nil,
			"--kubeconfig", kcmConfig,
			"--authentication-kubeconfig", kcmConfig,
			"--authorization-kubeconfig", kcmConfig,
			"--authentication-skip-lookup=true",
			"--bind-address", "127.0.0.1",
			"--secure-port", strconv.Itoa(ports[1]),
			"--leader-elect=false",
			"--use-service-account-credentials=true",
			"--controllers", "deployment-controller,replicaset-controller,daemonset-controller,"+
				"endpointslice-controller,node-lifecycle-controller",
			"--v", "1")
		if err != nil {
			return fail(err)
		}
		st.Processes = append(st.Processes, kcm)
	}

	self, err := os.Executable()
	if err != nil {
		return fail(err)
	}
	base, err := memoryCgroup()
	if err != nil {
		return fail(err)
	}
	slot := 0
	for i := 1; i <= o.nodes; i++ {
		if slot, err = freeSlot(slot); err != nil {
			return fail(err)
		}
		c := nodeConfig{
			Name:        fmt.Sprintf("%s-%d", o.prefix, i),
			Index:       i,
			Bin:         o.bin,
			APIPort:     apiPort,
			KubeletPort: ports[1+i],
			PodCIDR:     podCIDR(i),
			NodeIP:      nodeIP(slot),
			HostIP:      hostIP(slot),
			HostLink:    hostLink(slot),
			Images:      o.images,
		}
		c.Dir = filepath.Join(o.dir, c.Name)
		c.CgroupRoot = filepath.Join(base, "informerd-"+c.HostLink)
		st.Nodes = append(st.Nodes, c.Name)
		// A fresh node each time, as the control plane's etcd is.
		if err := os.RemoveAll(c.Dir); err != nil {
			return fail(err)
		}
		if err := prepare(c, p); err != nil {
			return fail(fmt.Errorf("%s: %w", c.Name, err))
		}
		sup, err := spawn(logs, filepath.Dir(self), filepath.Base(self), nil, "supervise", c.path("node.json"))
		if err != nil {
			return fail(err)
		}
		sup.Name = c.Name
		st.Processes = append(st.Processes, sup)
		// The supervisor's log is the node's.
		if err := os.Rename(filepath.Join(logs, filepath.Base(self)+".log"), filepath.Join(logs, c.Name+".log")); err != nil {
			return fail(err)
		}
	}
	if err := writeState(o.dir, st); err != nil {
		return fail(err)
	}
	// Ready: each Node reports Ready (its runtime and network are up).
	deadline := time.Now().Add(240 * time.Second)
	for _, name := range st.Nodes {
		for {
			n, err := cs.CoreV1().Nodes().Get(ctx, name, metav1.GetOptions{})
			if err == nil && nodeReady(n) {
				break
			}
			for _, pr := range st.Processes {
				if !alive(pr) {
					return fail(fmt.Errorf("%s exited during start-up; see %s", pr.Name, filepath.Join(logs, pr.Name+".log")))
				}
			}
			if time.Now().After(deadline) {
				return fail(fmt.Errorf("node %s not Ready after 4m (last: %v); see %s", name, err, logs))
			}
			time.Sleep(time.Second)
		}
		fmt.Printf("node %s Ready\n", name)
	}
	return nil
}

func nodeReady(n *corev1.Node) bool {
	for _, c := range n.Status.Conditions {
		if c.Type == corev1.NodeReady {
			return c.Status == corev1.ConditionTrue
		}
	}
	return false
}

func client(kubeconfig string) (*kubernetes.Clientset, error) {
	cfg, err := clientcmd.BuildConfigFromFlags("", kubeconfig)
	if err != nil {
		return nil, err
	}
	return kubernetes.NewForConfig(cfg)
}

func down(dir string) error {
	dir, err := filepath.Abs(dir)
	if err != nil {
		return err
	}
	if _, err := os.Stat(dir); errors.Is(err, os.ErrNotExist) {
		return nil
	}
	return withLock(dir, func() error {
		st, err := readState(dir)
		if errors.Is(err, os.ErrNotExist) {
			return nil
		}
		if err != nil {
			return err
		}
		stop(dir, st)
		return nil
	})
}

// stop stops the nodes (each supervisor stops its node and removes its cgroups), then the
// scheduler and controller manager, and deletes the Node objects, whose pods the pod garbage
// collector would otherwise keep for a node that never comes back.
func stop(dir string, st *state) {
	for i := len(st.Processes) - 1; i >= 0; i-- {
		stopProc(st.Processes[i], 60*time.Second)
	}
	if cs, err := client(st.Kubeconfig); err == nil {
		for _, n := range st.Nodes {
			_ = cs.CoreV1().Nodes().Delete(context.Background(), n, metav1.DeleteOptions{})
		}
	}
	_ = os.Remove(filepath.Join(dir, "state.json"))
}

func stopProc(p proc, grace time.Duration) {
	if !alive(p) {
		return
	}
	_ = syscall.Kill(p.Pid, syscall.SIGTERM)
	deadline := time.Now().Add(grace)
	for alive(p) && time.Now().Before(deadline) {
		time.Sleep(100 * time.Millisecond)
	}
	if alive(p) {
		_ = syscall.Kill(p.Pid, syscall.SIGKILL)
		for alive(p) {
			time.Sleep(50 * time.Millisecond)
		}
	}
}

func withLock(dir string, f func() error) error {
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return err
	}
	fd, err := os.OpenFile(filepath.Join(dir, "lock"), os.O_CREATE|os.O_RDWR, 0o644)
	if err != nil {
		return err
	}
	defer fd.Close()
	if err := syscall.Flock(int(fd.Fd()), syscall.LOCK_EX); err != nil {
		return err
	}
	defer syscall.Flock(int(fd.Fd()), syscall.LOCK_UN)
	return f()
}

func readState(dir string) (*state, error) {
	b, err := os.ReadFile(filepath.Join(dir, "state.json"))
	if err != nil {
		return nil, err
	}
	var st state
	if err := json.Unmarshal(b, &st); err != nil {
		return nil, err
	}
	return &st, nil
}

func writeState(dir string, st *state) error {
	b, err := json.MarshalIndent(st, "", "  ")
	if err != nil {
		return err
	}
	return os.WriteFile(filepath.Join(dir, "state.json"), b, 0o644)
}

func spawn(logs, bin, name string, env []string, args ...string) (proc, error) {
	path := filepath.Join(bin, name)
	if _, err := os.Stat(path); err != nil {
		return proc{}, fmt.Errorf("%s is not built (run `make node`, which builds it): %w", path, err)
	}
	logf, err := os.OpenFile(filepath.Join(logs, name+".log"), os.O_CREATE|os.O_WRONLY|os.O_TRUNC, 0o644)
	if err != nil {
		return proc{}, err
	}
	defer logf.Close()
	cmd := exec.Command(path, args...)
	cmd.Stdout = logf
	cmd.Stderr = logf
	cmd.Env = append(os.Environ(), env...)
	cmd.SysProcAttr = &syscall.SysProcAttr{Setsid: true}
	if err := cmd.Start(); err != nil {
		return proc{}, fmt.Errorf("start %s: %w", name, err)
	}
	go func() { _ = cmd.Wait() }()
	return proc{Name: name, Pid: cmd.Process.Pid, Bin: path}, nil
}

// alive reports whether pid still runs the binary we started (a recycled pid does not count).
func alive(p proc) bool {
	if syscall.Kill(p.Pid, 0) != nil {
		return false
	}
	exe, err := os.Readlink(fmt.Sprintf("/proc/%d/exe", p.Pid))
	if err != nil {
		return false
	}
	return strings.TrimSuffix(exe, " (deleted)") == p.Bin
}

func allAlive(st *state) bool {
	for _, p := range st.Processes {
		if !alive(p) {
			return false
		}
	}
	return len(st.Processes) > 0
}

// freePorts returns n ports free on loopback, below the ephemeral range (as cluster's
// freePorts, for the same reason: a port there can be taken by any outgoing connection).
func freePorts(n int) ([]int, error) {
	var ls []net.Listener
	defer func() {
		for _, l := range ls {
			l.Close()
		}
	}()
	const floor = 10000
	low := 32768
	if b, err := os.ReadFile("/proc/sys/net/ipv4/ip_local_port_range"); err == nil {
		if f := strings.Fields(string(b)); len(f) > 0 {
			if v, err := strconv.Atoi(f[0]); err == nil {
				low = v
			}
		}
	}
	var ports []int
	span := low - floor
	next := os.Getpid()*7919 + 4099
	for tries := 0; len(ports) < n && span > 0 && tries < 1000; tries++ {
		port := floor + (next%span+span)%span
		next += 7919
		l, err := net.Listen("tcp", fmt.Sprintf("127.0.0.1:%d", port))
		if err != nil {
			continue
		}
		ls = append(ls, l)
		ports = append(ports, port)
	}
	for len(ports) < n {
		l, err := net.Listen("tcp", "127.0.0.1:0")
		if err != nil {
			return nil, err
		}
		ls = append(ls, l)
		ports = append(ports, l.Addr().(*net.TCPAddr).Port)
	}
	return ports, nil
}
