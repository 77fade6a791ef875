package crcache

// client.Reader over informerd: Get and List with the semantics of controller-runtime's
// default cache (pkg/cache/internal/cache_reader.go), each call answered by the sidecar.

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"time"

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

// minResourceVersion is informerd's option for a Raw resourceVersion: none (false) for "" and
// "0", which the API server reads as "any version".
func minResourceVersion(rv string) (informerd.ResourceVersionOption, bool) {
	return informerd.MinResourceVersion(rv), rv != "" && rv != "0"
}

// Get reads one object from the sidecar into out (typed, *unstructured.Unstructured or
// *metav1.PartialObjectMetadata). A missing object, or one outside the manager's view of its
// kind (the selectors of cache.Options), is the API's NotFound error, with the kind as the
// resource, as the default cache returns it; a namespace outside the view is an error.
func (c *Cache) Get(ctx context.Context, key client.ObjectKey, out client.Object, opts ...client.GetOption) error {
	getOpts := client.GetOptions{}
	getOpts.ApplyOptions(opts)
	ctx, cancel, sh, res, err := c.resolveRead(ctx, out)
	if err != nil {
		return err
	}
	defer cancel()
	v, err := c.viewOf(ctx, res)
	if err != nil {
		return err
	}
	notFound := apierrors.NewNotFound(schema.GroupResource{Group: sh.gvk.Group, Resource: sh.gvk.Kind}, key.Name)
	if !res.namespaced {
		key.Namespace = ""
	} else if key.Namespace == "" {
		return notFound // the default cache has no object under a bare name of a namespaced kind
	}
	sc, ok := v.scopeOf(key.Namespace)
	if !ok {
		return fmt.Errorf("unable to get: %v because of unknown namespace for the cache", key)
	}
	// The handlers decode the JSON alone: the proto labels map would be decoded for nothing.
	iopts := []informerd.GetOption{informerd.WaitForSync(), informerd.OmitLabels()}
	if !sc.selecting() {
		// A selecting scope matches on the whole object.
		iopts = append(iopts, informerd.WithFields(sh.fields()...))
	}
	if getOpts.Raw != nil {
		if rv, ok := minResourceVersion(getOpts.Raw.ResourceVersion); ok {
			iopts = append(iopts, rv)
		}
	}
	var resp *informerdv1.GetResponse
	err = untilSynced(ctx, func() (err error) {
		resp, err = c.client.GetObject(ctx, res.name, key.Namespace, key.Name, iopts...)
		return err
	})
	if err != nil {
		if informerd.IsNotFound(err) {
			return notFound
		}
		if terr := timeoutOf(ctx, sh); terr != nil {
			return terr
		}
		return fmt.Errorf("crcache: Get %s %s: %w", sh, key, err)
	}
	data := resp.GetObject().GetJson()
	if in, err := sc.matches(data); err != nil || !in {
		if err != nil {
			return err
		}
		return notFound
	}
	if err := decodeInto(data, out); err != nil {
		return err
	}
	out.GetObjectKind().SetGroupVersionKind(sh.gvk)
	return sc.applyInto(out)
}

// List reads the matching objects from the sidecar into out. As in the default cache: a field
// selector must be exact (=, ==) on fields registered with IndexField; a positive Limit returns
// the first items (the sidecar stops there; zero or negative: every item); Continue is refused
// and the list's continue is "continue-not-supported"; the list's resourceVersion is empty
// (informerd's revisions are not the API server's); a namespace outside the manager's view is
// an error, and listing every namespace lists each one of the view. Unlike the default cache,
// which ignores it, Raw.ResourceVersion (MinResourceVersion) makes the List read your own writes.
func (c *Cache) List(ctx context.Context, out client.ObjectList, opts ...client.ListOption) error {
	listOpts := client.ListOptions{}
	listOpts.ApplyOptions(opts)
	if listOpts.Continue != "" {
		// The default cache's words, which callers match on.
		return errors.New("continue list option is not supported by the cache")
	}
	ctx, cancel, sh, res, err := c.resolveRead(ctx, out)
	if err != nil {
		return err
	}
	defer cancel()
	scopes, err := c.listScopes(ctx, res, listOpts.Namespace)
	if err != nil {
		return err
	}
	var items []runtime.Object
	for _, sc := range scopes {
		if listOpts.Limit > 0 && int64(len(items)) >= listOpts.Limit {
			break
		}
		more, err := c.listScope(ctx, sh, res, sc, listOpts, int64(len(items)))
		if err != nil {
			return err
		}
		items = append(items, more...)
	}
	if err := meta.SetList(out, items); err != nil {
		return err
	}
	out.SetContinue("continue-not-supported")
	return nil
}

// listScopes are the scopes a List of namespace ns ("" for all) reads: none for a namespace
// of a cluster-scoped kind.
func (c *Cache) listScopes(ctx context.Context, res resource, ns string) ([]scope, error) {
	v, err := c.viewOf(ctx, res)
	if err != nil {
		return nil, err
	}
	switch {
	case ns != "" && !res.namespaced:
		return nil, nil
	case ns != "":
		sc, ok := v.scopeOf(ns)
		if !ok {
			return nil, fmt.Errorf("unable to list: %v because of unknown namespace for the cache", ns)
		}
		return []scope{sc}, nil
	}
	return v.scopes, nil
}

// listScope lists one scope's matches, after `have` items of other scopes.
func (c *Cache) listScope(ctx context.Context, sh shape, res resource, sc scope, o client.ListOptions, have int64) ([]runtime.Object, error) {
	iopts, none, err := c.listOptions(res, sc, o)
	if err != nil || none {
		return nil, err
	}
	if o.Limit > 0 {
		iopts = append(iopts, informerd.WithLimit(o.Limit-have))
	}
	var items []runtime.Object
	var derr error
	iopts = append(iopts, informerd.WaitForSync(), informerd.WithFields(sh.fields()...), informerd.OmitLabels())
	err = untilSynced(ctx, func() error {
		items, derr = nil, nil
		_, _, err := c.client.ListObjects(ctx, res.name, func(obj *informerdv1.Object) {
			if derr != nil {
				return
			}
			var o client.Object
			if o, derr = sh.decode(c.scheme, obj.GetJson()); derr == nil {
				o, derr = sc.apply(o)
				items = append(items, o)
			}
		}, iopts...)
		return err
	})
	if err != nil {
		if terr := timeoutOf(ctx, sh); terr != nil {
			return nil, terr
		}
		return nil, fmt.Errorf("crcache: List %s: %w", sh, err)
	}
	return items, derr
}

// listOptions turns controller-runtime's list options, within a scope, into informerd's; none
// means nothing can match (labels.Nothing()).
func (c *Cache) listOptions(res resource, sc scope, o client.ListOptions) (opts []informerd.ListOption, none bool, err error) {
	if sc.namespace != "" {
		opts = append(opts, informerd.InNamespace(sc.namespace))
	}
	labelText := selectorString(sc.labels)
	if sel := o.LabelSelector; sel != nil && !sel.Empty() {
		if matchesNothing(sel) {
			return nil, true, nil
		}
		labelText = joinSelectors(labelText, sel.String())
	}
	if labelText != "" {
		opts = append(opts, informerd.WithLabelSelector(labelText))
	}
	fieldText := fieldString(sc.fields)
	if o.FieldSelector != nil && !o.FieldSelector.Empty() {
		terms, lookup, err := c.fieldOptions(res, o.FieldSelector)
		if err != nil {
			return nil, false, err
		}
		fieldText = joinSelectors(fieldText, terms)
		opts = append(opts, lookup...)
	}
	if fieldText != "" {
		opts = append(opts, informerd.WithFieldSelector(fieldText))
	}
	if o.Raw != nil {
		if rv, ok := minResourceVersion(o.Raw.ResourceVersion); ok {
			opts = append(opts, rv)
		}
	}
	return opts, false, nil
}

// fieldOptions maps an exact field selector onto the informerd indexes registered by
// IndexField: a named index becomes an index lookup (one per List), a path index a term of
// the field selector.
func (c *Cache) fieldOptions(res resource, sel fields.Selector) (string, []informerd.ListOption, error) {
	c.mu.Lock()
	routes := c.indexes[res.name]
	c.mu.Unlock()
	var terms []string
	var opts []informerd.ListOption
	lookup := ""
	for _, req := range sel.Requirements() {
		if req.Operator != selection.Equals && req.Operator != selection.DoubleEquals {
			return "", nil, fmt.Errorf("non-exact field matches are not supported by the cache: %q uses %q; "+
				"select with = and filter the rest yourself", req.Field, req.Operator)
		}
		route, ok := routes[req.Field]
		if !ok {
			return "", nil, fmt.Errorf("index with name field:%s does not exist: register it with "+
				"IndexField(ctx, obj, %q, ...) before listing by it (informerd resource %q)", req.Field, req.Field, res.name)
		}
		if route.path != "" {
			terms = append(terms, route.path+"="+fields.EscapeValue(req.Value))
			continue
		}
		if lookup != "" {
			return "", nil, fmt.Errorf("crcache: the field selector uses two `cel:` indexes (%s, %s) and "+
				"informerd looks up one by name per List: make one of them a `path:` index, "+
				"or select by one and filter the rest yourself", lookup, route.name)
		}
		lookup = route.name
		opts = append(opts, informerd.WithIndex(route.name, req.Value))
	}
	return strings.Join(terms, ","), opts, nil
}

// detachedRead bounds a read that goes on past its caller's context (readContext).
const detachedRead = 10 * time.Second

// resolveRead is what a Get or List of obj reads: the shape, the resource serving it and the
// context to read under; the errors of ReaderFailOnMissingInformer and of an ended context.
//
// Decision: the default cache's reads from a synced informer are memory reads, which no
// context ends; its reads wait on the context only for an informer to sync (then Timeout).
// So a read of a shape whose informers here have synced goes on past an ended context
// (bounded by detachedRead), and any other read with an ended context is the Timeout error.
func (c *Cache) resolveRead(ctx context.Context, obj runtime.Object) (context.Context, context.CancelFunc, shape, resource, error) {
	none := func() {}
	sh, err := c.shapeOfAny(obj)
	if err != nil {
		return nil, none, shape{}, resource{}, err
	}
	if err := c.checkRequested(sh); err != nil {
		return nil, none, shape{}, resource{}, err
	}
	ended := ctx.Err() != nil
	cancel := none
	if ended {
		if !c.informerRequested(sh) {
			return nil, none, shape{}, resource{}, timeoutOf(ctx, sh)
		}
		ctx, cancel = context.WithTimeout(context.WithoutCancel(ctx), detachedRead)
	}
	sh, res, err := c.lookup(ctx, sh)
	if err == nil && ended && !c.sidecarSynced(ctx, res) {
		err = apierrors.NewTimeoutError(fmt.Sprintf("failed waiting for %s informer to sync: the context ended", sh), 0)
	}
	if err != nil {
		cancel()
		return nil, none, shape{}, resource{}, err
	}
	return ctx, cancel, sh, res, nil
}

// informerRequested reports whether GetInformer was called for sh.
func (c *Cache) informerRequested(sh shape) bool {
	c.mu.Lock()
	defer c.mu.Unlock()
	_, ok := c.requested[sh]
	return ok
}

// sidecarSynced reports whether the sidecar's cache of res has synced (the sidecar is the
// cache crcache reads).
func (c *Cache) sidecarSynced(ctx context.Context, res resource) bool {
	st, err := c.client.Status(ctx, res.name)
	return err == nil && st.GetSynced()
}

// untilSynced calls read again while the sidecar answers NotSynced (a scope it cannot list
// yet, e.g. forbidden, fails wait_for_sync at once), until ctx ends: as the default cache's
// reads block until its informer has synced, and then fail with the API's Timeout.
func untilSynced(ctx context.Context, read func() error) error {
	for {
		err := read()
		if err == nil || informerd.Reason(err) != informerd.ReasonNotSynced {
			return err
		}
		select {
		case <-ctx.Done():
			return err
		case <-time.After(200 * time.Millisecond):
		}
	}
}
