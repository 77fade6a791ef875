// Package benchsidecar runs the one informerd a benchmark of crcache's (cmd/heapbench,
// cmd/callbench) measures against: written its configuration, started, waited for until
// /readyz says every resource has synced, stopped. Each benchmark keeps its own configuration
// and what it reads of the process (memory, CPU time).
package benchsidecar

import (
	"context"
	"fmt"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"time"
)

// Sidecar is a running informerd.
type Sidecar struct {
	Cmd     *exec.Cmd
	Socket  string // the Unix socket's path
	Metrics string // host:port of /metrics and /readyz
	LogPath string
	cancel  context.CancelFunc // stops it: SIGINT, SIGKILL after 10 s (exec's Cancel, WaitDelay)
	exited  chan struct{}
}

// Start writes config(socket, metrics) to dir/informerd.yaml, runs `informerd serve` with it
// (its log in dir/informerd.log) and waits until /readyz says it has synced, it exits, ctx ends
// or timeout passes.
func Start(ctx context.Context, bin, kubeconfig, dir string, config func(socket, metrics string) string, timeout time.Duration) (*Sidecar, error) {
	port, err := freePort()
	if err != nil {
		return nil, err
	}
	s := &Sidecar{Socket: filepath.Join(dir, "informerd.sock"), Metrics: fmt.Sprintf("127.0.0.1:%d", port),
		LogPath: filepath.Join(dir, "informerd.log"), exited: make(chan struct{})}
	_ = os.Remove(s.Socket)
	configPath := filepath.Join(dir, "informerd.yaml")
	if err := os.WriteFile(configPath, []byte(config(s.Socket, s.Metrics)), 0o644); err != nil {
		return nil, err
	}
	logFile, err := os.Create(s.LogPath)
	if err != nil {
		return nil, err
	}
	defer logFile.Close()
	cmdCtx, cancel := context.WithCancel(context.Background())
	s.cancel = cancel
	s.Cmd = exec.CommandContext(cmdCtx, bin, "serve", "--config", configPath, "--kubeconfig", kubeconfig)
	s.Cmd.Cancel = func() error { return s.Cmd.Process.Signal(os.Interrupt) }
	s.Cmd.WaitDelay = 10 * time.Second
	s.Cmd.Stdout, s.Cmd.Stderr = logFile, logFile
	s.Cmd.Env = append(os.Environ(), "RUST_LOG=info")
	if err := s.Cmd.Start(); err != nil {
		cancel()
		return nil, fmt.Errorf("start %s: %w", bin, err)
	}
	go func() { _ = s.Cmd.Wait(); close(s.exited) }()
	if err := s.waitReady(ctx, timeout); err != nil {
		return nil, err
	}
	return s, nil
}

// waitReady polls /readyz until it answers 200; on any other end it stops the sidecar.
func (s *Sidecar) waitReady(ctx context.Context, timeout time.Duration) error {
	deadline := time.Now().Add(timeout)
	for {
		if resp, err := http.Get("http://" + s.Metrics + "/readyz"); err == nil {
			resp.Body.Close()
			if resp.StatusCode == http.StatusOK {
				return nil
			}
		}
		select {
		case <-s.exited:
			return fmt.Errorf("informerd exited before it synced; its log: %s", s.LogPath)
		case <-ctx.Done():
			s.Stop()
			return ctx.Err()
		case <-time.After(200 * time.Millisecond):
		}
		if time.Now().After(deadline) {
			s.Stop()
			return fmt.Errorf("informerd not ready after %s; its log: %s", timeout, s.LogPath)
		}
	}
}

// Stop asks informerd to stop (SIGINT) and waits; exec kills it after 10 s.
func (s *Sidecar) Stop() {
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
