package main

import (
	"strings"
	"testing"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/client-go/kubernetes/scheme"
)

// A seeded node is stored in the apiserver's protobuf envelope, decodes as the node planned,
// is about the size of a GPU node of a large cluster, and its addresses and pod CIDR are its own.
func TestNodesAreStoredAsTheAPIServerStoresThem(t *testing.T) {
	enc := newNodeEncoder()
	decode := scheme.Codecs.UniversalDeserializer()
	seenIP, seenCIDR := map[string]bool{}, map[string]bool{}
	for _, i := range []int{0, 1, 249, 250, 65535, 65536, 99999} {
		value, size, err := enc.stored(plannedNode(1, i, testBase))
		if err != nil {
			t.Fatal(err)
		}
		if !strings.HasPrefix(string(value), "k8s\x00") {
			t.Fatalf("node %d: not the apiserver's protobuf envelope", i)
		}
		obj, _, err := decode.Decode(value, nil, nil)
		if err != nil {
			t.Fatalf("node %d does not decode: %v", i, err)
		}
		node := obj.(*corev1.Node)
		if node.Name != nodeName(i) || node.ResourceVersion != "" || len(node.ManagedFields) != 3 {
			t.Fatalf("node %d: name %q resourceVersion %q, %d managedFields", i, node.Name, node.ResourceVersion, len(node.ManagedFields))
		}
		if ipam := string(node.ManagedFields[1].FieldsV1.GetRawString()); !strings.Contains(ipam, node.Spec.PodCIDR) {
			t.Errorf("node %d: node-ipam's managedFields do not name its podCIDR %s: %s", i, node.Spec.PodCIDR, ipam)
		}
		if size < 11_000 || size > 16_000 {
			t.Errorf("node %d is %d bytes of JSON; a GPU node of a large cluster is about 13 KB", i, size)
		}
		ip := node.Status.Addresses[0].Address
		if seenIP[ip] || seenCIDR[node.Spec.PodCIDR] {
			t.Errorf("node %d shares its address %s or pod CIDR %s", i, ip, node.Spec.PodCIDR)
		}
		seenIP[ip], seenCIDR[node.Spec.PodCIDR] = true, true
	}
}

// The encoder computes the field sets of one node for all (nodeEncoder.fields): right only if
// every node's writers manage the same fields.
func TestEveryNodeManagesTheSameFields(t *testing.T) {
	first, err := newNodeEncoder().managedFields(plannedNode(1, 0, testBase))
	if err != nil {
		t.Fatal(err)
	}
	for _, i := range []int{1, 777, 99999} {
		got, err := newNodeEncoder().managedFields(plannedNode(7, i, testBase))
		if err != nil {
			t.Fatal(err)
		}
		for _, w := range []int{0, 2} { // 1, node-ipam's, names the node's own CIDR
			if string(got[w].GetRawString()) != string(first[w].GetRawString()) {
				t.Fatalf("node %d's writer %d manages other fields than node 0's:\n%s\n%s", i, w, got[w].GetRawString(), first[w].GetRawString())
			}
		}
	}
}

// `seed pods --daemonsets K --nodes N`: K DaemonSets, each with exactly one pod on every node.
func TestDaemonSetPlanPutsOnePodOfEachOnEveryNode(t *testing.T) {
	p := newDaemonSetPlan(1, "ds", 14, 3, 50, testBase)
	if len(p.Owners) != 14 || p.Pods != 14*50 {
		t.Fatalf("%d owners, %d pods", len(p.Owners), p.Pods)
	}
	perNode := map[int]int{}
	names := map[string]bool{}
	for _, o := range p.Owners {
		if o.Kind != kindDaemonSet || len(o.Pods) != 50 {
			t.Fatalf("owner %s: %s with %d pods", o.Name, o.Kind, len(o.Pods))
		}
		for _, s := range o.Pods {
			perNode[s.Node]++
			if key := o.Namespace + "/" + s.Name; names[key] {
				t.Fatalf("pod name %s twice", key)
			} else {
				names[key] = true
			}
		}
	}
	for n := 0; n < 50; n++ {
		if perNode[n] != 14 {
			t.Fatalf("node %d has %d pods, want 14", n, perNode[n])
		}
	}
}
