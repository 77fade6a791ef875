package main

// The first full pass of each cache, split into its sync and its reconcile phase, and the
// reconcile phase of crcache against the controller's own cache (issue 34's figure: the
// reconcile phase through the sidecar within 1.2 times the own cache's).

import (
	"fmt"
	"strings"
)

// phases is one result's slowest process: the first pass, its sync, and the difference.
//
// Decision: the slowest of the k processes (they start together and share the machine), as
// the pass is over when the last controller has reconciled every Deployment once.
type phases struct{ firstPass, sync, reconcile float64 }

func (r result) phases() phases {
	var p phases
	for _, s := range r.Processes {
		p.firstPass = max(p.firstPass, s.FirstPassSeconds)
		p.sync = max(p.sync, s.SyncSeconds)
		p.reconcile = max(p.reconcile, s.FirstPassSeconds-s.SyncSeconds)
	}
	return p
}

// passTable has, per pod count and controller count, each cache's first pass (sync), reconcile
// phase, and the informerd reconcile phase as a multiple of the default cache's.
func passTable(rs []result) string {
	keys, byKey, caches := grouped(rs)
	var b strings.Builder
	b.WriteString("| pods | controllers |")
	for _, c := range caches {
		fmt.Fprintf(&b, " %s: first pass (sync), reconcile phase |", c)
	}
	b.WriteString(" informerd reconcile phase / default's |\n|---:|---:|")
	b.WriteString(strings.Repeat("---:|", len(caches)+1) + "\n")
	for _, k := range keys {
		fmt.Fprintf(&b, "| %d | %d |", k.pods, k.controllers)
		for _, c := range caches {
			r, ok := byKey[k][c]
			if !ok {
				b.WriteString(" |")
				continue
			}
			p := r.phases()
			fmt.Fprintf(&b, " %.1f s (%.1f s), %.1f s |", p.firstPass, p.sync, p.reconcile)
		}
		own, okOwn := byKey[k][cacheDefault]
		adapter, okAdapter := byKey[k][cacheInformerd]
		if okOwn && okAdapter && own.phases().reconcile > 0 {
			fmt.Fprintf(&b, " %.2f× |\n", adapter.phases().reconcile/own.phases().reconcile)
		} else {
			b.WriteString(" |\n")
		}
	}
	return b.String()
}
