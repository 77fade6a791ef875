package main

import (
	"errors"
	"fmt"
	"io"
	"net"
	"os"
	"os/exec"
	"os/signal"
	"path/filepath"
	"sort"
	"strconv"
	"strings"
	"syscall"
	"time"
)

// supervise is one node's process on the host: it serves the apiserver's port to the node
// through a Unix socket, starts the node's init in new mount, PID and network namespaces, stops
// it on SIGTERM and then removes the cgroups the kubelet made.
func supervise(configPath string) error {
	c, err := readNodeConfig(configPath)
	if err != nil {
		return err
	}
	sock := c.path("api.sock")
	_ = os.Remove(sock)
	l, err := net.Listen("unix", sock)
	if err != nil {
		return err
	}
	defer os.Remove(sock)
	go forward(l, func() (net.Conn, error) {
		return net.Dial("tcp", fmt.Sprintf("127.0.0.1:%d", c.APIPort))
	})

	self, err := os.Executable()
	if err != nil {
		return err
	}
	created, err := makeCgroups(c.CgroupRoot)
	defer func() {
		if err := removeCgroups(created); err != nil {
			logf("supervise: node %s: %v", c.Name, err)
		}
	}()
	if err != nil {
		return err
	}
	cmd := exec.Command(self, "init", configPath)
	cmd.Stdout = os.Stdout
	cmd.Stderr = os.Stderr
	cmd.SysProcAttr = &syscall.SysProcAttr{
		Cloneflags: syscall.CLONE_NEWNS | syscall.CLONE_NEWPID | syscall.CLONE_NEWNET,
		// The node does not outlive its supervisor.
		Pdeathsig: syscall.SIGKILL,
	}
	if err := cmd.Start(); err != nil {
		return fmt.Errorf("start the node's namespaces: %w", err)
	}
	logf("supervise: node %s: init is pid %d on the host", c.Name, cmd.Process.Pid)
	// The veth pair: its node end goes into the node's network namespace, where init names it
	// eth0; the pair goes away with that namespace.
	for _, args := range [][]string{
		{"link", "add", c.HostLink, "type", "veth", "peer", "name", "eth0", "netns", strconv.Itoa(cmd.Process.Pid)},
		{"addr", "add", c.HostIP + "/30", "dev", c.HostLink},
		{"link", "set", c.HostLink, "up"},
	} {
		if out, err := exec.Command("ip", args...).CombinedOutput(); err != nil {
			_ = cmd.Process.Kill()
			_ = cmd.Wait()
			return fmt.Errorf("ip %s: %v: %s", strings.Join(args, " "), err, out)
		}
	}
	done := make(chan error, 1)
	go func() { done <- cmd.Wait() }()
	sigs := make(chan os.Signal, 1)
	signal.Notify(sigs, syscall.SIGTERM, syscall.SIGINT)
	select {
	case err = <-done:
		logf("supervise: node %s: init exited: %v", c.Name, err)
	case s := <-sigs:
		logf("supervise: node %s: %v: stopping the node", c.Name, s)
		_ = cmd.Process.Signal(syscall.SIGTERM)
		select {
		case <-done:
		case <-time.After(45 * time.Second):
			logf("supervise: node %s: init still runs after 45s: SIGKILL", c.Name)
			_ = cmd.Process.Kill()
			<-done
		}
		err = nil
	}
	// Decision: the host's end of the veth is deleted here, before the supervisor exits (and so
	// before `node down` returns), rather than left to the kernel: it goes with the node's
	// network namespace, but the kernel tears namespaces down asynchronously, and a host
	// checked right after `node down` (the next `up`, a test) still saw it.
	if out, derr := exec.Command("ip", "link", "del", c.HostLink).CombinedOutput(); derr != nil &&
		!strings.Contains(string(out), "Cannot find device") {
		logf("supervise: node %s: ip link del %s: %v: %s", c.Name, c.HostLink, derr, out)
	}
	return err
}

// The kubelet's cgroupRoot: the same path in every hierarchy, which must exist before it starts.
// Decision: under this process's memory cgroup (the machine may run us in one with a limit),
// not at the hierarchies' root, so that the node's pods count against what we were given.
func memoryCgroup() (string, error) {
	b, err := os.ReadFile("/proc/self/cgroup")
	if err != nil {
		return "", err
	}
	for _, line := range strings.Split(strings.TrimSpace(string(b)), "\n") {
		f := strings.SplitN(line, ":", 3)
		if len(f) == 3 {
			for _, ctl := range strings.Split(f[1], ",") {
				if ctl == "memory" {
					return f[2], nil
				}
			}
		}
	}
	return "/", nil // cgroup v2: one hierarchy
}

func hierarchies() []string {
	var hs []string
	matches, _ := filepath.Glob("/sys/fs/cgroup/*")
	for _, h := range matches {
		if fi, err := os.Lstat(h); err == nil && fi.IsDir() {
			hs = append(hs, h) // not cpu -> cpu,cpuacct and the like
		}
	}
	return hs
}

// makeCgroups creates root in every hierarchy and returns the directories it created, parents
// first. A new cpuset gets its parent's CPUs and memory nodes (cgroup v1 leaves them empty).
func makeCgroups(root string) ([]string, error) {
	var created []string
	for _, h := range hierarchies() {
		dir := h
		for _, part := range strings.Split(strings.Trim(root, "/"), "/") {
			parent := dir
			dir = filepath.Join(dir, part)
			if _, err := os.Stat(dir); err == nil {
				continue
			}
			if err := os.Mkdir(dir, 0o755); err != nil {
				return created, err
			}
			created = append(created, dir)
			for _, f := range []string{"cpuset.cpus", "cpuset.mems"} {
				if b, err := os.ReadFile(filepath.Join(parent, f)); err == nil {
					_ = os.WriteFile(filepath.Join(dir, f), b, 0o644)
				}
			}
		}
	}
	return created, nil
}

// removeCgroups removes the directories makeCgroups created and every cgroup the kubelet made
// under them, deepest first. The processes in them were killed with the node's PID namespace;
// their exit may take a moment to reach the cgroups, so a busy directory is retried.
func removeCgroups(created []string) error {
	var dirs []string
	for i := len(created) - 1; i >= 0; i-- {
		var sub []string
		_ = filepath.WalkDir(created[i], func(path string, d os.DirEntry, err error) error {
			if err == nil && d.IsDir() && path != created[i] {
				sub = append(sub, path)
			}
			return nil
		})
		sort.Slice(sub, func(a, b int) bool { return strings.Count(sub[a], "/") > strings.Count(sub[b], "/") })
		dirs = append(append(dirs, sub...), created[i])
	}
	deadline := time.Now().Add(30 * time.Second)
	var left []string
	for _, d := range dirs {
		for {
			err := syscall.Rmdir(d)
			if err == nil || errors.Is(err, syscall.ENOENT) {
				break
			}
			if time.Now().After(deadline) {
				left = append(left, fmt.Sprintf("%s: %v", d, err))
				break
			}
			time.Sleep(100 * time.Millisecond)
		}
	}
	if len(left) > 0 {
		return fmt.Errorf("cgroups left behind: %s", strings.Join(left, "; "))
	}
	return nil
}

// forward copies each connection accepted on l to and from a new one from dial.
func forward(l net.Listener, dial func() (net.Conn, error)) {
	for {
		in, err := l.Accept()
		if err != nil {
			return
		}
		go func() {
			defer in.Close()
			out, err := dial()
			if err != nil {
				return
			}
			defer out.Close()
			go func() {
				_, _ = io.Copy(out, in)
				closeWrite(out)
			}()
			_, _ = io.Copy(in, out)
			closeWrite(in)
		}()
	}
}

func closeWrite(c net.Conn) {
	if cw, ok := c.(interface{ CloseWrite() error }); ok {
		_ = cw.CloseWrite()
	}
}

func logf(format string, args ...any) {
	fmt.Fprintf(os.Stderr, "%s %s\n", time.Now().UTC().Format(time.RFC3339), fmt.Sprintf(format, args...))
}
