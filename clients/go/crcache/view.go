package crcache

// A manager's view of each kind: controller-runtime's cache options (DefaultNamespaces,
// ByObject, the default selectors and transform) resolved per kind into scopes, by the same
// rules as the default cache's defaultOpts (pkg/cache/cache.go), which turns them into
// informers. A scope is what one informerd List or Watch asks for: a namespace (or all), label
// and field selectors, and the transform the manager runs on what it receives.
//
// Decision: the options narrow what the manager reads from the sidecar's cache; they never
// widen it. The selectors travel with every request (the sidecar matches them, and a watch
// sends a deletion when an object stops matching, as the API server does); a field selector
// may name metadata.name, metadata.namespace or a field the sidecar indexes by `path:`, and any
// other field is the sidecar's INVALID_ARGUMENT naming its selectable fields, at the first read.
// A namespace the sidecar does not cache is the sidecar's answer too: the options cannot
// silently read a subset.

import (
	"fmt"
	"maps"
	"slices"
	"sort"
	"strings"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/fields"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/runtime/schema"
	toolscache "k8s.io/client-go/tools/cache"
	"sigs.k8s.io/controller-runtime/pkg/cache"
	"sigs.k8s.io/controller-runtime/pkg/client/apiutil"
)

// scope is one selection of a kind's objects.
type scope struct {
	// namespace is "" for every namespace (or, in a view of several namespaces, every
	// namespace the view does not list, excluded by the field selector).
	namespace string
	labels    labels.Selector // nil: every object
	fields    fields.Selector // nil: every object
	transform toolscache.TransformFunc
}

// key identifies the informerd watch this scope needs (the transform runs in the manager).
func (s scope) key() string {
	return s.namespace + "\x00" + selectorString(s.labels) + "\x00" + fieldString(s.fields)
}

// selecting reports whether the scope selects by labels or fields at all.
func (s scope) selecting() bool {
	return (s.labels != nil && !s.labels.Empty()) || (s.fields != nil && !s.fields.Empty())
}

func selectorString(sel labels.Selector) string {
	if sel == nil || sel.Empty() {
		return ""
	}
	return sel.String()
}

func fieldString(sel fields.Selector) string {
	if sel == nil || sel.Empty() {
		return ""
	}
	return sel.String()
}

// matchesNothing reports whether a label selector is labels.Nothing(), which has no text.
func matchesNothing(sel labels.Selector) bool {
	return sel != nil && !sel.Empty() && sel.String() == ""
}

// view is how the manager sees one kind: one scope for every namespace, or one per namespace
// it was given (with "" for every other namespace, if that was given too).
type view struct {
	scopes []scope
	// byNamespace is set for a view of listed namespaces: the index of each one's scope.
	byNamespace map[string]int
}

// scopeOf returns the scope that serves namespace ns; false for a namespace the view does not
// include.
func (v *view) scopeOf(ns string) (scope, bool) {
	if v.byNamespace == nil {
		s := v.scopes[0]
		if ns != "" {
			s.namespace = ns
		}
		return s, true
	}
	if i, ok := v.byNamespace[ns]; ok {
		return v.scopes[i], true
	}
	if i, ok := v.byNamespace[metav1.NamespaceAll]; ok {
		s := v.scopes[i]
		s.namespace = ns
		return s, true
	}
	return scope{}, false
}

// viewOptions are the options of New that choose what the manager sees.
type viewOptions struct {
	defaults          cache.Config
	defaultNamespaces map[string]cache.Config
	byObject          map[schema.GroupVersionKind]cache.ByObject
}

func newViewOptions(opts cache.Options) (viewOptions, error) {
	v := viewOptions{
		defaults: cache.Config{
			LabelSelector:         opts.DefaultLabelSelector,
			FieldSelector:         opts.DefaultFieldSelector,
			Transform:             opts.DefaultTransform,
			UnsafeDisableDeepCopy: opts.DefaultUnsafeDisableDeepCopy,
			EnableWatchBookmarks:  opts.DefaultEnableWatchBookmarks,
			SyncPeriod:            opts.SyncPeriod,
		},
		defaultNamespaces: maps.Clone(opts.DefaultNamespaces),
		byObject:          map[schema.GroupVersionKind]cache.ByObject{},
	}
	for obj, by := range opts.ByObject {
		gvk, err := apiutil.GVKForObject(obj, opts.Scheme)
		if err != nil {
			return viewOptions{}, fmt.Errorf("crcache: cache.Options.ByObject: failed to get GVK for type %T: %w", obj, err)
		}
		v.byObject[gvk] = by
	}
	return v, nil
}

// viewOf resolves the options for one kind, as the default cache's defaultOpts does.
func (o viewOptions) viewOf(gvk schema.GroupVersionKind, namespaced bool) (*view, error) {
	by, hasBy := o.byObject[gvk]
	if !hasBy {
		if namespaced && len(o.defaultNamespaces) > 0 {
			configs := map[string]cache.Config{}
			for ns, cfg := range o.defaultNamespaces {
				configs[ns] = defaultConfig(cfg, o.defaults)
			}
			return namespacesView(configs), nil
		}
		return singleView(o.defaults), nil
	}
	if !namespaced && by.Namespaces != nil {
		return nil, fmt.Errorf("crcache: type %s is not namespaced, but its ByObject.Namespaces setting is not nil", gvk)
	}
	typeLevel := cache.Config{
		LabelSelector: by.Label, FieldSelector: by.Field, Transform: by.Transform,
		UnsafeDisableDeepCopy: by.UnsafeDisableDeepCopy, EnableWatchBookmarks: by.EnableWatchBookmarks,
		SyncPeriod: by.SyncPeriod,
	}
	namespaces := by.Namespaces
	if namespaced && namespaces == nil {
		namespaces = o.defaultNamespaces
	}
	if namespaced && len(namespaces) > 0 {
		configs := map[string]cache.Config{}
		for ns, cfg := range namespaces {
			cfg = defaultConfig(cfg, typeLevel)
			if d, ok := o.defaultNamespaces[ns]; ok {
				cfg = defaultConfig(cfg, d)
			}
			configs[ns] = defaultConfig(cfg, o.defaults)
		}
		return namespacesView(configs), nil
	}
	return singleView(defaultConfig(typeLevel, o.defaults)), nil
}

// defaultConfig fills what toDefault leaves unset from defaultFrom.
func defaultConfig(toDefault, defaultFrom cache.Config) cache.Config {
	if toDefault.LabelSelector == nil {
		toDefault.LabelSelector = defaultFrom.LabelSelector
	}
	if toDefault.FieldSelector == nil {
		toDefault.FieldSelector = defaultFrom.FieldSelector
	}
	if toDefault.Transform == nil {
		toDefault.Transform = defaultFrom.Transform
	}
	if toDefault.UnsafeDisableDeepCopy == nil {
		toDefault.UnsafeDisableDeepCopy = defaultFrom.UnsafeDisableDeepCopy
	}
	if toDefault.EnableWatchBookmarks == nil {
		toDefault.EnableWatchBookmarks = defaultFrom.EnableWatchBookmarks
	}
	if toDefault.SyncPeriod == nil {
		toDefault.SyncPeriod = defaultFrom.SyncPeriod
	}
	return toDefault
}

func singleView(cfg cache.Config) *view {
	return &view{scopes: []scope{{labels: cfg.LabelSelector, fields: cfg.FieldSelector, transform: cfg.Transform}}}
}

// namespacesView is a view of the given namespaces; "" among them stands for every other
// namespace, which its field selector then excludes.
func namespacesView(configs map[string]cache.Config) *view {
	names := slices.Collect(maps.Keys(configs))
	sort.Strings(names)
	v := &view{byNamespace: map[string]int{}}
	for _, ns := range names {
		cfg := configs[ns]
		fs := cfg.FieldSelector
		if ns == metav1.NamespaceAll {
			var terms []fields.Selector
			for _, other := range names {
				if other != metav1.NamespaceAll {
					terms = append(terms, fields.OneTermNotEqualSelector("metadata.namespace", other))
				}
			}
			if fs != nil {
				terms = append(terms, fs)
			}
			if len(terms) > 0 {
				fs = fields.AndSelectors(terms...)
			}
		}
		v.byNamespace[ns] = len(v.scopes)
		v.scopes = append(v.scopes, scope{namespace: ns, labels: cfg.LabelSelector, fields: fs, transform: cfg.Transform})
	}
	return v
}

// joinSelectors ANDs selector texts, skipping empty ones.
func joinSelectors(parts ...string) string {
	var out []string
	for _, p := range parts {
		if p != "" {
			out = append(out, p)
		}
	}
	return strings.Join(out, ",")
}
