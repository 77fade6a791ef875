package main

// The results: a Markdown report (printed, and OUT.md) and the same figures as JSON (OUT.json).

import (
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"strings"
)

// row is one kind of call's figures.
type row struct {
	Name           string  `json:"name"`
	Short          string  `json:"short"`
	Calls          int     `json:"calls"`
	P50            float64 `json:"p50_us"`
	P90            float64 `json:"p90_us"`
	P99            float64 `json:"p99_us"`
	Max            float64 `json:"max_us"`
	Mean           float64 `json:"mean_us"`
	ObjectsPerCall float64 `json:"objects_per_call"`
	CPUPerCall     float64 `json:"cpu_us_per_call"`         // this (the Go) process
	SidecarCPU     float64 `json:"sidecar_cpu_us_per_call"` // in ticks of 10 ms over the kind's calls
	AllocsPerCall  float64 `json:"allocs_per_call"`
	KiBPerCall     float64 `json:"alloc_kib_per_call"`
	Shares         []share `json:"cpu_categories"`
	Top            []share `json:"top_functions"`
	Profile        string  `json:"-"`
}

type report struct {
	Command    string  `json:"command"`
	Pods       int     `json:"pods"`
	Namespace  string  `json:"namespace"`
	Apps       int     `json:"apps_of_5_pods"`
	JSONBytes  float64 `json:"json_bytes_per_pod"`
	Profile    string  `json:"sidecar_profile"`
	CPUs       int     `json:"cpus"`
	LoadBefore string  `json:"load_before"`
	LoadAfter  string  `json:"load_after"`
	Seconds    float64 `json:"seconds_per_kind"`
	Go         string  `json:"go"`
	Rows       []row   `json:"calls"`
}

func (r *report) markdown() string {
	var b strings.Builder
	fmt.Fprintf(&b, "# The per-call cost of a Go controller's reads\n\n`%s` (`clients/go/crcache/cmd/callbench`).\n\n", r.Command)
	fmt.Fprintf(&b, "A release informerd over %d of the seeder's pods in one namespace (%s; %d Deployments of exactly 5 pods), "+
		"%s; cached pods %.0f bytes of JSON on average. One connection, one caller calling back to back; each kind %.0f s "+
		"in %d slices alternating with the others, each slice under a CPU profile; %d CPUs shared with the control plane; "+
		"load average %s before, %s after; %s. A Get reads a random pod, a List the pods of a random one of those "+
		"Deployments by its selector (`app.kubernetes.io/name`, `app.kubernetes.io/instance`), 5 pods.\n\n",
		r.Pods, r.Namespace, r.Apps, r.Profile, r.JSONBytes, r.Seconds, slices, r.CPUs, r.LoadBefore, r.LoadAfter, r.Go)
	empty := r.Rows[0].P50
	b.WriteString("| call | calls | p50 µs | p90 µs | p99 µs | max µs | p50 ÷ empty | Go CPU µs/call | sidecar CPU µs/call | Go allocs/call | Go KiB allocated/call | objects/call |\n")
	b.WriteString("|:--|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|\n")
	for _, x := range r.Rows {
		fmt.Fprintf(&b, "| %s | %d | %.0f | %.0f | %.0f | %.0f | %.2f | %.1f | %.0f | %.0f | %.1f | %.1f |\n",
			x.Name, x.Calls, x.P50, x.P90, x.P99, x.Max, x.P50/empty, x.CPUPerCall, x.SidecarCPU, x.AllocsPerCall,
			x.KiBPerCall, x.ObjectsPerCall)
	}
	b.WriteString("\nThe sidecar's CPU is read from /proc in ticks of 10 ms over each kind's calls; this process's from getrusage, " +
		"CPU profiler included.\n\n")
	b.WriteString(r.categoryTable())
	b.WriteString("\n### Top functions by own CPU (share of the kind's samples)\n\n")
	for _, x := range r.Rows {
		var parts []string
		for _, f := range x.Top {
			parts = append(parts, fmt.Sprintf("`%s` %.0f %%", f.Name, 100*f.Share))
		}
		fmt.Fprintf(&b, "- %s: %s\n", x.Short, strings.Join(parts, ", "))
	}
	return b.String()
}

// categoryTable is the Go process's CPU per call, split by the categories of profile.go.
func (r *report) categoryTable() string {
	var b strings.Builder
	b.WriteString("### Where the Go process's CPU goes, µs per call\n\n" +
		"Each kind's CPU per call split by its CPU profile's samples (`profile.go` sorts each sample into the first " +
		"category one of its stack's functions belongs to, in the table's order).\n\n| |")
	for _, x := range r.Rows {
		fmt.Fprintf(&b, " %s |", x.Short)
	}
	b.WriteString("\n|:--|" + strings.Repeat("---:|", len(r.Rows)) + "\n")
	for _, c := range append(categories, category{name: otherCategory}) {
		var cells []string
		any := false
		for _, x := range r.Rows {
			v := 0.0
			for _, s := range x.Shares {
				if s.Name == c.name {
					v = s.Share * x.CPUPerCall
				}
			}
			any = any || v >= 0.5
			cells = append(cells, fmt.Sprintf("%.0f", v))
		}
		if any {
			fmt.Fprintf(&b, "| %s | %s |\n", c.name, strings.Join(cells, " | "))
		}
	}
	b.WriteString("| **all** |")
	for _, x := range r.Rows {
		fmt.Fprintf(&b, " **%.0f** |", x.CPUPerCall)
	}
	b.WriteString("\n")
	return b.String()
}

// write saves OUT.md and OUT.json.
func (r *report) write(out, md string) error {
	if err := os.MkdirAll(filepath.Dir(out), 0o755); err != nil {
		return err
	}
	if err := os.WriteFile(out+".md", []byte(md), 0o644); err != nil {
		return err
	}
	j, err := json.MarshalIndent(r, "", "  ")
	if err != nil {
		return err
	}
	return os.WriteFile(out+".json", append(j, '\n'), 0o644)
}
