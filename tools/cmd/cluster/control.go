package main

import (
	"bytes"
	"context"
	"crypto/tls"
	"crypto/x509"
	"encoding/json"
	"errors"
	"fmt"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/tools/clientcmd"
)

// state is what `up` records so that `down` stops exactly what it started.
type state struct {
	Processes []proc `json:"processes"`
	Server    string `json:"server"`
}

type proc struct {
	Name string `json:"name"`
	Pid  int    `json:"pid"`
	Bin  string `json:"bin"`
}

type layout struct{ dir string }

func (l layout) state() string      { return filepath.Join(l.dir, "state.json") }
func (l layout) lock() string       { return filepath.Join(l.dir, "lock") }
func (l layout) kubeconfig() string { return filepath.Join(l.dir, "kubeconfig") }
func (l layout) kcmConfig() string  { return filepath.Join(l.dir, "controller-manager.kubeconfig") }
func (l layout) etcdData() string   { return filepath.Join(l.dir, "etcd") }
func (l layout) logs() string       { return filepath.Join(l.dir, "logs") }
func (l layout) pki() pki           { return pki{dir: filepath.Join(l.dir, "pki")} }

// withLock serialises `up`/`down` across processes (parallel test binaries call `up`).
func withLock(l layout, f func() error) error {
	if err := os.MkdirAll(l.dir, 0o755); err != nil {
		return err
	}
	fd, err := os.OpenFile(l.lock(), os.O_CREATE|os.O_RDWR, 0o644)
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

// defaultControllers are what makes the cluster behave like a real one for a cache:
// namespaces finish terminating, owner references are garbage-collected, every namespace gets
// its default ServiceAccount and the root CA ConfigMap that pod token volumes project.
const defaultControllers = "namespace-controller,garbage-collector-controller,serviceaccount-controller," +
	"serviceaccount-token-controller,root-ca-certificate-publisher-controller"

func up(dir, bin string, opts options) (string, error) {
	absDir, err := filepath.Abs(dir)
	if err != nil {
		return "", err
	}
	absBin, err := filepath.Abs(bin)
	if err != nil {
		return "", err
	}
	l := layout{dir: absDir}
	err = withLock(l, func() error {
		if st, err := readState(l); err == nil {
			if allAlive(st) && readyz(l, st.Server) == nil {
				return nil
			}
			fmt.Fprintln(os.Stderr, "cluster: a previous control plane is partly down; restarting it")
			stopAll(st)
			_ = os.Remove(l.state())
		}
		// Decision: the ports are checked free, but another process may bind one before etcd
		// or the apiserver does (a test suite starting control planes and sidecars side by
		// side): that start is retried on other ports, a few times.
		for attempt := 0; ; attempt++ {
			err := start(l, absBin, opts, attempt)
			if !errors.Is(err, errPortTaken) || attempt == 3 {
				return err
			}
			fmt.Fprintf(os.Stderr, "cluster: %v; starting again on other ports\n", err)
		}
	})
	if err != nil {
		return "", err
	}
	return l.kubeconfig(), nil
}

// errPortTaken is a start that failed because a port chosen for it was bound meanwhile.
var errPortTaken = errors.New("a port chosen for the control plane was taken meanwhile")

func start(l layout, bin string, opts options, attempt int) error {
	p := l.pki()
	if err := p.ensure(); err != nil {
		return fmt.Errorf("certificates: %w", err)
	}
	if err := os.MkdirAll(l.logs(), 0o755); err != nil {
		return err
	}
	// A fresh etcd each time: tests and benchmarks expect a clean cluster after `up`.
	if err := os.RemoveAll(l.etcdData()); err != nil {
		return err
	}
	ports, err := freePorts(4, attempt)
	if err != nil {
		return err
	}
	etcdURL := fmt.Sprintf("http://127.0.0.1:%d", ports[0])
	server := fmt.Sprintf("https://127.0.0.1:%d", ports[2])
	st := &state{Server: server}
	fail := func(err error) error {
		stopAll(st)
		return err
	}

	etcd, err := spawn(l, bin, "etcd", append([]string{
		"--data-dir", l.etcdData(),
		"--listen-client-url", etcdURL,
		"--listen-peer-url", fmt.Sprintf("http://127.0.0.1:%d", ports[1])}, opts.etcdArgs...)...)
	if err != nil {
		return fail(err)
	}
	st.Processes = append(st.Processes, etcd)
	if err := waitFor("etcd", 60*time.Second, etcd, func() error {
		resp, err := http.Get(etcdURL + "/health")
		if err != nil {
			return err
		}
		resp.Body.Close()
		if resp.StatusCode != 200 {
			return fmt.Errorf("health: %s", resp.Status)
		}
		return nil
	}, l); err != nil {
		return fail(err)
	}

	// Seeding and benchmarks write objects as fast as the apiserver takes them, and a third of
	// its CPU went to garbage collection at Go's default GOGC=100. A loopback test cluster has
	// memory to spare: collect less often, within a ceiling (both `up` flags).
	apiserverArgs := append([]string{
		"--etcd-servers", etcdURL,
		"--bind-address", "127.0.0.1",
		// The `kubernetes` Service's endpoint. Nothing on the host listens there: it is the
		// address inside each node of `node up` (tools/cmd/node: APIAddress) on which the node
		// forwards the apiserver's port, so that pods reach the apiserver through the Service as
		// in any cluster. 127.0.0.1 would be each pod's own loopback.
		"--advertise-address", "10.245.0.1",
		"--secure-port", strconv.Itoa(ports[2]),
		"--tls-cert-file", p.serverCert(),
		"--tls-private-key-file", p.serverKey(),
		"--client-ca-file", p.caCert(),
		"--authorization-mode", "RBAC",
		"--service-account-issuer", "https://kubernetes.default.svc.cluster.local",
		"--service-account-key-file", p.saPub(),
		"--service-account-signing-key-file", p.saKey(),
		"--service-cluster-ip-range", "10.0.0.0/24",
		"--allow-privileged=true",
		// The kubelets of `node up` (logs, exec, port-forward): reached at their InternalIP
		// (node names do not resolve), as an identity their webhook authorizer lets in.
		"--kubelet-preferred-address-types", "InternalIP",
		"--kubelet-client-certificate", p.adminCert(),
		"--kubelet-client-key", p.adminKey(),
		// The seeder and benchmarks write tens of thousands of objects quickly; the defaults
		// (400/200) queue them behind priority and fairness for no benefit on loopback.
		"--max-requests-inflight", "2000",
		"--max-mutating-requests-inflight", "1000",
		"--profiling=false",
		// Decision: shardSelector on lists and watches (KEP-5866, alpha in 1.36) is on, so
		// that the shards informerd serves are checked against the apiserver's own
		// (tests/shard.rs) and resources can cache one shard (issue 32).
		"--feature-gates", "ShardedListAndWatch=true",
		"--v", "1"}, envtestArgs(opts)...)
	apiserverArgs = append(apiserverArgs, opts.apiserverArgs...)
	apiserver, err := spawnEnv(l, bin, "kube-apiserver", []string{"GOGC=" + opts.apiserverGOGC, "GOMEMLIMIT=" + opts.apiserverMemoryLimit}, apiserverArgs...)
	if err != nil {
		return fail(err)
	}
	st.Processes = append(st.Processes, apiserver)
	if err := waitFor("kube-apiserver", 120*time.Second, apiserver, func() error { return readyz(l, server) }, l); err != nil {
		return fail(err)
	}
	if err := os.WriteFile(l.kubeconfig(), []byte(kubeconfig(server, p.caCert(), p.adminCert(), p.adminKey(), "admin")), 0o600); err != nil {
		return fail(err)
	}
	if !opts.controllerManager {
		return writeState(l, st)
	}
	if err := os.WriteFile(l.kcmConfig(), []byte(kubeconfig(server, p.caCert(), p.kcmCert(), p.kcmKey(), "system:kube-controller-manager")), 0o600); err != nil {
		return fail(err)
	}

	kcm, err := spawn(l, bin, "kube-controller-manager",
		"--kubeconfig", l.kcmConfig(),
		"--authentication-kubeconfig", l.kcmConfig(),
		"--authorization-kubeconfig", l.kcmConfig(),
		// The apiserver has no front proxy; do not look for its request-header CA.
		"--authentication-skip-lookup=true",
		"--bind-address", "127.0.0.1",
		"--secure-port", strconv.Itoa(ports[3]),
		"--leader-elect=false",
		"--use-service-account-credentials=true",
		"--controllers", opts.controllers,
		"--service-account-private-key-file", p.saKey(),
		"--root-ca-file", p.caCert(),
		"--kube-api-qps", "200",
		"--kube-api-burst", "400",
		"--v", "1")
	if err != nil {
		return fail(err)
	}
	st.Processes = append(st.Processes, kcm)
	// The controller manager is working once the ServiceAccount controller has created the
	// default ServiceAccount; pods cannot be created before that.
	cs, err := adminClient(l)
	if err != nil {
		return fail(err)
	}
	if err := waitFor("kube-controller-manager", 120*time.Second, kcm, func() error {
		_, err := cs.CoreV1().ServiceAccounts("default").Get(context.Background(), "default", metav1.GetOptions{})
		return err
	}, l); err != nil {
		return fail(err)
	}
	return writeState(l, st)
}

// envtestArgs are the kube-apiserver flags a control plane without controller manager needs:
// with no ServiceAccount controller to create each namespace's default ServiceAccount, the
// ServiceAccount admission plugin would refuse every pod (envtest disables it likewise).
func envtestArgs(opts options) []string {
	if opts.controllerManager {
		return nil
	}
	return []string{"--disable-admission-plugins", "ServiceAccount"}
}

func adminClient(l layout) (*kubernetes.Clientset, error) {
	cfg, err := clientcmd.BuildConfigFromFlags("", l.kubeconfig())
	if err != nil {
		return nil, err
	}
	return kubernetes.NewForConfig(cfg)
}

func spawn(l layout, bin, name string, args ...string) (proc, error) {
	return spawnEnv(l, bin, name, nil, args...)
}

func spawnEnv(l layout, bin, name string, env []string, args ...string) (proc, error) {
	path := filepath.Join(bin, name)
	if _, err := os.Stat(path); err != nil {
		return proc{}, fmt.Errorf("%s is not built (run `make cluster`, which builds it): %w", path, err)
	}
	logf, err := os.OpenFile(filepath.Join(l.logs(), name+".log"), os.O_CREATE|os.O_WRONLY|os.O_TRUNC, 0o644)
	if err != nil {
		return proc{}, err
	}
	defer logf.Close()
	cmd := exec.Command(path, args...)
	cmd.Stdout = logf
	cmd.Stderr = logf
	cmd.Dir = l.dir
	cmd.Env = append(os.Environ(), env...)
	// Its own session: the control plane outlives this command and the shell that ran it.
	cmd.SysProcAttr = &syscall.SysProcAttr{Setsid: true}
	if err := cmd.Start(); err != nil {
		return proc{}, fmt.Errorf("start %s: %w", name, err)
	}
	p := proc{Name: name, Pid: cmd.Process.Pid, Bin: path}
	// Reap it if it dies while we still run, so that alive() sees it gone.
	go func() { _ = cmd.Wait() }()
	return p, nil
}

func waitFor(what string, timeout time.Duration, p proc, check func() error, l layout) error {
	deadline := time.Now().Add(timeout)
	var last error
	for time.Now().Before(deadline) {
		if !alive(p) {
			logPath := filepath.Join(l.logs(), p.Name+".log")
			err := fmt.Errorf("%s exited during start-up; see %s", what, logPath)
			if b, _ := os.ReadFile(logPath); bytes.Contains(b, []byte("address already in use")) {
				return fmt.Errorf("%w: %w", errPortTaken, err)
			}
			return err
		}
		if last = check(); last == nil {
			return nil
		}
		time.Sleep(200 * time.Millisecond)
	}
	return fmt.Errorf("%s not ready after %s: %v; see %s", what, timeout, last, filepath.Join(l.logs(), p.Name+".log"))
}

func readyz(l layout, server string) error {
	p := l.pki()
	cert, err := tls.LoadX509KeyPair(p.adminCert(), p.adminKey())
	if err != nil {
		return err
	}
	caPEM, err := os.ReadFile(p.caCert())
	if err != nil {
		return err
	}
	pool := x509.NewCertPool()
	pool.AppendCertsFromPEM(caPEM)
	c := &http.Client{Timeout: 5 * time.Second, Transport: &http.Transport{TLSClientConfig: &tls.Config{
		Certificates: []tls.Certificate{cert}, RootCAs: pool,
	}}}
	resp, err := c.Get(server + "/readyz")
	if err != nil {
		return err
	}
	defer resp.Body.Close()
	if resp.StatusCode != 200 {
		return fmt.Errorf("/readyz: %s", resp.Status)
	}
	return nil
}

// freePorts returns n ports free on loopback, taken below the kernel's ephemeral range.
//
// Decision: not from listening on port 0. Such a port is in the ephemeral range, and between
// this call and etcd's or the apiserver's bind, any outgoing connection on the machine may be
// given it as its local port (the test suite once lost a sidecar's port that way). Below the
// range only an explicit bind can take it; the ports are spread by process id and each is
// checked free (held open until all n are chosen, so that they differ); another attempt picks
// others.
func freePorts(n, attempt int) ([]int, error) {
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
	next := os.Getpid()*7919 + attempt*104729
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
	// No room below the range (a machine configured so): any free ports.
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

// stopAll stops processes in reverse start order: SIGTERM, then SIGKILL after 15 seconds.
func stopAll(st *state) {
	for i := len(st.Processes) - 1; i >= 0; i-- {
		p := st.Processes[i]
		if !alive(p) {
			continue
		}
		_ = syscall.Kill(p.Pid, syscall.SIGTERM)
		deadline := time.Now().Add(15 * time.Second)
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
}

func down(dir string) error {
	l := layout{dir: dir}
	if _, err := os.Stat(l.dir); errors.Is(err, os.ErrNotExist) {
		return nil
	}
	return withLock(l, func() error {
		st, err := readState(l)
		if errors.Is(err, os.ErrNotExist) {
			return nil
		}
		if err != nil {
			return err
		}
		stopAll(st)
		if err := os.Remove(l.state()); err != nil {
			return err
		}
		return os.RemoveAll(l.etcdData())
	})
}

func readState(l layout) (*state, error) {
	b, err := os.ReadFile(l.state())
	if err != nil {
		return nil, err
	}
	var st state
	if err := json.Unmarshal(b, &st); err != nil {
		return nil, fmt.Errorf("%s: %w", l.state(), err)
	}
	return &st, nil
}

func writeState(l layout, st *state) error {
	b, err := json.MarshalIndent(st, "", "  ")
	if err != nil {
		return err
	}
	return os.WriteFile(l.state(), b, 0o644)
}
