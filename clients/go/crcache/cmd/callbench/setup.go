package main

// What the calls are made against: the seeder's pods in one namespace of the benchmark's own, and
// one informerd caching them with the controller profile.
//
// Decision: not cmd/heapbench's sidecar code, which runs another configuration (heapbench's
// controller's mask, every namespace) and reads memory; this one reads the sidecar's CPU time.

import (
	"context"
	"fmt"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"time"
)

// seedPods creates that many of the seeder's realistic pods in the namespace PREFIX-0.
func seedPods(ctx context.Context, seed, kubeconfig, prefix string, pods int) error {
	cmd := exec.CommandContext(ctx, seed, "pods", "--kubeconfig", kubeconfig, "--pods", strconv.Itoa(pods),
		"--namespaces", "1", "--prefix", prefix)
	cmd.Stdout, cmd.Stderr = os.Stderr, os.Stderr
	if err := cmd.Run(); err != nil {
		return fmt.Errorf("seed %d pods into %s-0: %w", pods, prefix, err)
	}
	return nil
}

// cleanNamespace deletes what seedPods created; a failure is reported, not returned (the
// results are written already).
func cleanNamespace(seed, kubeconfig, prefix string) {
	cmd := exec.Command(seed, "clean", "--kubeconfig", kubeconfig, "--prefix", prefix)
	cmd.Stdout, cmd.Stderr = os.Stderr, os.Stderr
	if err := cmd.Run(); err != nil {
		fmt.Fprintf(os.Stderr, "callbench: seed clean --prefix %s: %v (delete the namespace %s-0 by hand)\n", prefix, err, prefix)
	}
}

// profileDescription is what the report says of the sidecar's configuration.
const profileDescription = "the controller profile of `benches/serving.rs` (keep metadata, spec.nodeName, " +
	"status.phase, status.conditions, status.podIP; drop metadata.managedFields), an index `node` on " +
	"spec.nodeName and the label index"

// sidecarConfig mirrors benches/serving.rs's sidecar (transform::CONTROLLER_KEEP and
// CONTROLLER_DROP, the index `node`, the label index) over one namespace.
func sidecarConfig(socket, metrics, namespace string) string {
	return fmt.Sprintf(`apiVersion: informerd.io/v1alpha1
kind: Config
server:
  socket: %s
  metrics: %s
resources:
- name: pods
  apiVersion: v1
  kind: Pod
  namespaces: [%s]
  transform:
    keep: [metadata, spec.nodeName, status.phase, status.conditions, status.podIP]
    drop: [metadata.managedFields]
  indexes:
  - name: node
    path: spec.nodeName
  - name: labels
    labels: true
`, socket, metrics, namespace)
}

type sidecar struct {
	cmd     *exec.Cmd
	cancel  context.CancelFunc
	exited  chan struct{}
	socket  string
	logPath string
}

// startSidecar runs informerd in dir and waits until /readyz says it has synced.
func startSidecar(ctx context.Context, bin, kubeconfig, dir, namespace string, timeout time.Duration) (*sidecar, error) {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return nil, err
	}
	metrics := l.Addr().String()
	l.Close()
	s := &sidecar{socket: filepath.Join(dir, "informerd.sock"), logPath: filepath.Join(dir, "informerd.log"),
		exited: make(chan struct{})}
	_ = os.Remove(s.socket)
	config := filepath.Join(dir, "informerd.yaml")
	if err := os.WriteFile(config, []byte(sidecarConfig(s.socket, metrics, namespace)), 0o644); err != nil {
		return nil, err
	}
	logFile, err := os.Create(s.logPath)
	if err != nil {
		return nil, err
	}
	defer logFile.Close()
	cmdCtx, cancel := context.WithCancel(context.Background())
	s.cancel = cancel
	s.cmd = exec.CommandContext(cmdCtx, bin, "serve", "--config", config, "--kubeconfig", kubeconfig)
	s.cmd.Cancel = func() error { return s.cmd.Process.Signal(os.Interrupt) }
	s.cmd.WaitDelay = 10 * time.Second
	s.cmd.Stdout, s.cmd.Stderr = logFile, logFile
	if err := s.cmd.Start(); err != nil {
		cancel()
		return nil, fmt.Errorf("start %s: %w", bin, err)
	}
	go func() { _ = s.cmd.Wait(); close(s.exited) }()
	deadline := time.Now().Add(timeout)
	for {
		if resp, err := http.Get("http://" + metrics + "/readyz"); err == nil {
			resp.Body.Close()
			if resp.StatusCode == http.StatusOK {
				return s, nil
			}
		}
		select {
		case <-s.exited:
			return nil, fmt.Errorf("informerd exited before it synced; its log: %s", s.logPath)
		case <-ctx.Done():
			s.stop()
			return nil, ctx.Err()
		case <-time.After(200 * time.Millisecond):
		}
		if time.Now().After(deadline) {
			s.stop()
			return nil, fmt.Errorf("informerd not ready after %s; its log: %s", timeout, s.logPath)
		}
	}
}

// cpuTicks is the sidecar's CPU time so far (utime + stime of /proc/PID/stat), in clock ticks.
func (s *sidecar) cpuTicks() (uint64, error) {
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", s.cmd.Process.Pid))
	if err != nil {
		return 0, err
	}
	// The command name, field 2, is in parentheses and may hold spaces: count from after it.
	rest := string(b[strings.LastIndexByte(string(b), ')')+2:])
	fields := strings.Fields(rest)
	if len(fields) < 13 {
		return 0, fmt.Errorf("/proc/%d/stat: %d fields after the name", s.cmd.Process.Pid, len(fields))
	}
	utime, err1 := strconv.ParseUint(fields[11], 10, 64)
	stime, err2 := strconv.ParseUint(fields[12], 10, 64)
	if err1 != nil || err2 != nil {
		return 0, fmt.Errorf("/proc/%d/stat: utime %q, stime %q", s.cmd.Process.Pid, fields[11], fields[12])
	}
	return utime + stime, nil
}

// stop asks informerd to stop (SIGINT) and waits; exec kills it after 10 s.
func (s *sidecar) stop() {
	s.cancel()
	<-s.exited
}
