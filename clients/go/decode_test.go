package informerd

// Unmarshal must fill objects exactly as encoding/json.Unmarshal does, since GetAs, ListAs, the
// typed Informer and crcache promise encoding/json's semantics.

import (
	"encoding/json"
	"reflect"
	"testing"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
)

func TestUnmarshalAsEncodingJSON(t *testing.T) {
	pod := `{"apiVersion":"v1","kind":"Pod","metadata":{"name":"web-0","namespace":"shop",` +
		`"creationTimestamp":"2026-06-11T22:59:00Z","deletionTimestamp":null,"labels":{"app":"web"},` +
		`"ownerReferences":[{"apiVersion":"apps/v1","kind":"ReplicaSet","name":"web","uid":"u1","controller":true}],` +
		`"unknownField":{"a":[1,2]}},"spec":{"nodeName":"n\u00e9-1","Containers":[{"name":"c","resources":{"limits":{"cpu":"500m"}}}]},` +
		`"status":{"phase":"Running","podIP":"10.0.0.1","conditions":[` +
		`{"type":"Ready","status":"True","lastTransitionTime":"2026-06-11T23:00:00+02:00"},` +
		`{"type":"PodScheduled","status":"True","lastTransitionTime":null}]}}`
	var want, got corev1.Pod
	if err := json.Unmarshal([]byte(pod), &want); err != nil {
		t.Fatal(err)
	}
	if err := Unmarshal([]byte(pod), &got); err != nil {
		t.Fatal(err)
	}
	if !reflect.DeepEqual(got, want) {
		t.Errorf("Unmarshal filled\n%+v\nencoding/json\n%+v", got, want)
	}
	var wantU, gotU unstructured.Unstructured
	if err := json.Unmarshal([]byte(pod), &wantU); err != nil {
		t.Fatal(err)
	}
	if err := Unmarshal([]byte(pod), &gotU); err != nil {
		t.Fatal(err)
	}
	if !reflect.DeepEqual(gotU.Object, wantU.Object) {
		t.Errorf("Unmarshal into Unstructured filled\n%v\nencoding/json\n%v", gotU.Object, wantU.Object)
	}
	for _, bad := range []string{`{"metadata":{"creationTimestamp":"yesterday"}}`, `{"metadata":{"creationTimestamp":5}}`, `{"metadata":`} {
		var a, b corev1.Pod
		errWant, errGot := json.Unmarshal([]byte(bad), &a), Unmarshal([]byte(bad), &b)
		if (errWant == nil) != (errGot == nil) {
			t.Errorf("%s: encoding/json's error %v, Unmarshal's %v", bad, errWant, errGot)
		}
	}
}
