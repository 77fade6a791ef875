package main

import (
	"errors"
	"fmt"
	"net"
	"os"
	"os/exec"
	"os/signal"
	"path/filepath"
	"strings"
	"sync"
	"syscall"
	"time"
)

// nodeInit is PID 1 of a node's namespaces: it makes the node's mounts and network, starts
// containerd, imports the images, starts the kubelet and kube-proxy, reaps every orphan (the
// containerd shims are reparented to it), and on SIGTERM stops them in reverse order. When it
// exits the kernel kills whatever is left in the PID namespace (the shims, the containers) and
// drops the mounts and the network namespace with them.
func nodeInit(configPath string) error {
	c, err := readNodeConfig(configPath)
	if err != nil {
		return err
	}
	if os.Getpid() != 1 {
		return fmt.Errorf("init runs as PID 1 of a node's namespaces (node supervise starts it)")
	}
	sigs := make(chan os.Signal, 1)
	signal.Notify(sigs, syscall.SIGTERM, syscall.SIGINT)
	r := newReaper()
	if err := mounts(c); err != nil {
		return fmt.Errorf("mounts: %w", err)
	}
	if err := network(c, r); err != nil {
		return fmt.Errorf("network: %w", err)
	}
	// The apiserver's port, inside the node, on every address: 127.0.0.1 for the kubelet and
	// kube-proxy, APIAddress for the pods (the `kubernetes` Service's endpoint).
	l, err := net.Listen("tcp", fmt.Sprintf("0.0.0.0:%d", c.APIPort))
	if err != nil {
		return err
	}
	go forward(l, func() (net.Conn, error) { return net.Dial("unix", c.path("api.sock")) })

	env := []string{"PATH=" + c.Bin + ":/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin"}
	var started []*exec.Cmd
	stopAll := func() {
		for i := len(started) - 1; i >= 0; i-- {
			p := started[i]
			_ = p.Process.Signal(syscall.SIGTERM)
			if !r.waitTimeout(p.Process.Pid, 20*time.Second) {
				_ = p.Process.Kill()
				r.waitTimeout(p.Process.Pid, 5*time.Second)
			}
		}
	}
	start := func(name string, args ...string) (*exec.Cmd, error) {
		cmd, err := startLogged(c, env, name, args...)
		if err == nil {
			started = append(started, cmd)
		}
		return cmd, err
	}
	fail := func(err error) error {
		stopAll()
		return err
	}

	containerd, err := start("containerd", "--config", c.path("etc/containerd.toml"))
	if err != nil {
		return fail(err)
	}
	deadline := time.Now().Add(60 * time.Second)
	for {
		if r.exited(containerd.Process.Pid) {
			return fail(fmt.Errorf("containerd exited; see %s", c.path("containerd.log")))
		}
		if r.run(env, c.path("ctr.log"), "ctr", "--address", "/run/containerd/containerd.sock", "version") == nil {
			break
		}
		if time.Now().After(deadline) {
			return fail(fmt.Errorf("containerd not serving after 60s; see %s", c.path("containerd.log")))
		}
		time.Sleep(200 * time.Millisecond)
	}
	for _, img := range c.Images {
		if err := r.run(env, c.path("ctr.log"), "ctr", "--address", "/run/containerd/containerd.sock",
			"-n", "k8s.io", "images", "import", img); err != nil {
			return fail(fmt.Errorf("import %s: %w; see %s", img, err, c.path("ctr.log")))
		}
	}
	logf("init: node %s: containerd serves; %d images imported", c.Name, len(c.Images))
	if _, err := start("kubelet",
		"--config", c.path("etc/kubelet.yaml"),
		"--kubeconfig", filepath.Join(filepath.Dir(c.Dir), "pki", c.Name+"-kubelet.kubeconfig"),
		"--hostname-override", c.Name,
		"--node-ip", c.NodeIP,
		"--v", "1"); err != nil {
		return fail(err)
	}
	if _, err := start("kube-proxy", "--config", c.path("etc/kube-proxy.yaml"), "--v", "1"); err != nil {
		return fail(err)
	}
	logf("init: node %s: kubelet and kube-proxy started", c.Name)
	for {
		select {
		case s := <-sigs:
			logf("init: node %s: %v: stopping kube-proxy, the kubelet and containerd", c.Name, s)
			stopAll()
			return nil
		case <-time.After(time.Second):
			for _, p := range started {
				if r.exited(p.Process.Pid) {
					name := filepath.Base(p.Path)
					return fail(fmt.Errorf("%s exited; see %s", name, c.path(name+".log")))
				}
			}
		}
	}
}

// mounts gives the node its own /proc (its PID namespace), /run, /var/lib and /var/log, and
// copies of the kernel settings the kubelet rewrites. Nothing propagates back to the host.
func mounts(c nodeConfig) error {
	if err := syscall.Mount("", "/", "", syscall.MS_REC|syscall.MS_PRIVATE, ""); err != nil {
		return fmt.Errorf("make / private: %w", err)
	}
	if err := syscall.Mount("proc", "/proc", "proc", syscall.MS_NOSUID|syscall.MS_NODEV|syscall.MS_NOEXEC, ""); err != nil {
		return fmt.Errorf("mount /proc: %w", err)
	}
	for _, m := range [][2]string{{"root/run", "/run"}, {"root/var/lib", "/var/lib"}, {"root/var/log", "/var/log"}} {
		if err := syscall.Mount(c.path(m[0]), m[1], "", syscall.MS_BIND, ""); err != nil {
			return fmt.Errorf("bind %s: %w", m[1], err)
		}
	}
	for _, t := range kernelTunables {
		if err := syscall.Mount(c.path("sysctl", filepath.Base(t)), filepath.Join("/proc/sys", t), "", syscall.MS_BIND, ""); err != nil {
			return fmt.Errorf("bind over /proc/sys/%s: %w", t, err)
		}
	}
	// Inside the node, mounts propagate as on a host (the kubelet's volume mounts reach the
	// containers): shared, in peer groups of the node's own.
	if err := syscall.Mount("", "/", "", syscall.MS_REC|syscall.MS_SHARED, ""); err != nil {
		return fmt.Errorf("make / shared: %w", err)
	}
	return nil
}

// network brings the node's loopback up with APIAddress on it, the node's end of the veth pair
// (eth0, which the supervisor moves in) up with the node's address, and turns on forwarding
// (the pods' bridge routes through the node).
func network(c nodeConfig, r *reaper) error {
	deadline := time.Now().Add(30 * time.Second)
	for r.run(nil, c.path("ip.log"), "ip", "link", "show", "eth0") != nil {
		if time.Now().After(deadline) {
			return fmt.Errorf("the supervisor did not move eth0 in within 30s")
		}
		time.Sleep(50 * time.Millisecond)
	}
	for _, args := range [][]string{
		{"link", "set", "lo", "up"},
		{"addr", "add", APIAddress + "/32", "dev", "lo"},
		{"addr", "add", c.NodeIP + "/30", "dev", "eth0"},
		{"link", "set", "eth0", "up"},
	} {
		if err := r.run(nil, c.path("ip.log"), "ip", args...); err != nil {
			return fmt.Errorf("ip %s: %w", strings.Join(args, " "), err)
		}
	}
	return os.WriteFile("/proc/sys/net/ipv4/ip_forward", []byte("1\n"), 0o644)
}

func startLogged(c nodeConfig, env []string, name string, args ...string) (*exec.Cmd, error) {
	logFile, err := os.OpenFile(c.path(name+".log"), os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o644)
	if err != nil {
		return nil, err
	}
	defer logFile.Close()
	path := filepath.Join(c.Bin, name)
	cmd := exec.Command(path, args...)
	cmd.Stdout = logFile
	cmd.Stderr = logFile
	cmd.Env = env
	if err := cmd.Start(); err != nil {
		return nil, fmt.Errorf("start %s: %w", name, err)
	}
	return cmd, nil
}

// reaper collects every child and orphan of PID 1. Commands are started and their exit read
// here, never with exec.Cmd.Wait (which would race it for the status).
type reaper struct {
	mu     sync.Mutex
	cond   *sync.Cond
	status map[int]syscall.WaitStatus
}

func newReaper() *reaper {
	r := &reaper{status: map[int]syscall.WaitStatus{}}
	r.cond = sync.NewCond(&r.mu)
	go func() {
		for {
			var ws syscall.WaitStatus
			pid, err := syscall.Wait4(-1, &ws, 0, nil)
			if err != nil {
				time.Sleep(100 * time.Millisecond)
				continue
			}
			r.mu.Lock()
			r.status[pid] = ws
			r.cond.Broadcast()
			r.mu.Unlock()
		}
	}()
	go func() {
		// Wake waiters regularly, so that waitTimeout notices its deadline.
		for range time.Tick(100 * time.Millisecond) {
			r.cond.Broadcast()
		}
	}()
	return r
}

func (r *reaper) exited(pid int) bool {
	r.mu.Lock()
	defer r.mu.Unlock()
	_, ok := r.status[pid]
	return ok
}

func (r *reaper) waitTimeout(pid int, d time.Duration) bool {
	deadline := time.Now().Add(d)
	r.mu.Lock()
	defer r.mu.Unlock()
	for {
		if _, ok := r.status[pid]; ok {
			return true
		}
		if time.Now().After(deadline) {
			return false
		}
		r.cond.Wait()
	}
}

// run runs a command to its end, its output appended to logPath.
func (r *reaper) run(env []string, logPath, name string, args ...string) error {
	logFile, err := os.OpenFile(logPath, os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o644)
	if err != nil {
		return err
	}
	defer logFile.Close()
	path := name
	if env != nil {
		if path, err = lookPath(env, name); err != nil {
			return fmt.Errorf("%s: not found in the node's PATH", name)
		}
	}
	cmd := exec.Command(path, args...)
	if env != nil {
		cmd.Env = env
	}
	cmd.Stdout = logFile
	cmd.Stderr = logFile
	if err := cmd.Start(); err != nil {
		return err
	}
	pid := cmd.Process.Pid
	r.waitTimeout(pid, time.Hour)
	r.mu.Lock()
	ws := r.status[pid]
	r.mu.Unlock()
	if ws.ExitStatus() != 0 {
		return fmt.Errorf("%s %s: exit %d", name, strings.Join(args, " "), ws.ExitStatus())
	}
	return nil
}

func lookPath(env []string, name string) (string, error) {
	for _, e := range env {
		if p, ok := strings.CutPrefix(e, "PATH="); ok {
			for _, d := range filepath.SplitList(p) {
				f := filepath.Join(d, name)
				if fi, err := os.Stat(f); err == nil && !fi.IsDir() {
					return f, nil
				}
			}
		}
	}
	return "", errors.New("not found")
}
