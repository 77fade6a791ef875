package informerd

// How the sidecar's JSON becomes a Go value: the one decoder GetAs, ListAs, DecodeObject and the
// typed Informer use (and crcache's reads), since decoding is most of what a Go program spends
// on a read of a few objects (clients/go/crcache/cmd/callbench).

import (
	"encoding/json"
	"errors"
	"fmt"
	"time"

	jsonv2 "github.com/go-json-experiment/json"
	"github.com/go-json-experiment/json/jsontext"
	jsonv1 "github.com/go-json-experiment/json/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"informerd.io/clients/go/informerdv1"
)

// ObjectReceiver is implemented by a type that takes the sidecar's objects as they come (the
// JSON with the identity fields beside it) instead of having the JSON decoded into it: an
// Informer, GetAs or ListAs of such a T calls ReceiveObject.
type ObjectReceiver interface {
	ReceiveObject(obj *informerdv1.Object) error
}

// Unmarshal decodes an object's JSON into v with encoding/json.Unmarshal's semantics (field
// names matched without regard to case, unknown fields ignored, UnmarshalJSON methods called),
// in about half its CPU and allocations for a typed object.
//
// Decision: go-json-experiment/json's v1 package, whose Unmarshal is documented as
// semantically identical to encoding/json's, run by the encoding/json/v2 implementation (the
// module mirrors encoding/json/v2, which is stable in Go 1.27's standard library, and aliases it
// when that is built in). The JSON decode was the largest part of a read of a few typed objects
// above gRPC's own cost (`make bench-calls`; the figures before and after are in the commit
// that made this change). Kubernetes' protobuf would decode faster still, but needs the sidecar
// to encode it for built-in kinds. A type with its own UnmarshalJSON (*unstructured.Unstructured)
// is handed the bytes directly: encoding/json would first scan the whole object only to validate
// what the sidecar wrote.
func Unmarshal(data []byte, v any) error {
	if u, ok := v.(json.Unmarshaler); ok {
		return u.UnmarshalJSON(data)
	}
	return jsonv2.Unmarshal(data, v, jsonv1.DefaultOptionsV1(), metaTime)
}

// metaTime decodes a metav1.Time as its UnmarshalJSON does (null: the zero time; a string: RFC
// 3339, in the local time zone) without the encoding/json.Unmarshal of the string that method
// makes.
//
// Decision: every object has a creationTimestamp and a pod one more per condition; through the
// method they were the largest item of a typed pod's decode after the decoder itself. Anything
// but null or a string is left to the method, which reports the error.
var metaTime = jsonv2.WithUnmarshalers(jsonv2.UnmarshalFromFunc(func(dec *jsontext.Decoder, t *metav1.Time) error {
	switch dec.PeekKind() {
	case 'n':
		if _, err := dec.ReadToken(); err != nil {
			return err
		}
		t.Time = time.Time{}
		return nil
	case '"':
		tok, err := dec.ReadToken()
		if err != nil {
			return err
		}
		pt, err := time.Parse(time.RFC3339, tok.String())
		if err != nil {
			return err
		}
		t.Time = pt.Local()
		return nil
	}
	return errors.ErrUnsupported
}))

// decodesJSON tells whether decode[T] reads only an object's JSON: T is not an ObjectReceiver,
// which is handed the whole proto object. Reads into such a T ask the sidecar to omit the
// labels map (OmitLabels), which they would decode for nothing.
func decodesJSON[T any]() bool {
	_, receives := any(new(T)).(ObjectReceiver)
	return !receives
}

func decode[T any](obj *informerdv1.Object) (*T, error) {
	if obj == nil {
		return nil, fmt.Errorf("informerd: the response carries no object")
	}
	v := new(T)
	if r, ok := any(v).(ObjectReceiver); ok {
		return v, r.ReceiveObject(obj)
	}
	if err := Unmarshal(obj.GetJson(), v); err != nil {
		return nil, fmt.Errorf("informerd: decode %s/%s into %T: %w", obj.GetNamespace(), obj.GetName(), v, err)
	}
	return v, nil
}
