package main

// What the calls are made against: the seeder's pods in one namespace of the benchmark's own, and
// one informerd caching them with the controller profile.
//
// The process is internal/benchsidecar's, as cmd/heapbench's is; the configuration is this
// benchmark's own (serving's controller profile, one namespace), and it reads the CPU time.

import (
	"context"
	"fmt"
	"os"
	"os/exec"
	"strconv"
	"strings"
	"time"

	"informerd.io/clients/go/crcache/internal/benchsidecar"
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

// sidecar is the run's informerd (internal/benchsidecar) and what callbench reads of it.
type sidecar struct {
	*benchsidecar.Sidecar
}

// startSidecar runs informerd in dir and waits until /readyz says it has synced.
func startSidecar(ctx context.Context, bin, kubeconfig, dir, namespace string, timeout time.Duration) (*sidecar, error) {
	s, err := benchsidecar.Start(ctx, bin, kubeconfig, dir, func(socket, metrics string) string {
		return sidecarConfig(socket, metrics, namespace)
	}, timeout)
	if err != nil {
		return nil, err
	}
	return &sidecar{s}, nil
}

// cpuTicks is the sidecar's CPU time so far (utime + stime of /proc/PID/stat), in clock ticks.
func (s *sidecar) cpuTicks() (uint64, error) {
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", s.Cmd.Process.Pid))
	if err != nil {
		return 0, err
	}
	// The command name, field 2, is in parentheses and may hold spaces: count from after it.
	rest := string(b[strings.LastIndexByte(string(b), ')')+2:])
	fields := strings.Fields(rest)
	if len(fields) < 13 {
		return 0, fmt.Errorf("/proc/%d/stat: %d fields after the name", s.Cmd.Process.Pid, len(fields))
	}
	utime, err1 := strconv.ParseUint(fields[11], 10, 64)
	stime, err2 := strconv.ParseUint(fields[12], 10, 64)
	if err1 != nil || err2 != nil {
		return 0, fmt.Errorf("/proc/%d/stat: utime %q, stime %q", s.Cmd.Process.Pid, fields[11], fields[12])
	}
	return utime + stime, nil
}
