package crcache

// client.Reader over informerd: Get and List with the semantics of controller-runtime's
// default cache (pkg/cache/internal/cache_reader.go), each call answered by the sidecar.

import (
	"context"
	"fmt"
	"strings"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/fields"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/selection"
	"sigs.k8s.io/controller-runtime/pkg/client"

	informerd "informerd.io/clients/go"
	"informerd.io/clients/go/informerdv1"
)

// MinResourceVersion is a client.GetOption and client.ListOption that makes the read wait
// until the sidecar has seen this resourceVersion (up to the context's deadline, 30 s without
// one): pass the resourceVersion of your own last write to read it back. A Get waits until the
// sidecar holds this version of the object or a later one; a List until the sidecar holds an
// object of the listed namespace (of any, listing all namespaces) at it or later. So give the
// resourceVersion of a write to an object of the listed kind that the sidecar keeps (another one may never come: the List then fails at the
// deadline). It is the API's own option, GetOptions/ListOptions{Raw: {ResourceVersion: rv}},
// which the API server reads the same way ("not older than") and controller-runtime's default
// cache ignores.
func MinResourceVersion(rv string) ResourceVersionOption {
	return ResourceVersionOption(rv)
}

// ResourceVersionOption is what MinResourceVersion returns: a GetOption and a ListOption.
type ResourceVersionOption string

// ApplyToGet sets GetOptions.Raw.ResourceVersion.
func (rv ResourceVersionOption) ApplyToGet(o *client.GetOptions) {
	if o.Raw == nil {
		o.Raw = &metav1.GetOptions{}
	}
	o.Raw.ResourceVersion = string(rv)
}

// ApplyToList sets ListOptions.Raw.ResourceVersion.
func (rv ResourceVersionOption) ApplyToList(o *client.ListOptions) {
	if o.Raw == nil {
		o.Raw = &metav1.ListOptions{}
	}
	o.Raw.ResourceVersion = string(rv)
}

// minResourceVersion is informerd's option for a Raw resourceVersion: none for "" and "0",
// which the API server reads as "any version".
func minResourceVersion(rv string) []informerd.Option {
	if rv == "" || rv == "0" {
		return nil
	}
	return []informerd.Option{informerd.MinResourceVersion(rv)}
}

// Get reads one object from the sidecar into out (typed, *unstructured.Unstructured or
// *metav1.PartialObjectMetadata). A missing object is the API's NotFound error, with the
// kind as the resource, as the default cache returns it.
func (c *Cache) Get(ctx context.Context, key client.ObjectKey, out client.Object, opts ...client.GetOption) error {
	getOpts := client.GetOptions{}
	getOpts.ApplyOptions(opts)
	if getOpts.UnsafeDisableDeepCopy != nil && *getOpts.UnsafeDisableDeepCopy {
		return errUnsafeDisableDeepCopy("client.UnsafeDisableDeepCopy on Get")
	}
	sh, res, err := c.resolve(ctx, out)
	if err != nil {
		return err
	}
	notFound := apierrors.NewNotFound(schema.GroupResource{Group: sh.gvk.Group, Resource: sh.gvk.Kind}, key.Name)
	if !res.namespaced {
		key.Namespace = ""
	} else if key.Namespace == "" {
		return notFound // the default cache has no object under a bare name of a namespaced kind
	}
	iopts := []informerd.Option{informerd.WaitForSync(), informerd.WithFields(sh.fields()...)}
	if getOpts.Raw != nil {
		iopts = append(iopts, minResourceVersion(getOpts.Raw.ResourceVersion)...)
	}
	resp, err := c.client.GetObject(ctx, res.name, key.Namespace, key.Name, iopts...)
	if err != nil {
		if informerd.IsNotFound(err) {
			return notFound
		}
		return fmt.Errorf("crcache: Get %s %s: %w", sh, key, err)
	}
	if err := decodeInto(resp.GetObject().GetJson(), out); err != nil {
		return err
	}
	out.GetObjectKind().SetGroupVersionKind(sh.gvk)
	return nil
}

// List reads the matching objects from the sidecar into out. As in the default cache: a field
// selector must be exact (=, ==) on fields registered with IndexField; a positive Limit returns
// the first items (the sidecar stops there; zero or negative: every item); Continue is refused
// and the list's continue is "continue-not-supported"; the list's resourceVersion is empty
// (informerd's revisions are not the API server's). Unlike the default cache, which ignores
// it, Raw.ResourceVersion (MinResourceVersion) makes the List read your own writes.
func (c *Cache) List(ctx context.Context, out client.ObjectList, opts ...client.ListOption) error {
	listOpts := client.ListOptions{}
	listOpts.ApplyOptions(opts)
	if listOpts.UnsafeDisableDeepCopy != nil && *listOpts.UnsafeDisableDeepCopy {
		return errUnsafeDisableDeepCopy("client.UnsafeDisableDeepCopy on List")
	}
	if listOpts.Continue != "" {
		return fmt.Errorf("continue list option is not supported by the cache: " +
			"the informerd cache returns every match in one List; list without Continue")
	}
	sh, res, err := c.resolve(ctx, out)
	if err != nil {
		return err
	}
	iopts, none, err := c.listOptions(res, listOpts)
	if err != nil {
		return err
	}
	var items []runtime.Object
	var derr error
	if !none {
		iopts = append(iopts, informerd.WaitForSync(), informerd.WithFields(sh.fields()...))
		_, _, err = c.client.ListObjects(ctx, res.name, func(obj *informerdv1.Object) {
			if derr != nil {
				return
			}
			var o runtime.Object
			o, derr = sh.decode(c.scheme, obj.GetJson())
			items = append(items, o)
		}, iopts...)
		if err != nil {
			return fmt.Errorf("crcache: List %s: %w", sh, err)
		}
		if derr != nil {
			return derr
		}
	}
	if err := meta.SetList(out, items); err != nil {
		return err
	}
	out.SetContinue("continue-not-supported")
	return nil
}

// listOptions turns controller-runtime's list options into informerd's; none means nothing
// can match (a namespace of a cluster-scoped kind, labels.Nothing()).
func (c *Cache) listOptions(res resource, o client.ListOptions) (opts []informerd.Option, none bool, err error) {
	if o.Namespace != "" {
		if !res.namespaced {
			return nil, true, nil
		}
		opts = append(opts, informerd.InNamespace(o.Namespace))
	}
	if sel := o.LabelSelector; sel != nil && !sel.Empty() {
		text := sel.String()
		if text == "" {
			return nil, true, nil // labels.Nothing()
		}
		opts = append(opts, informerd.WithLabelSelector(text))
	}
	if o.FieldSelector != nil && !o.FieldSelector.Empty() {
		fopts, err := c.fieldOptions(res, o.FieldSelector)
		if err != nil {
			return nil, false, err
		}
		opts = append(opts, fopts...)
	}
	if o.Limit > 0 {
		opts = append(opts, informerd.WithLimit(o.Limit))
	}
	if o.Raw != nil {
		opts = append(opts, minResourceVersion(o.Raw.ResourceVersion)...)
	}
	return opts, false, nil
}

// fieldOptions maps an exact field selector onto the informerd indexes registered by
// IndexField: a named index becomes an index lookup, a path index a field selector.
func (c *Cache) fieldOptions(res resource, sel fields.Selector) ([]informerd.Option, error) {
	c.mu.Lock()
	routes := c.indexes[res.name]
	c.mu.Unlock()
	var terms []string
	var opts []informerd.Option
	lookup := ""
	for _, req := range sel.Requirements() {
		if req.Operator != selection.Equals && req.Operator != selection.DoubleEquals {
			return nil, fmt.Errorf("non-exact field matches are not supported by the cache: %q uses %q; "+
				"select with = and filter the rest yourself", req.Field, req.Operator)
		}
		route, ok := routes[req.Field]
		if !ok {
			return nil, fmt.Errorf("index with name field:%s does not exist: register it with "+
				"IndexField(ctx, obj, %q, ...) before listing by it (informerd resource %q)", req.Field, req.Field, res.name)
		}
		if route.path != "" {
			terms = append(terms, route.path+"="+fields.EscapeValue(req.Value))
			continue
		}
		if lookup != "" {
			return nil, fmt.Errorf("crcache: the field selector uses two informerd indexes by name (%s, %s) and "+
				"informerd looks up one per List: give one of them a `path:` index named after the field, "+
				"or select by one and filter the rest yourself", lookup, route.name)
		}
		lookup = route.name
		opts = append(opts, informerd.WithIndex(route.name, req.Value))
	}
	if len(terms) > 0 {
		opts = append(opts, informerd.WithFieldSelector(strings.Join(terms, ",")))
	}
	return opts, nil
}
