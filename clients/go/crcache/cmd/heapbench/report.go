package main

// The results: a Markdown table (printed and OUT.md) and every sample (OUT.json).

import (
	"cmp"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"slices"
	"strings"
	"time"
)

// writeResults rewrites OUT.md, OUT.json and OUT-kube-rs.json with what has been measured
// so far.
func writeResults(out string, rs []result, kubers []kubersRun) error {
	js, err := json.MarshalIndent(rs, "", "  ")
	if err != nil {
		return err
	}
	if err := os.WriteFile(out+".json", append(js, '\n'), 0o644); err != nil {
		return err
	}
	if err := writeKubers(out, kubers); err != nil {
		return err
	}
	md := fmt.Sprintf(`# Controller heap: own cache against the informerd adapter

`+"`make bench-adapters`"+` (clients/go/crcache/cmd/heapbench), %s, a private control plane.
labelctl's controller (For Deployments, Owns pods, Watches nodes, an index on spec.nodeName)
in k processes at once; each waits until its caches have synced and it has reconciled every
Deployment once (its first full pass over what exists), holds a few seconds, forces two
collections and reports Go's live heap (/gc/heap/live) and its resident set; "reconciles" is
the sum over the k processes at that moment (at least k × the Deployments). "default" is
controller-runtime's cache unconfigured, "default-strip" the same with
cache.TransformStripManagedFields, "informerd" crcache over one sidecar all k share (pods kept as metadata and spec.nodeName, with the label index). Figures are the sum over the k
processes; the sidecar's are jemalloc's allocated bytes and its RSS while the k were connected.

`, time.Now().UTC().Format("2006-01-02"))
	md += table(rs) + `
The first full pass (seconds from the manager's creation until every Deployment was
reconciled once; the slowest of the k processes), its sync (until the caches synced), and the
reconcile phase (first pass minus sync: the reconciles, each a Get and a List by label
selector, through the socket for informerd):

` + passTable(rs)
	if len(kubers) > 0 {
		md += `
## kube-rs: what a controller's process holds, by what feeds its store

clients/rust's controller_store benchmark over the same pods (` + "`heapbench run --kube-rs`" + `, which ` +
			"`make bench-adapters`" + ` passes): jemalloc's allocated bytes of the controller process above its
baseline once every store is ready, one cluster-wide watch per store; the sidecar's allocated
bytes while it served them.

` + kubersTable(kubers)
	}
	if err := os.WriteFile(out+".md", []byte(md), 0o644); err != nil {
		return err
	}
	return nil
}

// earlierResults are the rows of OUT.json whose pod count this run does not measure.
func earlierResults(out string, pods []int) ([]result, error) {
	js, err := os.ReadFile(out + ".json")
	if errors.Is(err, os.ErrNotExist) {
		return nil, nil
	}
	if err != nil {
		return nil, err
	}
	var rs []result
	if err := json.Unmarshal(js, &rs); err != nil {
		return nil, fmt.Errorf("%s.json: %w", out, err)
	}
	return slices.DeleteFunc(rs, func(r result) bool { return slices.Contains(pods, r.Pods) }), nil
}

// table has one row per pod count and controller count, the caches side by side.
func table(rs []result) string {
	keys, byKey, caches := grouped(rs)
	var b strings.Builder
	b.WriteString("| pods | controllers |")
	for _, c := range caches {
		fmt.Fprintf(&b, " %s: heap (RSS), reconciles |", c)
	}
	b.WriteString(" informerd sidecar: allocated (RSS) | informerd processes + sidecar, RSS |\n|---:|---:|")
	b.WriteString(strings.Repeat("---:|", len(caches)+2) + "\n")
	for _, k := range keys {
		fmt.Fprintf(&b, "| %d | %d |", k.pods, k.controllers)
		for _, c := range caches {
			r, ok := byKey[k][c]
			if !ok {
				b.WriteString(" |")
				continue
			}
			fmt.Fprintf(&b, " %s (%s), %d |", mib(r.heap()), mib(r.rss()), r.reconciles())
		}
		if r, ok := byKey[k][cacheInformerd]; ok && r.Sidecar != nil {
			fmt.Fprintf(&b, " %s (%s) | %s |\n", mib(r.Sidecar.Allocated), mib(r.Sidecar.RSS), mib(r.rss()+r.Sidecar.RSS))
		} else {
			b.WriteString(" | |\n")
		}
	}
	return b.String()
}

// runKey is one pod count and controller count: a row of the tables.
type runKey struct{ pods, controllers int }

// grouped gives the rows (pod count, then controller count, in order), each row's result per
// cache, and the caches in the order first met.
func grouped(rs []result) ([]runKey, map[runKey]map[string]result, []string) {
	byKey := map[runKey]map[string]result{}
	var keys []runKey
	var caches []string
	for _, r := range rs {
		k := runKey{r.Pods, r.Controllers}
		if byKey[k] == nil {
			byKey[k] = map[string]result{}
			keys = append(keys, k)
		}
		byKey[k][r.Cache] = r
		if !slices.Contains(caches, r.Cache) {
			caches = append(caches, r.Cache)
		}
	}
	slices.SortStableFunc(keys, func(a, b runKey) int { return cmp.Or(a.pods-b.pods, a.controllers-b.controllers) })
	return keys, byKey, caches
}
