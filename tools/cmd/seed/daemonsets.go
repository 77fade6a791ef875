package main

// The plan of a cluster whose pods are DaemonSet pods: `seed pods --daemonsets K --nodes N`
// lays out K DaemonSets, each with one pod on every node (K x N pods), as in the GPU clusters
// whose per-node agents (device plugin, DCGM exporter, health monitors, log shippers, CNI)
// are most of the pods: 14 per node at 100,000 nodes is the profile of `make bench-nvsentinel`.
//
// The DaemonSets take the names of nodeAgents in turn, spread round-robin over the namespaces;
// each pod is the one planNamespace would plan for a DaemonSet (gen.go: its template, labels,
// the node affinity and tolerations the DaemonSet controller adds), on node i of 0..N-1.

import (
	"fmt"
	"time"
)

// newDaemonSetPlan lays out daemonsets DaemonSets over namespaces namespaces named
// prefix-0..prefix-(n-1), each with a pod on every one of nodes nodes.
func newDaemonSetPlan(seed uint64, prefix string, daemonsets, namespaces, nodes int, base time.Time) *plan {
	p := &plan{Seed: seed, Nodes: nodes, Base: base, Pods: daemonsets * nodes}
	for ns := 0; ns < namespaces; ns++ {
		p.Namespaces = append(p.Namespaces, fmt.Sprintf("%s-%d", prefix, ns))
	}
	used := make([]map[string]bool, namespaces) // owner and pod names per namespace
	ip := 0
	for d := 0; d < daemonsets; d++ {
		r := newRand(seed, uint64(d)+1)
		nsIndex := d % namespaces
		if used[nsIndex] == nil {
			used[nsIndex] = map[string]bool{}
		}
		names := used[nsIndex]
		agent := nodeAgents[d%len(nodeAgents)]
		name := agent + ownerSuffix(seed)
		for i := 2; names[name]; i++ {
			name = fmt.Sprintf("%s-%d", agent+ownerSuffix(seed), i)
		}
		names[name] = true
		o := &owner{Namespace: p.Namespaces[nsIndex], Kind: kindDaemonSet, Name: name, TemplateSeed: r.Uint64(),
			App: agent, Instance: name, Component: "agent", PartOf: "platform", Hash: randString(r, 10)}
		o.Pods = make([]*podSlot, 0, nodes)
		for n := 0; n < nodes; n++ {
			s := &podSlot{Ordinal: n, Seed: r.Uint64(), Tier: tierKeep, Node: n, IP: ip}
			ip++
			if r.IntN(2) == 1 {
				s.Tier = tierDrop
			}
			for {
				s.Name = o.Name + "-" + randString(r, 5)
				if !names[s.Name] {
					names[s.Name] = true
					break
				}
			}
			o.Pods = append(o.Pods, s)
		}
		p.Owners = append(p.Owners, o)
	}
	return p
}
