package crcache

// What a scope (view.go) does to requests and objects: the informerd options of its watch and
// lists, whether an object the sidecar returned by name is in it, and its transform.

import (
	"encoding/json"
	"fmt"
	"reflect"
	"strings"

	"k8s.io/apimachinery/pkg/fields"
	"k8s.io/apimachinery/pkg/labels"
	"sigs.k8s.io/controller-runtime/pkg/client"

	informerd "informerd.io/clients/go"
)

// informerOptions are the informerd options selecting the scope's objects, for its Informer.
func (s scope) informerOptions() []informerd.InformerOption {
	var opts []informerd.InformerOption
	for _, o := range s.selection() {
		opts = append(opts, o)
	}
	return opts
}

// listOptions are the informerd options selecting the scope's objects, for a List of them.
func (s scope) listOptions() []informerd.ListOption {
	var opts []informerd.ListOption
	for _, o := range s.selection() {
		opts = append(opts, o)
	}
	return opts
}

// selection is the scope as informerd options: an informerd.SelectionOption is an option of
// both a List and an Informer, which informerOptions and listOptions need it as.
func (s scope) selection() []informerd.SelectionOption {
	var opts []informerd.SelectionOption
	if s.namespace != "" {
		opts = append(opts, informerd.InNamespace(s.namespace))
	}
	if text := selectorString(s.labels); text != "" {
		opts = append(opts, informerd.WithLabelSelector(text))
	}
	if text := fieldString(s.fields); text != "" {
		opts = append(opts, informerd.WithFieldSelector(text))
	}
	return opts
}

// matches reports whether an object (the sidecar's JSON, unmasked) is in the scope.
func (s scope) matches(data []byte) (bool, error) {
	if !s.selecting() {
		return true, nil
	}
	var obj map[string]any
	if err := informerd.Unmarshal(data, &obj); err != nil {
		return false, fmt.Errorf("crcache: decode object: %w", err)
	}
	if s.labels != nil && !s.labels.Empty() {
		set := labels.Set{}
		if m, ok := lookup(obj, "metadata.labels").(map[string]any); ok {
			for k, v := range m {
				set[k], _ = v.(string)
			}
		}
		if !s.labels.Matches(set) {
			return false, nil
		}
	}
	if s.fields != nil && !s.fields.Empty() {
		set := fields.Set{}
		for _, req := range s.fields.Requirements() {
			set[req.Field] = fieldValue(lookup(obj, req.Field))
		}
		if !s.fields.Matches(set) {
			return false, nil
		}
	}
	return true, nil
}

// lookup follows a dotted path through decoded JSON; nil where it ends.
func lookup(obj map[string]any, path string) any {
	var cur any = obj
	for _, part := range strings.Split(path, ".") {
		m, ok := cur.(map[string]any)
		if !ok {
			return nil
		}
		cur = m[part]
	}
	return cur
}

// fieldValue is a field's value as a field selector compares it (the API server's text of a
// scalar; "" for a missing field).
func fieldValue(v any) string {
	switch v := v.(type) {
	case nil:
		return ""
	case string:
		return v
	default:
		b, _ := json.Marshal(v)
		return string(b)
	}
}

// apply runs the scope's transform on an object the manager receives.
func (s scope) apply(obj client.Object) (client.Object, error) {
	if s.transform == nil {
		return obj, nil
	}
	out, err := s.transform(obj)
	if err != nil {
		return nil, fmt.Errorf("crcache: transform of %T: %w", obj, err)
	}
	co, ok := out.(client.Object)
	if !ok {
		return nil, fmt.Errorf("crcache: the transform of %T returned %T, which is not a client.Object", obj, out)
	}
	return co, nil
}

// applyInto runs the transform on out and leaves its result in out (a Get's argument).
func (s scope) applyInto(out client.Object) error {
	res, err := s.apply(out)
	if err != nil || res == out {
		return err
	}
	dst, src := reflect.ValueOf(out), reflect.ValueOf(res)
	if dst.Type() != src.Type() {
		return fmt.Errorf("crcache: the transform of %T returned %T; a transform must keep the object's type", out, res)
	}
	dst.Elem().Set(src.Elem())
	return nil
}
