package main

import (
	"bytes"
	"fmt"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
	"go.etcd.io/etcd/api/v3/v3rpc/rpctypes"
	corev1 "k8s.io/api/core/v1"
	apiequality "k8s.io/apimachinery/pkg/api/equality"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes/scheme"
	"sigs.k8s.io/structured-merge-diff/v6/fieldpath"
)

// What `seed pods --etcd` stores is what kube-apiserver stores for the pod `seed dump` lists:
// the protobuf envelope its storage codec writes, under its key, without a resourceVersion,
// with the seeder's apply and the kubelet's status update in managedFields.
func TestEtcdPodsAreStoredAsTheAPIServerStoresThem(t *testing.T) {
	p := newPlan(1, "etcd", 300, 3, 20, testBase)
	assignUIDs(p)
	enc := newPodEncoder()
	decode := scheme.Codecs.UniversalDeserializer()
	i := 0
	for _, o := range p.Owners {
		for _, s := range o.Pods {
			key, value, err := enc.stored(p, o, s, i)
			if err != nil {
				t.Fatal(err)
			}
			want, err := listedPod(p, o, s, i)
			if err != nil {
				t.Fatal(err)
			}
			i++
			if key != "/registry/pods/"+want.Namespace+"/"+want.Name {
				t.Fatalf("key %q for pod %s/%s", key, want.Namespace, want.Name)
			}
			if !bytes.HasPrefix(value, []byte("k8s\x00")) {
				t.Fatalf("%s: not the apiserver's protobuf envelope: %q", key, value[:min(8, len(value))])
			}
			obj, gvk, err := decode.Decode(value, nil, nil)
			if err != nil {
				t.Fatalf("%s does not decode: %v", key, err)
			}
			got, ok := obj.(*corev1.Pod)
			if !ok || gvk.Kind != "Pod" || gvk.Version != "v1" {
				t.Fatalf("%s decodes as %v (%T)", key, gvk, obj)
			}
			if got.ResourceVersion != "" {
				t.Errorf("%s stores resourceVersion %q; the apiserver sets it from the etcd revision", key, got.ResourceVersion)
			}
			checkManagedFields(t, key, got.ManagedFields)
			got.ManagedFields, got.ResourceVersion, want.ResourceVersion = nil, "", ""
			got.TypeMeta = want.TypeMeta // the envelope carries it, not the object
			if !apiequality.Semantic.DeepEqual(got, want) {
				t.Fatalf("%s differs from the pod `seed dump` lists (-stored +listed):\n%s", key, cmp.Diff(got, want))
			}
		}
	}
	if i != 300 {
		t.Fatalf("%d pods, want 300", i)
	}
}

func checkManagedFields(t *testing.T, key string, entries []metav1.ManagedFieldsEntry) {
	t.Helper()
	if len(entries) != 2 {
		t.Fatalf("%s: %d managedFields entries, want the seeder's apply and the kubelet's update", key, len(entries))
	}
	apply, status := entries[0], entries[1]
	if apply.Manager != fieldManager || apply.Operation != metav1.ManagedFieldsOperationApply || apply.Subresource != "" ||
		status.Manager != statusManager || status.Operation != metav1.ManagedFieldsOperationUpdate || status.Subresource != "status" {
		t.Fatalf("%s: managedFields %+v", key, entries)
	}
	paths := func(e metav1.ManagedFieldsEntry) string {
		var set fieldpath.Set
		if err := set.FromJSON(bytes.NewReader(e.FieldsV1.GetRawBytes())); err != nil {
			t.Fatalf("%s: %s's fieldsV1 is not a field set: %v", key, e.Manager, err)
		}
		return set.String()
	}
	a, s := paths(apply), paths(status)
	for _, want := range []string{".metadata.labels.informerd.io/tier", ".spec.containers[name=", "].image", ".spec.nodeName"} {
		if !strings.Contains(a, want) {
			t.Errorf("%s: the apply entry lacks %s: %s", key, want, a)
		}
	}
	for _, want := range []string{".status.podIP", ".status.conditions[type=\"Ready\"].lastProbeTime", ".status.containerStatuses"} {
		if !strings.Contains(s, want) {
			t.Errorf("%s: the status entry lacks %s: %s", key, want, s)
		}
	}
	for _, never := range []string{".apiVersion", ".kind", ".metadata.name", ".metadata.namespace"} {
		if strings.Contains(a+s, never+"\n") {
			t.Errorf("%s: managedFields record %s, which the apiserver never does", key, never)
		}
	}
	if strings.Contains(a, ".status") || strings.Contains(s, ".spec") || strings.Contains(s, ".metadata") {
		t.Errorf("%s: the entries overlap:\napply %s\nstatus %s", key, a, s)
	}
}

// The encoder computes an owner's apply fields once (podEncoder.applied): that is only right
// if every pod of an owner sets the same fields, whatever its name, node, ordinal or uid.
func TestEveryPodOfAnOwnerAppliesTheSameFields(t *testing.T) {
	p := newPlan(3, "fields", 400, 2, 30, testBase)
	assignUIDs(p)
	enc := newPodEncoder()
	kinds := map[ownerKind]bool{}
	for _, o := range p.Owners {
		var first string
		for _, s := range o.Pods {
			planned, err := planPod(p, o, s)
			if err != nil {
				t.Fatal(err)
			}
			fields, err := enc.applyFields(planned)
			if err != nil {
				t.Fatal(err)
			}
			if first == "" {
				first = fields.GetRawString()
				kinds[o.Kind] = true
			} else if fields.GetRawString() != first {
				t.Fatalf("pod %s/%s of %s %s applies other fields than its first pod:\n%s\n%s",
					o.Namespace, s.Name, o.Kind, o.Name, fields.GetRawString(), first)
			}
		}
	}
	for _, k := range []ownerKind{kindReplicaSet, kindDaemonSet, kindStatefulSet, kindJob, kindBare} {
		if !kinds[k] {
			t.Errorf("the plan has no %s: the test does not cover it", k)
		}
	}
}

// A write into etcd that timed out in a stall is tried again (the seeder's puts are
// idempotent); a refused one is not.
func TestEtcdTimeoutsAreRetried(t *testing.T) {
	for _, err := range []error{rpctypes.ErrTimeout, fmt.Errorf("put: %w", rpctypes.ErrTimeoutDueToConnectionLost)} {
		if !retriable(err) {
			t.Errorf("%v is not retried", err)
		}
	}
	if retriable(rpctypes.ErrNoSpace) {
		t.Errorf("%v is retried: a full etcd stays full", rpctypes.ErrNoSpace)
	}
}
