package main

// The kube-rs rows: clients/rust's controller_store benchmark run over the same pods, after
// the controller-runtime processes of each pod count. It measures what a kube-rs controller's
// process holds (a reflector store fed by kube-rs's watchers and by informerd's), and writes
// its rows as JSON (BENCH_JSON), which land in OUT.md beside the Go figures and in
// OUT-kube-rs.json.
//
// Decision: the Rust benchmark stays a cargo bench of its own crate (run alone it seeds its
// own pods); heapbench only points it at this control plane (INFORMERD_CLUSTER_DIR,
// BENCH_ALL_NAMESPACES=1: every pod of the cluster, one cluster-wide watch per store).

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
)

// kubersRun is what controller_store writes to BENCH_JSON for one pod count.
type kubersRun struct {
	Pods             int         `json:"pods"`
	SidecarAllocated uint64      `json:"sidecar_allocated_bytes"`
	Rows             []kubersRow `json:"rows"`
}

// kubersRow is one store and what feeds it.
type kubersRow struct {
	Feed        string  `json:"feed"`
	Bytes       uint64  `json:"bytes"`
	BytesPerPod float64 `json:"bytes_per_pod"`
}

// runKubers runs command (a shell command line, e.g. `cargo bench -p informerd-client --bench
// controller_store`) over the control plane in clusterDir and reads its rows.
func runKubers(ctx context.Context, command, clusterDir, dir string, pods int) (kubersRun, error) {
	out := filepath.Join(dir, fmt.Sprintf("kube-rs-%d.json", pods))
	_ = os.Remove(out)
	cmd := exec.CommandContext(ctx, "sh", "-c", command)
	cmd.Env = append(os.Environ(), "BENCH_ALL_NAMESPACES=1", "INFORMERD_CLUSTER_DIR="+clusterDir, "BENCH_JSON="+out)
	cmd.Stdout, cmd.Stderr = os.Stderr, os.Stderr
	if err := cmd.Run(); err != nil {
		return kubersRun{}, fmt.Errorf("the kube-rs benchmark (%s): %w", command, err)
	}
	js, err := os.ReadFile(out)
	if err != nil {
		return kubersRun{}, fmt.Errorf("the kube-rs benchmark wrote no BENCH_JSON: %w", err)
	}
	var r kubersRun
	if err := json.Unmarshal(js, &r); err != nil {
		return kubersRun{}, fmt.Errorf("%s: %w", out, err)
	}
	if r.Pods != pods {
		return r, fmt.Errorf("the kube-rs benchmark measured %d pods, want %d", r.Pods, pods)
	}
	return r, nil
}

// kubersResults are OUT-kube-rs.json's runs, but those of the pod counts in replace.
func kubersResults(out string, replace []int) ([]kubersRun, error) {
	js, err := os.ReadFile(out + "-kube-rs.json")
	if errors.Is(err, os.ErrNotExist) {
		return nil, nil
	}
	if err != nil {
		return nil, err
	}
	var rs []kubersRun
	if err := json.Unmarshal(js, &rs); err != nil {
		return nil, fmt.Errorf("%s-kube-rs.json: %w", out, err)
	}
	return slices.DeleteFunc(rs, func(r kubersRun) bool { return slices.Contains(replace, r.Pods) }), nil
}

func writeKubers(out string, rs []kubersRun) error {
	js, err := json.MarshalIndent(rs, "", "  ")
	if err != nil {
		return err
	}
	return os.WriteFile(out+"-kube-rs.json", append(js, '\n'), 0o644)
}

// kubersTable has one row per pod count and feed.
func kubersTable(rs []kubersRun) string {
	if len(rs) == 0 {
		return ""
	}
	var b strings.Builder
	b.WriteString("| pods | the controller's store fed by | bytes | bytes/pod | the sidecar, allocated |\n|---:|---|---:|---:|---:|\n")
	for _, r := range rs {
		for _, row := range r.Rows {
			fmt.Fprintf(&b, "| %d | %s | %d | %.0f | %s |\n", r.Pods, row.Feed, row.Bytes, row.BytesPerPod, mib(r.SidecarAllocated))
		}
	}
	return b.String()
}
