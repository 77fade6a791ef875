package main

// The one informerd every controller of a run shares, and what it reports of its memory.

import (
	"bufio"
	"context"
	"fmt"
	"net/http"
	"strconv"
	"strings"
	"time"

	"informerd.io/clients/go/crcache/internal/benchsidecar"
)

// sidecarSample is informerd's memory: jemalloc's allocated bytes and the resident set its
// /metrics reports (informerd_memory_allocated_bytes, informerd_memory_resident_bytes), and the
// peak resident set (VmHWM, reached during the initial sync).
type sidecarSample struct {
	Allocated uint64 `json:"allocated_bytes"`
	RSS       uint64 `json:"rss_bytes"`
	PeakRSS   uint64 `json:"peak_rss_bytes"`
}

// sidecar is the run's informerd (internal/benchsidecar) and what heapbench reads of it.
type sidecar struct {
	*benchsidecar.Sidecar
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
	s, err := benchsidecar.Start(ctx, bin, kubeconfig, dir, func(socket, metrics string) string {
		return sidecarConfig(socket, metrics, namespaces)
	}, timeout)
	if err != nil {
		return nil, err
	}
	return &sidecar{s}, nil
}

// sample reads the sidecar's memory figures from /metrics and its peak from /proc.
func (s *sidecar) sample() (sidecarSample, error) {
	resp, err := http.Get("http://" + s.Metrics + "/metrics")
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
	status, err := procStatus(s.Cmd.Process.Pid)
	if err != nil {
		return out, err
	}
	out.PeakRSS = status["VmHWM"]
	return out, nil
}
