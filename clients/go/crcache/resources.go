package crcache

// Which informerd resource serves a GroupVersionKind: the sidecar's Status names every
// resource with its apiVersion and kind, so the mapping comes from the sidecar itself and a
// manager needs no configuration of its own.

import (
	"context"
	"errors"
	"fmt"
	"sort"
	"strings"
	"sync"
	"time"

	"google.golang.org/grpc/codes"

	"k8s.io/apimachinery/pkg/runtime/schema"
	"sigs.k8s.io/controller-runtime/pkg/cache"

	informerd "informerd.io/clients/go"
	"informerd.io/clients/go/informerdv1"
)

// resource is one resource of the sidecar's configuration.
type resource struct {
	name       string
	gvk        schema.GroupVersionKind
	namespaced bool
}

// resolver maps GroupVersionKinds to the sidecar's resources, asking Status again when a kind
// is not known (the sidecar may have been restarted with a new configuration).
type resolver struct {
	c        *informerd.Client
	explicit map[schema.GroupVersionKind]string

	mu    sync.Mutex
	byGVK map[schema.GroupVersionKind][]resource
}

func newResolver(c *informerd.Client, explicit map[schema.GroupVersionKind]string) *resolver {
	return &resolver{c: c, explicit: explicit}
}

// startupWait bounds how long a lookup waits for a sidecar that is not reachable yet (it starts
// beside the controller, maybe a moment later) when the caller's context has no deadline.
const startupWait = 30 * time.Second

func (r *resolver) refresh(ctx context.Context) error {
	if _, ok := ctx.Deadline(); !ok {
		var cancel context.CancelFunc
		ctx, cancel = context.WithTimeout(ctx, startupWait)
		defer cancel()
	}
	var st *informerdv1.StatusResponse
	for {
		var err error
		st, err = r.c.Status(ctx, "")
		if err == nil {
			break
		}
		if informerd.Code(err) != codes.Unavailable || ctx.Err() != nil {
			return fmt.Errorf("crcache: ask informerd which resources it caches (Status): %w", err)
		}
		select {
		case <-ctx.Done():
		case <-time.After(200 * time.Millisecond):
		}
	}
	byGVK := map[schema.GroupVersionKind][]resource{}
	for _, res := range st.GetResources() {
		gv, err := schema.ParseGroupVersion(res.GetApiVersion())
		if err != nil {
			continue
		}
		gvk := gv.WithKind(res.GetKind())
		byGVK[gvk] = append(byGVK[gvk], resource{name: res.GetName(), gvk: gvk, namespaced: res.GetNamespaced()})
	}
	r.mu.Lock()
	r.byGVK = byGVK
	r.mu.Unlock()
	return nil
}

// lookup returns the resource serving gvk, or a *NotCachedError.
func (r *resolver) lookup(ctx context.Context, gvk schema.GroupVersionKind) (resource, error) {
	for attempt := 0; attempt < 2; attempt++ {
		r.mu.Lock()
		known := r.byGVK != nil
		candidates := r.byGVK[gvk]
		r.mu.Unlock()
		if known && (len(candidates) > 0 || attempt == 1) {
			return r.choose(gvk, candidates)
		}
		if err := r.refresh(ctx); err != nil {
			return resource{}, err
		}
	}
	panic("unreachable")
}

func (r *resolver) choose(gvk schema.GroupVersionKind, candidates []resource) (resource, error) {
	if name, ok := r.explicit[gvk]; ok {
		for _, c := range candidates {
			if c.name == name {
				return c, nil
			}
		}
		return resource{}, &NotCachedError{GVK: gvk, Resource: name}
	}
	switch len(candidates) {
	case 0:
		return resource{}, &NotCachedError{GVK: gvk}
	case 1:
		return candidates[0], nil
	}
	names := make([]string, len(candidates))
	for i, c := range candidates {
		names[i] = c.name
	}
	sort.Strings(names)
	return resource{}, fmt.Errorf("crcache: informerd caches %s as several resources (%s); "+
		"say which one this cache reads with crcache.Options.Resources[%#v] = %q",
		gvk, strings.Join(names, ", "), gvk, names[0])
}

// NotCachedError is the error of a read or informer for a kind the sidecar does not cache. It
// names the configuration to add; the cache never falls back to the API server. errors.As
// also finds controller-runtime's *cache.ErrResourceNotCached in it.
type NotCachedError struct {
	GVK schema.GroupVersionKind
	// Resource is the resource name given in Options.Resources, if that is what was missing.
	Resource string
}

func (e *NotCachedError) Error() string {
	if e.Resource != "" {
		return fmt.Sprintf("crcache: Options.Resources maps %s to informerd resource %q, which informerd does not "+
			"cache with that apiVersion and kind: fix Options.Resources or the sidecar's `resources:`", e.GVK, e.Resource)
	}
	apiVersion, kind := e.GVK.ToAPIVersionAndKind()
	return fmt.Sprintf("crcache: informerd does not cache %s (the cache never reads from the API server); "+
		"add it to the sidecar's configuration:\n  resources:\n  - apiVersion: %s\n    kind: %s",
		e.GVK, apiVersion, kind)
}

// Unwrap lets errors.As find controller-runtime's own error for an uncached kind.
func (e *NotCachedError) Unwrap() error { return &cache.ErrResourceNotCached{GVK: e.GVK} }

// IsNotCached reports whether err says the sidecar does not cache a kind.
func IsNotCached(err error) bool {
	var e *NotCachedError
	return errors.As(err, &e)
}
