// Package crcache is a controller-runtime cache (sigs.k8s.io/controller-runtime/pkg/cache.Cache)
// backed by informerd: a manager reads the sidecar's shared, field-stripped cache instead of
// keeping its own informers, by setting one option:
//
//	mgr, err := ctrl.NewManager(cfg, ctrl.Options{
//		NewCache: crcache.NewCacheFunc(crcache.Options{}), // unix:///run/informerd/informerd.sock
//	})
//
// Reads (Get, List) go to the sidecar each time; informers share one informerd Watch per
// resource among every handler, with the resume and relist of informerd.Informer. The process
// keeps no objects, only each watched object's metadata (for the old side of updates). See
// README.md for what behaves differently from the default cache.
package crcache

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"time"

	"k8s.io/apimachinery/pkg/api/meta"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/client-go/kubernetes/scheme"
	"k8s.io/client-go/rest"
	"sigs.k8s.io/controller-runtime/pkg/cache"
	"sigs.k8s.io/controller-runtime/pkg/client"

	informerd "informerd.io/clients/go"
)

// Options configures the informerd cache.
type Options struct {
	// Target is the sidecar's address: "unix:///path.sock", a plain path, or "127.0.0.1:7070".
	// Empty: informerd.DefaultSocket. Ignored when Client is set.
	Target string
	// Client, when set, is the connection to use (the cache does not close it).
	Client *informerd.Client
	// TokenFile, for a sidecar with server.authorization: kubernetes (node-local mode), is the
	// file of the ServiceAccount token sent on every call: a projected token for the audience
	// informerd, read again when the kubelet rotates it (informerd.WithTokenFile). The
	// sidecar serves only what that ServiceAccount's RBAC lets it read.
	TokenFile string
	// Token is a token that does not rotate, sent on every call (informerd.WithToken). Prefer
	// TokenFile for a projected token. At most one of Token and TokenFile; neither with
	// Client (dial it with informerd.WithToken or WithTokenFile instead).
	Token string
	// Resources names the informerd resource (resources[].name of the sidecar's
	// configuration) serving a kind, for a kind the sidecar caches as several resources.
	// Every other kind is found by its apiVersion and kind in the sidecar's Status.
	Resources map[schema.GroupVersionKind]string
}

// Cache is a controller-runtime cache backed by informerd.
type Cache struct {
	client   *informerd.Client
	ownsConn bool
	scheme   *runtime.Scheme
	resolver *resolver

	mu        sync.Mutex
	informers map[string]*sharedInformer // by informerd resource name
	indexes   map[string]map[string]indexRoute
	runCtx    context.Context // set by Start
	started   chan struct{}
}

var _ cache.Cache = (*Cache)(nil)

// NewCacheFunc returns the function for ctrl.Options.NewCache (or cluster.Options.NewCache).
func NewCacheFunc(o Options) cache.NewCacheFunc {
	return func(_ *rest.Config, opts cache.Options) (cache.Cache, error) { return New(o, opts) }
}

// New returns an informerd cache. Of controller-runtime's cache.Options it uses Scheme; it
// refuses the options that filter or transform what is cached (DefaultNamespaces, ByObject,
// DefaultLabelSelector, DefaultFieldSelector, DefaultTransform, NewInformer,
// DefaultUnsafeDisableDeepCopy): the sidecar's configuration does that for every controller on
// the pod, and a silently ignored filter would give wrong answers. SyncPeriod is ignored:
// informerd never resyncs (requeue with RequeueAfter, as controller-runtime advises).
func New(o Options, opts cache.Options) (*Cache, error) {
	if err := refuseFilters(opts); err != nil {
		return nil, err
	}
	c := &Cache{
		client:    o.Client,
		scheme:    opts.Scheme,
		informers: map[string]*sharedInformer{},
		indexes:   map[string]map[string]indexRoute{},
		started:   make(chan struct{}),
	}
	if c.scheme == nil {
		c.scheme = scheme.Scheme
	}
	if c.client == nil {
		dial, err := tokenOption(o)
		if err != nil {
			return nil, err
		}
		conn, err := informerd.Dial(o.Target, dial...)
		if err != nil {
			return nil, fmt.Errorf("crcache: %w", err)
		}
		c.client, c.ownsConn = conn, true
	} else if o.Token != "" || o.TokenFile != "" {
		return nil, errors.New("crcache: Options.Token and Options.TokenFile apply to the connection the cache " +
			"dials, not to Options.Client: dial the client with informerd.WithToken or informerd.WithTokenFile, " +
			"or leave Client unset")
	}
	c.resolver = newResolver(c.client, o.Resources)
	return c, nil
}

// tokenOption is the dial option sending Options.Token or Options.TokenFile, if one is set.
func tokenOption(o Options) ([]informerd.DialOption, error) {
	switch {
	case o.Token != "" && o.TokenFile != "":
		return nil, errors.New("crcache: set one of Options.Token and Options.TokenFile, not both " +
			"(TokenFile for a projected ServiceAccount token, which rotates)")
	case o.TokenFile != "":
		return []informerd.DialOption{informerd.WithTokenFile(o.TokenFile)}, nil
	case o.Token != "":
		return []informerd.DialOption{informerd.WithToken(o.Token)}, nil
	}
	return nil, nil
}

func refuseFilters(opts cache.Options) error {
	refuse := func(option, instead string) error {
		return fmt.Errorf("crcache: cache.Options.%s is not supported by the informerd cache: %s in the "+
			"sidecar's configuration instead, and remove the option", option, instead)
	}
	switch {
	case len(opts.DefaultNamespaces) > 0:
		return refuse("DefaultNamespaces", "list the namespaces under the resource's `namespaces:`")
	case len(opts.ByObject) > 0:
		return refuse("ByObject", "set `namespaces:`, `labelSelector:`, `fieldSelector:` and `transform:` per resource")
	case opts.DefaultLabelSelector != nil && !opts.DefaultLabelSelector.Empty():
		return refuse("DefaultLabelSelector", "set the resource's `labelSelector:`")
	case opts.DefaultFieldSelector != nil && !opts.DefaultFieldSelector.Empty():
		return refuse("DefaultFieldSelector", "set the resource's `fieldSelector:`")
	case opts.DefaultTransform != nil:
		return refuse("DefaultTransform", "drop fields with the resource's `transform: {drop: [...]}`")
	case opts.NewInformer != nil:
		return refuse("NewInformer", "informers are informerd watches; configure the resource")
	case opts.DefaultUnsafeDisableDeepCopy != nil && *opts.DefaultUnsafeDisableDeepCopy:
		return errUnsafeDisableDeepCopy("cache.Options.DefaultUnsafeDisableDeepCopy")
	}
	return nil
}

func errUnsafeDisableDeepCopy(where string) error {
	return fmt.Errorf("crcache: %s is not supported: informerd's objects are shared by every controller "+
		"on the pod and are never handed out uncopied; every read already returns a fresh object, so remove the option", where)
}

// Client returns the connection to the sidecar, for reads this package does not wrap.
func (c *Cache) Client() *informerd.Client { return c.client }

// Start runs the informers until ctx ends; informers asked for later start at once. It blocks.
func (c *Cache) Start(ctx context.Context) error {
	c.mu.Lock()
	if c.runCtx != nil {
		c.mu.Unlock()
		return errors.New("crcache: Start was called twice")
	}
	c.runCtx = ctx
	for _, s := range c.informers {
		s.start(ctx)
	}
	close(c.started)
	c.mu.Unlock()

	<-ctx.Done()
	c.mu.Lock()
	all := make([]*sharedInformer, 0, len(c.informers))
	for _, s := range c.informers {
		all = append(all, s)
	}
	c.mu.Unlock()
	for _, s := range all {
		s.wait()
	}
	if c.ownsConn {
		_ = c.client.Close()
	}
	return nil
}

// NeedLeaderElection tells the manager to run the cache whether or not it leads.
func (c *Cache) NeedLeaderElection() bool { return false }

// WaitForCacheSync waits until Start has been called and every informer has delivered its
// initial state; false if ctx ends first or an informer stopped before it synced.
func (c *Cache) WaitForCacheSync(ctx context.Context) bool {
	select {
	case <-c.started:
	case <-ctx.Done():
		return false
	}
	for {
		c.mu.Lock()
		all := make([]*sharedInformer, 0, len(c.informers))
		for _, s := range c.informers {
			all = append(all, s)
		}
		c.mu.Unlock()
		synced := true
		for _, s := range all {
			if s.IsStopped() && !s.HasSynced() {
				return false
			}
			synced = synced && s.HasSynced()
		}
		if synced {
			return true
		}
		select {
		case <-ctx.Done():
			return false
		case <-time.After(20 * time.Millisecond):
		}
	}
}

// GetInformer returns the informer of obj's kind, in obj's shape (typed, unstructured or
// metadata), starting the resource's shared watch if the cache has started. Unless
// BlockUntilSynced(false), it waits until the informer has synced when the cache has started.
func (c *Cache) GetInformer(ctx context.Context, obj client.Object, opts ...cache.InformerGetOption) (cache.Informer, error) {
	sh, err := shapeOf(obj, c.scheme)
	if err != nil {
		return nil, err
	}
	return c.informerFor(ctx, sh, opts)
}

// GetInformerForKind is GetInformer for a kind of the scheme, in its typed shape.
func (c *Cache) GetInformerForKind(ctx context.Context, gvk schema.GroupVersionKind, opts ...cache.InformerGetOption) (cache.Informer, error) {
	if _, err := c.scheme.New(gvk); err != nil {
		return nil, err
	}
	return c.informerFor(ctx, shape{gvk: gvk, kind: typed}, opts)
}

func (c *Cache) informerFor(ctx context.Context, sh shape, opts []cache.InformerGetOption) (cache.Informer, error) {
	res, err := c.resolver.lookup(ctx, sh.gvk)
	if err != nil {
		return nil, err
	}
	o := cache.InformerGetOptions{}
	for _, opt := range opts {
		opt(&o)
	}
	c.mu.Lock()
	s, ok := c.informers[res.name]
	if !ok {
		s = newSharedInformer(c, res)
		c.informers[res.name] = s
		if c.runCtx != nil {
			s.start(c.runCtx)
		}
	}
	started := c.runCtx != nil
	c.mu.Unlock()
	inf := &informer{s: s, shape: sh}
	if started && (o.BlockUntilSynced == nil || *o.BlockUntilSynced) && !s.HasSynced() {
		if !waitFor(ctx, s.HasSynced) {
			return nil, fmt.Errorf("crcache: informer of %s did not sync: %w", sh, ctx.Err())
		}
	}
	return inf, nil
}

// resolve returns the shape of an object or of a list's items, and the informerd resource
// that serves its kind.
func (c *Cache) resolve(ctx context.Context, obj runtime.Object) (shape, resource, error) {
	var sh shape
	var err error
	if list, ok := obj.(client.ObjectList); ok && meta.IsListType(obj) {
		sh, err = shapeOfList(list, c.scheme)
	} else {
		sh, err = shapeOf(obj, c.scheme)
	}
	if err != nil {
		return shape{}, resource{}, err
	}
	res, err := c.resolver.lookup(ctx, sh.gvk)
	return sh, res, err
}

// waitFor polls cond until it holds (true) or ctx ends (false).
func waitFor(ctx context.Context, cond func() bool) bool {
	for !cond() {
		select {
		case <-ctx.Done():
			return false
		case <-time.After(20 * time.Millisecond):
		}
	}
	return true
}

// RemoveInformer stops the shared watch of obj's resource (for every shape of it) and forgets
// it; its handlers receive nothing more.
func (c *Cache) RemoveInformer(ctx context.Context, obj client.Object) error {
	_, res, err := c.resolve(ctx, obj)
	if err != nil {
		return err
	}
	c.mu.Lock()
	s, ok := c.informers[res.name]
	delete(c.informers, res.name)
	c.mu.Unlock()
	if ok {
		s.stop()
	}
	return nil
}
