package main

import (
	"bytes"
	"encoding/json"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/kubernetes/pkg/apis/core"
	podregistry "k8s.io/kubernetes/pkg/registry/core/pod"
)

func dumpOf(t *testing.T, p *plan) []corev1.Pod {
	t.Helper()
	var buf bytes.Buffer
	if err := writeDump(&buf, p); err != nil {
		t.Fatal(err)
	}
	var list corev1.PodList
	if err := json.Unmarshal(buf.Bytes(), &list); err != nil {
		t.Fatalf("the dump is not a list of pods: %v", err)
	}
	return list.Items
}

// The dump has the values of a cluster that has lived for weeks: what is unique in a real
// cluster is unique here, what real pods share they share here too.
func TestDumpIsRealistic(t *testing.T) {
	pods := dumpOf(t, newPlan(1, "dump", 3000, 5, 20, testBase))
	if len(pods) != 3000 {
		t.Fatalf("%d pods dumped, want 3000", len(pods))
	}
	uids, ips, containerIDs, created, volumes := map[string]bool{}, map[string]bool{}, map[string]bool{}, map[string]bool{}, map[string]bool{}
	imageIDs := map[string]string{}
	perOwner := map[string]int{}
	var first, last time.Time
	bare := 0
	for i, p := range pods {
		if p.Kind != "Pod" || p.APIVersion != "v1" || p.ResourceVersion == "" || p.Generation != 1 || p.Status.QOSClass == "" {
			t.Fatalf("pod %s lacks what the API server sets: %+v", p.Name, p.ObjectMeta)
		}
		uids[string(p.UID)] = true
		ips[p.Status.PodIP] = true
		ts := p.CreationTimestamp.Time
		created[ts.String()] = true
		if i == 0 || ts.Before(first) {
			first = ts
		}
		if ts.After(last) {
			last = ts
		}
		if ts.After(testBase) || p.Status.StartTime.Before(&p.CreationTimestamp) {
			t.Errorf("pod %s created at %s, started at %s (now is %s)", p.Name, ts, p.Status.StartTime, testBase)
		}
		conditions := map[string]bool{}
		for _, c := range p.Status.Conditions {
			if c.Type != corev1.ContainersReady { // flips with Ready
				conditions[c.LastTransitionTime.String()] = true
			}
		}
		if len(conditions) != len(p.Status.Conditions)-1 {
			t.Errorf("pod %s: conditions share transition times: %v", p.Name, p.Status.Conditions)
		}
		for _, cs := range p.Status.ContainerStatuses {
			containerIDs[cs.ContainerID] = true
			if prev, ok := imageIDs[cs.Image]; ok && prev != cs.ImageID {
				t.Errorf("image %s has digests %s and %s", cs.Image, prev, cs.ImageID)
			}
			imageIDs[cs.Image] = cs.ImageID
		}
		for _, v := range p.Spec.Volumes {
			if v.Projected != nil {
				volumes[v.Name] = true
			}
		}
		if len(p.OwnerReferences) == 0 {
			bare++
			perOwner["bare/"+p.Name]++
		} else {
			ref := p.OwnerReferences[0]
			perOwner[ref.Kind+"/"+string(ref.UID)]++
		}
	}
	for what, n := range map[string]int{"uids": len(uids), "pod IPs": len(ips), "creation times": len(created), "token volume names": len(volumes)} {
		if n < len(pods)*97/100 {
			t.Errorf("%d distinct %s among %d pods", n, what, len(pods))
		}
	}
	if n := len(containerIDs); n < len(pods) {
		t.Errorf("%d distinct container IDs among %d pods", n, len(pods))
	}
	if span := last.Sub(first); span < 14*24*time.Hour {
		t.Errorf("creation times span %s, want weeks", span)
	}
	if len(imageIDs) > len(pods)/3 {
		t.Errorf("%d images among %d pods: the pods of an owner do not share theirs", len(imageIDs), len(pods))
	}
	single, replicated, replicas := 0, 0, 0
	for key, n := range perOwner {
		if n == 1 {
			single++
		}
		if strings.HasPrefix(key, "ReplicaSet/") || strings.HasPrefix(key, "StatefulSet/") {
			replicated++
			replicas += n
		}
	}
	if mean := float64(replicas) / float64(replicated); mean < 4 || mean > 6 {
		t.Errorf("%.1f pods per ReplicaSet and StatefulSet, want about five", mean)
	}
	if single*100 < len(pods)*10 || bare == 0 {
		t.Errorf("%d pods are the only one of their owner (%d bare), want more than 10%%", single, bare)
	}
}

// Every dumped pod is one the API server accepts, defaults and admission included.
func TestDumpPodsAreValid(t *testing.T) {
	for _, p := range dumpOf(t, newPlan(4, "dump", 600, 3, 20, testBase)) {
		var pod core.Pod
		toInternal(t, &p, &pod)
		validateCreate(t, podregistry.Strategy, requestContext("", "pods", p.Namespace), "pod "+p.Name, &pod)
	}
}
