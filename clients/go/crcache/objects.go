package crcache

// The three shapes controller-runtime reads objects in (a typed Go struct from the scheme,
// *unstructured.Unstructured, *metav1.PartialObjectMetadata) and how the sidecar's JSON is
// decoded into each.

import (
	"fmt"
	"reflect"
	"strings"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/client/apiutil"

	informerd "informerd.io/clients/go"
)

type shapeKind int

const (
	typed shapeKind = iota
	unstructuredShape
	metadataShape
)

// shape is a GroupVersionKind read in one of the three shapes.
type shape struct {
	gvk  schema.GroupVersionKind
	kind shapeKind
}

func (s shape) String() string {
	switch s.kind {
	case unstructuredShape:
		return s.gvk.String() + " (unstructured)"
	case metadataShape:
		return s.gvk.String() + " (metadata)"
	}
	return s.gvk.String()
}

// shapeOf is the shape of an object as controller-runtime's default cache determines it.
func shapeOf(obj runtime.Object, scheme *runtime.Scheme) (shape, error) {
	gvk, err := apiutil.GVKForObject(obj, scheme)
	if err != nil {
		return shape{}, err
	}
	return shapeFor(obj, gvk), nil
}

func shapeFor(obj runtime.Object, gvk schema.GroupVersionKind) shape {
	switch obj.(type) {
	case runtime.Unstructured:
		return shape{gvk: gvk, kind: unstructuredShape}
	case *metav1.PartialObjectMetadata, *metav1.PartialObjectMetadataList:
		return shape{gvk: gvk, kind: metadataShape}
	}
	return shape{gvk: gvk, kind: typed}
}

// shapeOfList is the shape of a list's items: the list's kind without "List".
func shapeOfList(list client.ObjectList, scheme *runtime.Scheme) (shape, error) {
	gvk, err := apiutil.GVKForObject(list, scheme)
	if err != nil {
		return shape{}, err
	}
	gvk.Kind = strings.TrimSuffix(gvk.Kind, "List")
	return shapeFor(list, gvk), nil
}

// fields is the field mask a read of this shape asks the sidecar for: only the metadata for
// PartialObjectMetadata (identity and apiVersion/kind are always sent), everything otherwise.
func (s shape) fields() []string {
	if s.kind == metadataShape {
		return []string{"metadata"}
	}
	return nil
}

// newObject returns an empty object of this shape.
func (s shape) newObject(scheme *runtime.Scheme) (client.Object, error) {
	var obj runtime.Object
	switch s.kind {
	case unstructuredShape:
		obj = &unstructured.Unstructured{}
	case metadataShape:
		obj = &metav1.PartialObjectMetadata{}
	default:
		o, err := scheme.New(s.gvk)
		if err != nil {
			return nil, err
		}
		obj = o
	}
	co, ok := obj.(client.Object)
	if !ok {
		return nil, fmt.Errorf("crcache: %T is not a client.Object", obj)
	}
	co.GetObjectKind().SetGroupVersionKind(s.gvk)
	return co, nil
}

// decode decodes the sidecar's JSON of an object into a new object of this shape.
func (s shape) decode(scheme *runtime.Scheme, data []byte) (client.Object, error) {
	obj, err := s.newObject(scheme)
	if err != nil {
		return nil, err
	}
	if err := decodeInto(data, obj); err != nil {
		return nil, err
	}
	obj.GetObjectKind().SetGroupVersionKind(s.gvk)
	return obj, nil
}

// decodeInto replaces what out holds with the object in data, as the default cache's Get
// overwrites its argument.
func decodeInto(data []byte, out client.Object) error {
	v := reflect.ValueOf(out)
	if v.Kind() != reflect.Pointer || v.IsNil() {
		return fmt.Errorf("crcache: cannot decode into %T: need a non-nil pointer", out)
	}
	v.Elem().Set(reflect.Zero(v.Elem().Type()))
	if err := informerd.Unmarshal(data, out); err != nil {
		return fmt.Errorf("crcache: decode %T: %w", out, err)
	}
	return nil
}
