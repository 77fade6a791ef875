package testenv

// The sidecar under test: a real informerd process, started, killed and restarted by a test.

import (
	"bytes"
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"sync"
	"syscall"
	"testing"
	"time"

	informerd "informerd.io/clients/go"
)

// Sidecar is one informerd process (and its restarts) serving a test on Socket.
type Sidecar struct {
	t      *testing.T
	e      *Env
	Dir    string
	Config string
	Socket string
	Log    *LockedBuffer
	mu     sync.Mutex
	cmd    *exec.Cmd
	exited chan struct{}
	runs   int
}

// NewSidecar writes the configuration made by mkConfig(socket), for Start to run; the sidecar
// is stopped when the test ends, and its log printed if the test failed.
func (e *Env) NewSidecar(t *testing.T, mkConfig func(socket string) string) *Sidecar {
	t.Helper()
	dir := t.TempDir()
	s := &Sidecar{t: t, e: e, Dir: dir, Socket: filepath.Join(dir, "informerd.sock"), Log: &LockedBuffer{}}
	s.Config = filepath.Join(dir, "informerd.yaml")
	if err := os.WriteFile(s.Config, []byte(mkConfig(s.Socket)), 0o644); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		s.Stop()
		if t.Failed() {
			t.Logf("informerd log:\n%s", s.Log.String())
		}
	})
	return s
}

// StartSidecar runs informerd with the configuration mkConfig(socket) until the test ends,
// waiting until Status reports every resource synced.
func (e *Env) StartSidecar(t *testing.T, mkConfig func(socket string) string) *Sidecar {
	t.Helper()
	s := e.NewSidecar(t, mkConfig)
	s.Start()
	s.WaitSynced()
	return s
}

// Start runs informerd (again, after Kill or Stop) on the same configuration and socket.
func (s *Sidecar) Start() {
	s.t.Helper()
	s.mu.Lock()
	defer s.mu.Unlock()
	s.runs++
	fmt.Fprintf(s.Log, "=== run %d\n", s.runs)
	cmd := exec.Command(s.e.Bin, "serve", "--config", s.Config, "--kubeconfig", s.e.Kubeconfig)
	cmd.Stdout, cmd.Stderr = s.Log, s.Log
	cmd.Env = append(os.Environ(), "RUST_LOG=info")
	if err := cmd.Start(); err != nil {
		s.t.Fatalf("start %s: %v", s.e.Bin, err)
	}
	exited := make(chan struct{})
	go func() { _ = cmd.Wait(); close(exited) }()
	s.cmd, s.exited = cmd, exited
}

// Client dials the sidecar's socket; it is closed when the test ends.
func (s *Sidecar) Client() *informerd.Client {
	return DialTarget(s.t, "unix://"+s.Socket)
}

// DialTarget dials an informerd target; the client is closed when the test ends.
func DialTarget(t *testing.T, target string) *informerd.Client {
	t.Helper()
	c, err := informerd.Dial(target)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = c.Close() })
	return c
}

// WaitSynced waits until Status reports every resource synced, failing the test if informerd
// exits first.
func (s *Sidecar) WaitSynced() {
	s.t.Helper()
	c, err := informerd.Dial("unix://" + s.Socket)
	if err != nil {
		s.t.Fatal(err)
	}
	defer c.Close()
	s.mu.Lock()
	exited := s.exited
	s.mu.Unlock()
	ctx, cancel := context.WithTimeout(context.Background(), SyncTimeout)
	defer cancel()
	done := make(chan error, 1)
	go func() { done <- c.WaitForSynced(ctx, syncPoll) }()
	select {
	case err := <-done:
		if err != nil {
			s.t.Fatalf("informerd did not report synced on %s: %v\nlog:\n%s", s.Socket, err, s.Log.String())
		}
	case <-exited:
		cancel()
		s.t.Fatalf("informerd exited before it synced\nlog:\n%s", s.Log.String())
	}
}

// Kill ends the sidecar at once (SIGKILL), as a crash would.
func (s *Sidecar) Kill() {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.cmd == nil {
		return
	}
	_ = s.cmd.Process.Signal(syscall.SIGKILL)
	<-s.exited
	s.cmd = nil
}

// Stop asks the sidecar to stop (SIGINT) and kills it if it has not within 10 s.
func (s *Sidecar) Stop() {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.cmd == nil {
		return
	}
	_ = s.cmd.Process.Signal(os.Interrupt)
	select {
	case <-s.exited:
	case <-time.After(10 * time.Second):
		_ = s.cmd.Process.Signal(syscall.SIGKILL)
		<-s.exited
	}
	s.cmd = nil
}

// LockedBuffer is a buffer the sidecar's stdout and stderr write to while a test reads it.
type LockedBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (l *LockedBuffer) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.Write(p)
}

func (l *LockedBuffer) String() string {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.String()
}
