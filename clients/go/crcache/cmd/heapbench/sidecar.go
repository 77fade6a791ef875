package main

// The one informerd every controller of a run shares, and what it reports of its memory.

import (
	"bufio"
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

// sidecarSample is informerd's memory: jemalloc's allocated bytes and the resident set its
// /metrics reports (informerd_memory_allocated_bytes, informerd_memory_resident_bytes), and the
// peak resident set (VmHWM, reached during the initial sync).
type sidecarSample struct {
	Allocated uint64 `json:"allocated_bytes"`
	RSS       uint64 `json:"rss_bytes"`
	PeakRSS   uint64 `json:"peak_rss_bytes"`
}

type sidecar struct {
	cmd     *exec.Cmd
	cancel  context.CancelFunc // stops it: SIGINT, SIGKILL after 10 s (exec's Cancel, WaitDelay)
	exited  chan struct{}
	Socket  string
	metrics string // host:port
	logPath string
}

// sidecarConfig caches what labelctl's controller reads, with a field mask of what it reads:
// pods' metadata and spec.nodeName (indexed, as crcache's IndexField requires, and the label
// index, which labelctl's List of a Deployment's pods by its selector uses), Deployments'
// metadata and selector, nodes' metadata. namespaces empty: cluster-wide, as the default cache.
func sidecarConfig(socket, metrics string, namespaces []string) string {
	scope := ""
	if len(namespaces) > 0 {
		scope = fmt.Sprintf("  namespaces: [%s]\n", strings.Join(namespaces, ", "))
	}
	return fmt.Sprintf(`apiVersion: informerd.io/v1alpha1
kind: Config
server:
  socket: %s
  metrics: %s
resources:
- name: pods
  apiVersion: v1
  kind: Pod
%s  transform:
    keep: [metadata, spec.nodeName]
    drop: [metadata.managedFields]
  indexes:
  - name: node
    path: spec.nodeName
  - name: labels
    labels: true
- name: deployments
  apiVersion: apps/v1
  kind: Deployment
%s  transform:
    keep: [metadata, spec.selector]
    drop: [metadata.managedFields]
- name: nodes
  apiVersion: v1
  kind: Node
  transform:
    keep: [metadata]
    drop: [metadata.managedFields]
`, socket, metrics, scope, scope)
}

// startSidecar runs informerd in dir and waits until /readyz says every resource has synced.
func startSidecar(ctx context.Context, bin, kubeconfig, dir string, namespaces []string, timeout time.Duration) (*sidecar, error) {
	port, err := freePort()
	if err != nil {
		return nil, err
	}
	s := &sidecar{Socket: filepath.Join(dir, "informerd.sock"), metrics: fmt.Sprintf("127.0.0.1:%d", port),
		logPath: filepath.Join(dir, "informerd.log"), exited: make(chan struct{})}
	config := filepath.Join(dir, "informerd.yaml")
	_ = os.Remove(s.Socket)
	if err := os.WriteFile(config, []byte(sidecarConfig(s.Socket, s.metrics, namespaces)), 0o644); err != nil {
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
	s.cmd.Env = append(os.Environ(), "RUST_LOG=info")
	if err := s.cmd.Start(); err != nil {
		cancel()
		return nil, fmt.Errorf("start %s: %w", bin, err)
	}
	go func() { _ = s.cmd.Wait(); close(s.exited) }()
	deadline := time.Now().Add(timeout)
	for {
		resp, err := http.Get("http://" + s.metrics + "/readyz")
		if err == nil {
			resp.Body.Close()
			if resp.StatusCode == http.StatusOK {
				return s, nil
			}
		}
		select {
		case <-s.exited:
			return nil, fmt.Errorf("informerd exited before it synced; log: %s", s.logPath)
		case <-ctx.Done():
			s.stop()
			return nil, ctx.Err()
		case <-time.After(200 * time.Millisecond):
		}
		if time.Now().After(deadline) {
			s.stop()
			return nil, fmt.Errorf("informerd not ready after %s; log: %s", timeout, s.logPath)
		}
	}
}

// sample reads the sidecar's memory figures from /metrics and its peak from /proc.
func (s *sidecar) sample() (sidecarSample, error) {
	resp, err := http.Get("http://" + s.metrics + "/metrics")
	if err != nil {
		return sidecarSample{}, err
	}
	defer resp.Body.Close()
	var out sidecarSample
	// Decision: two unlabelled gauges are read off the text lines; Go's expfmt parses the
	// Prometheus text format, not the OpenMetrics one the sidecar serves (`# EOF`, `_total`
	// rules), and tests/metrics.rs already checks the format with the Prometheus project's parser.
	want := map[string]*uint64{"informerd_memory_allocated_bytes": &out.Allocated, "informerd_memory_resident_bytes": &out.RSS}
	sc := bufio.NewScanner(resp.Body)
	for sc.Scan() {
		name, value, ok := strings.Cut(sc.Text(), " ")
		if dst := want[name]; ok && dst != nil {
			v, err := strconv.ParseFloat(strings.TrimSpace(value), 64)
			if err != nil {
				return out, fmt.Errorf("/metrics: %s: %w", name, err)
			}
			*dst = uint64(v)
			delete(want, name)
		}
	}
	if err := sc.Err(); err != nil {
		return out, err
	}
	if len(want) > 0 {
		return out, fmt.Errorf("/metrics lacks %v", want)
	}
	status, err := procStatus(s.cmd.Process.Pid)
	if err != nil {
		return out, err
	}
	out.PeakRSS = status["VmHWM"]
	return out, nil
}

// stop asks informerd to stop (SIGINT) and waits; exec kills it after 10 s.
func (s *sidecar) stop() {
	s.cancel()
	<-s.exited
}

// freePort is a loopback TCP port nothing listened on a moment ago.
func freePort() (int, error) {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return 0, err
	}
	defer l.Close()
	return l.Addr().(*net.TCPAddr).Port, nil
}
