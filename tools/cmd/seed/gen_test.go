package main

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/validation"
	"k8s.io/apimachinery/pkg/util/validation/field"
	genericapirequest "k8s.io/apiserver/pkg/endpoints/request"
	"k8s.io/kubernetes/pkg/api/legacyscheme"
	"k8s.io/kubernetes/pkg/apis/apps"
	_ "k8s.io/kubernetes/pkg/apis/apps/install"
	"k8s.io/kubernetes/pkg/apis/batch"
	_ "k8s.io/kubernetes/pkg/apis/batch/install"
	"k8s.io/kubernetes/pkg/apis/core"
	_ "k8s.io/kubernetes/pkg/apis/core/install"
	"k8s.io/kubernetes/pkg/registry/apps/daemonset"
	"k8s.io/kubernetes/pkg/registry/apps/deployment"
	"k8s.io/kubernetes/pkg/registry/apps/replicaset"
	"k8s.io/kubernetes/pkg/registry/apps/statefulset"
	"k8s.io/kubernetes/pkg/registry/batch/job"
	podregistry "k8s.io/kubernetes/pkg/registry/core/pod"
)

var testBase = time.Date(2026, 6, 15, 4, 14, 53, 0, time.UTC)

// withUIDs fills in the UIDs the API server would assign to the owners.
func withUIDs(p *plan) *plan {
	for i, o := range p.Owners {
		o.UID = types.UID(fmt.Sprintf("00000000-0000-4000-8000-%012d", 2*i))
		o.DeploymentUID = types.UID(fmt.Sprintf("00000000-0000-4000-8000-%012d", 2*i+1))
	}
	return p
}

// render returns the compact JSON of every pod (spec, then status) of a plan.
func render(t *testing.T, p *plan) [][]byte {
	t.Helper()
	var out [][]byte
	for _, o := range p.Owners {
		for _, s := range o.Pods {
			pa := o.podApply(s)
			a, err := json.Marshal(pa)
			if err != nil {
				t.Fatal(err)
			}
			b, err := json.Marshal(podStatus(pa, ipFor(s.IP), s.Seed, seedStartTime(s.Seed, p.Base), p.Base))
			if err != nil {
				t.Fatal(err)
			}
			out = append(out, a, b)
		}
	}
	return out
}

func TestDeterministic(t *testing.T) {
	a := render(t, withUIDs(newPlan(7, "seed", 500, 4, 20, testBase)))
	b := render(t, withUIDs(newPlan(7, "seed", 500, 4, 20, testBase)))
	if len(a) != len(b) {
		t.Fatalf("different number of pods: %d, %d", len(a), len(b))
	}
	for i := range a {
		if !bytes.Equal(a[i], b[i]) {
			t.Fatalf("pod %d differs between runs with the same seed:\n%s\n%s", i/2, a[i], b[i])
		}
	}
	c := render(t, withUIDs(newPlan(8, "seed", 500, 4, 20, testBase)))
	same := 0
	for i := range min(len(a), len(c)) {
		if bytes.Equal(a[i], c[i]) {
			same++
		}
	}
	if same > len(a)/10 {
		t.Errorf("seeds 7 and 8 give %d identical documents of %d", same, len(a))
	}
}

func TestPlanLayout(t *testing.T) {
	for _, tc := range []struct{ pods, namespaces int }{{0, 3}, {1, 1}, {7, 3}, {100, 10}, {5000, 20}} {
		p := newPlan(1, "seed", tc.pods, tc.namespaces, 20, testBase)
		perNS := map[string]int{}
		kinds := map[ownerKind]int{}
		ips := map[string]bool{}
		names := map[string]bool{}
		for _, o := range p.Owners {
			if len(o.Pods) == 0 {
				t.Errorf("%d/%d: owner %s/%s has no pods", tc.pods, tc.namespaces, o.Namespace, o.Name)
			}
			for _, s := range o.Pods {
				perNS[o.Namespace]++
				kinds[o.Kind]++
				ip := ipFor(s.IP)
				if ips[ip] {
					t.Errorf("pod IP %s used twice", ip)
				}
				ips[ip] = true
				key := o.Namespace + "/" + s.Name
				if names[key] {
					t.Errorf("pod name %s used twice", key)
				}
				names[key] = true
			}
		}
		if len(p.Namespaces) != tc.namespaces {
			t.Errorf("%d namespaces, want %d", len(p.Namespaces), tc.namespaces)
		}
		total := 0
		for _, ns := range p.Namespaces {
			n := perNS[ns]
			total += n
			if n < tc.pods/tc.namespaces || n > tc.pods/tc.namespaces+1 {
				t.Errorf("%d/%d: namespace %s has %d pods", tc.pods, tc.namespaces, ns, n)
			}
		}
		if total != tc.pods {
			t.Errorf("%d pods planned, want %d", total, tc.pods)
		}
		if tc.pods >= 5000 {
			for k, want := range map[ownerKind]int{kindReplicaSet: 52, kindDaemonSet: 20, kindStatefulSet: 15, kindJob: 10, kindBare: 3} {
				got := kinds[k] * 100 / tc.pods
				if got < want-2 || got > want+2 {
					t.Errorf("%s pods: %d%%, want about %d%%", k, got, want)
				}
			}
		}
	}
}

func TestNamesLabelsOwners(t *testing.T) {
	p := withUIDs(newPlan(3, "seedtest", 3000, 5, 20, testBase))
	for _, o := range p.Owners {
		for _, n := range []string{o.Name, o.Deployment} {
			if n == "" && o.Kind != kindReplicaSet {
				continue
			}
			if errs := validation.IsDNS1123Subdomain(n); len(errs) > 0 {
				t.Errorf("owner name %q: %v", n, errs)
			}
		}
		for _, s := range o.Pods {
			pa := o.podApply(s)
			name := *pa.Name
			if errs := validation.IsDNS1123Label(name); len(errs) > 0 { // stricter than needed: also a hostname
				t.Errorf("pod name %q: %v", name, errs)
			}
			switch o.Kind {
			case kindReplicaSet:
				if !strings.HasPrefix(name, o.Deployment+"-"+o.Hash+"-") || len(name) != len(o.Name)+6 || pa.Labels["pod-template-hash"] != o.Hash {
					t.Errorf("ReplicaSet pod %q of %q", name, o.Name)
				}
			case kindDaemonSet, kindJob:
				if *pa.GenerateName != o.Name+"-" || len(name) != len(o.Name)+6 {
					t.Errorf("%s pod %q of %q", o.Kind, name, o.Name)
				}
			case kindStatefulSet:
				if name != fmt.Sprintf("%s-%d", o.Name, s.Ordinal) || pa.Labels["statefulset.kubernetes.io/pod-name"] != name ||
					pa.Labels["apps.kubernetes.io/pod-index"] != fmt.Sprint(s.Ordinal) {
					t.Errorf("StatefulSet pod %q of %q: %v", name, o.Name, pa.Labels)
				}
			}
			if o.Kind == kindJob && (pa.Labels["batch.kubernetes.io/controller-uid"] != string(o.UID) || pa.Labels["job-name"] != o.Name) {
				t.Errorf("Job pod %q labels %v", name, pa.Labels)
			}
			if o.Kind == kindDaemonSet && (pa.Labels["controller-revision-hash"] == "" || pa.Labels["pod-template-generation"] != "1") {
				t.Errorf("DaemonSet pod %q labels %v", name, pa.Labels)
			}
			if tier := pa.Labels[tierLabel]; tier != tierKeep && tier != tierDrop {
				t.Errorf("pod %q: %s=%q", name, tierLabel, tier)
			}
			for k, v := range pa.Labels {
				if errs := validation.IsQualifiedName(k); len(errs) > 0 {
					t.Errorf("label key %q: %v", k, errs)
				}
				if errs := validation.IsValidLabelValue(v); len(errs) > 0 {
					t.Errorf("label %s=%q: %v", k, v, errs)
				}
			}
			if o.Kind == kindBare {
				if len(pa.OwnerReferences) != 0 || pa.GenerateName != nil || name != o.Name {
					t.Errorf("bare pod %q of %q: owners %v", name, o.Name, pa.OwnerReferences)
				}
				continue
			}
			if len(pa.OwnerReferences) != 1 {
				t.Fatalf("pod %q has %d owner references", name, len(pa.OwnerReferences))
			}
			ref := pa.OwnerReferences[0]
			if *ref.UID != o.UID || *ref.UID == "" || *ref.Kind != o.Kind.String() || *ref.Name != o.Name ||
				*ref.APIVersion != o.Kind.apiVersion() || !*ref.Controller || !*ref.BlockOwnerDeletion {
				t.Errorf("pod %q owner reference %+v", name, ref)
			}
		}
	}
}

// TestSizes checks the pods are in the range of real ones: the spec and status written here
// are 2-7 KB; the API server adds defaults, the service account volume and managedFields
// (about 40%), which brings a pod to 3-10 KB.
func TestSizes(t *testing.T) {
	docs := render(t, withUIDs(newPlan(1, "seed", 2000, 4, 20, testBase)))
	var sum, lo, hi int
	lo = 1 << 30
	for i := 0; i < len(docs); i += 2 {
		n := len(docs[i]) + len(docs[i+1])
		sum += n
		lo, hi = min(lo, n), max(hi, n)
	}
	avg := sum / (len(docs) / 2)
	t.Logf("spec+status JSON: min %d, avg %d, max %d bytes", lo, avg, hi)
	if lo < 1500 || avg < 2500 || avg > 6000 || hi > 9000 {
		t.Errorf("pod sizes out of range: min %d, avg %d, max %d", lo, avg, hi)
	}
	withLastApplied := 0
	for i := 0; i < len(docs); i += 2 {
		if bytes.Contains(docs[i], []byte("last-applied-configuration")) {
			withLastApplied++
		}
	}
	if withLastApplied == 0 || withLastApplied > len(docs)/4 {
		t.Errorf("%d of %d pods carry last-applied-configuration", withLastApplied, len(docs)/2)
	}
}

// --- validation as the API server does it --------------------------------------------------------

func toInternal(t *testing.T, v1obj, internal runtime.Object) {
	t.Helper()
	legacyscheme.Scheme.Default(v1obj)
	if err := legacyscheme.Scheme.Convert(v1obj, internal, nil); err != nil {
		t.Fatal(err)
	}
}

func requestContext(group, resource, ns string) context.Context {
	ctx := genericapirequest.WithNamespace(genericapirequest.NewContext(), ns)
	return genericapirequest.WithRequestInfo(ctx, &genericapirequest.RequestInfo{
		IsResourceRequest: true, APIGroup: group, APIVersion: "v1", Resource: resource, Namespace: ns, Verb: "create"})
}

type strategy interface {
	PrepareForCreate(ctx context.Context, obj runtime.Object)
	Validate(ctx context.Context, obj runtime.Object) field.ErrorList
}

func validateCreate(t *testing.T, s strategy, ctx context.Context, what string, obj runtime.Object) {
	t.Helper()
	s.PrepareForCreate(ctx, obj)
	if errs := s.Validate(ctx, obj); len(errs) > 0 {
		t.Errorf("%s is invalid: %v", what, errs.ToAggregate())
	}
}

func TestAPIServerValidation(t *testing.T) {
	p := withUIDs(newPlan(5, "seed", 1500, 3, 20, testBase))
	for _, o := range p.Owners {
		what := fmt.Sprintf("%s %s/%s", o.Kind, o.Namespace, o.Name)
		switch o.Kind {
		case kindReplicaSet:
			d, err := o.deploymentObject()
			if err != nil {
				t.Fatal(err)
			}
			var di apps.Deployment
			toInternal(t, d, &di)
			validateCreate(t, deployment.Strategy, requestContext("apps", "deployments", o.Namespace), "Deployment "+o.Deployment, &di)
			rs, err := o.replicaSetObject()
			if err != nil {
				t.Fatal(err)
			}
			var ri apps.ReplicaSet
			toInternal(t, rs, &ri)
			validateCreate(t, replicaset.Strategy, requestContext("apps", "replicasets", o.Namespace), what, &ri)
		case kindDaemonSet:
			ds, err := o.daemonSetObject()
			if err != nil {
				t.Fatal(err)
			}
			var di apps.DaemonSet
			toInternal(t, ds, &di)
			validateCreate(t, daemonset.Strategy, requestContext("apps", "daemonsets", o.Namespace), what, &di)
		case kindStatefulSet:
			ss, err := o.statefulSetObject()
			if err != nil {
				t.Fatal(err)
			}
			var si apps.StatefulSet
			toInternal(t, ss, &si)
			validateCreate(t, statefulset.Strategy, requestContext("apps", "statefulsets", o.Namespace), what, &si)
		case kindJob:
			j, err := o.jobObject()
			if err != nil {
				t.Fatal(err)
			}
			j.UID = o.UID
			var ji batch.Job
			toInternal(t, j, &ji)
			validateCreate(t, job.Strategy, requestContext("batch", "jobs", o.Namespace), what, &ji)
		}

		for _, s := range o.Pods {
			pa := o.podApply(s)
			var v1pod corev1.Pod
			roundTrip(t, pa, &v1pod)
			var pod core.Pod
			toInternal(t, &v1pod, &pod)
			ctx := requestContext("", "pods", o.Namespace)
			validateCreate(t, podregistry.Strategy, ctx, "pod "+s.Name, &pod)

			var withStatus corev1.Pod
			roundTrip(t, pa, &withStatus)
			roundTrip(t, podStatus(pa, ipFor(s.IP), s.Seed, seedStartTime(s.Seed, p.Base), p.Base), &withStatus)
			var newPod core.Pod
			toInternal(t, &withStatus, &newPod)
			newPod.Status.QOSClass, newPod.Generation = pod.Status.QOSClass, pod.Generation
			newPod.ResourceVersion, pod.ResourceVersion = "2", "1"
			if errs := podregistry.StatusStrategy.ValidateUpdate(ctx, &newPod, &pod); len(errs) > 0 {
				t.Errorf("status of pod %s is invalid: %v", s.Name, errs.ToAggregate())
			}
		}
	}
}

// roundTrip decodes the JSON of in into out (on top of what out holds).
func roundTrip(t *testing.T, in, out any) {
	t.Helper()
	b, err := json.Marshal(in)
	if err != nil {
		t.Fatal(err)
	}
	if err := json.Unmarshal(b, out); err != nil {
		t.Fatal(err)
	}
}

// TestStatusTimes checks that no timestamp of a status lies after "now" or before the start.
func TestStatusTimes(t *testing.T) {
	p := withUIDs(newPlan(9, "seed", 1000, 2, 20, testBase))
	check := func(doc []byte, start, now time.Time) {
		var walk func(v any)
		walk = func(v any) {
			switch v := v.(type) {
			case map[string]any:
				for _, x := range v {
					walk(x)
				}
			case []any:
				for _, x := range v {
					walk(x)
				}
			case string:
				if ts, err := time.Parse(time.RFC3339, v); err == nil && (ts.After(now) || ts.Before(start.Add(-time.Hour))) {
					t.Errorf("time %s outside [%s, %s] in %s", v, start, now, doc)
				}
			}
		}
		var v any
		if err := json.Unmarshal(doc, &v); err != nil {
			t.Fatal(err)
		}
		walk(v)
	}
	restarts := 0
	for _, o := range p.Owners {
		for _, s := range o.Pods {
			pa := o.podApply(s)
			start := seedStartTime(s.Seed, p.Base)
			st := podStatus(pa, ipFor(s.IP), s.Seed, start, p.Base)
			b, _ := json.Marshal(st)
			check(b, start, p.Base)
			if bytes.Contains(b, []byte(`"lastState"`)) {
				restarts++
			}
			// A pod that has just started.
			b, _ = json.Marshal(podStatus(pa, ipFor(s.IP), s.Seed, p.Base, p.Base))
			check(b, p.Base, p.Base)
			if bytes.Contains(b, []byte(`"lastState"`)) {
				t.Errorf("a pod started now has restarted: %s", b)
			}
		}
	}
	if restarts == 0 || restarts > 300 {
		t.Errorf("%d of 1000 pods have restarted containers", restarts)
	}
}

func TestGracePeriod(t *testing.T) {
	for _, graceful := range []bool{false, true} {
		p := withUIDs(newPlanWith(1, "seed", 200, 2, 20, testBase, graceful))
		for _, o := range p.Owners {
			for _, s := range o.Pods {
				g := o.podApply(s).Spec.TerminationGracePeriodSeconds
				if g == nil || (*g == 0) == graceful {
					t.Fatalf("graceful=%v: pod %s has terminationGracePeriodSeconds %v", graceful, s.Name, g)
				}
			}
		}
	}
}

// Seeding again with another seed adds pods beside the earlier ones: no pod (and so no
// StatefulSet pod, whose name is its owner's plus an ordinal) is planned twice.
func TestOtherSeedsPlanOtherNames(t *testing.T) {
	names := map[string]uint64{}
	for _, seed := range []uint64{1, 2, 10001} {
		for _, o := range newPlan(seed, "seed", 3000, 4, 20, testBase).Owners {
			for _, s := range o.Pods {
				key := o.Namespace + "/" + s.Name
				if prev, ok := names[key]; ok {
					t.Fatalf("pod %s is planned by seeds %d and %d", key, prev, seed)
				}
				names[key] = seed
			}
		}
	}
}
