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
	"sort"
	"strings"
	"sync"
	"time"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/client-go/kubernetes/scheme"
	"k8s.io/client-go/rest"
	toolscache "k8s.io/client-go/tools/cache"
	"sigs.k8s.io/controller-runtime/pkg/cache"
	"sigs.k8s.io/controller-runtime/pkg/client"

	informerd "informerd.io/clients/go"
)

// Options configures the informerd cache.
type Options struct {
	// Target is the sidecar's address: "unix:///path.sock", a plain path, or "127.0.0.1:7070".
	// Empty: $INFORMERD_SOCKET, else informerd.DefaultSocket (informerd.Dial). Ignored when
	// Client is set.
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

	viewOptions viewOptions
	views       map[schema.GroupVersionKind]*view // resolved on first use of a kind
	// requested holds the shapes GetInformer was called for, which ReaderFailOnMissingInformer
	// lets a read use.
	requested     map[shape]struct{}
	failOnMissing bool
	watchErrors   toolscache.WatchErrorHandlerWithContext
}

var _ cache.Cache = (*Cache)(nil)

// NewCacheFunc returns the function for ctrl.Options.NewCache (or cluster.Options.NewCache).
func NewCacheFunc(o Options) cache.NewCacheFunc {
	return func(_ *rest.Config, opts cache.Options) (cache.Cache, error) { return New(o, opts) }
}

// New returns an informerd cache. Of controller-runtime's cache.Options it honours Scheme,
// DefaultNamespaces, ByObject, DefaultLabelSelector, DefaultFieldSelector and DefaultTransform
// (a per-kind view of the sidecar's cache, resolved as the default cache resolves them: see
// view.go), ReaderFailOnMissingInformer and DefaultWatchErrorHandler. UnsafeDisableDeepCopy
// (default or per kind) is accepted and changes nothing: every read decodes a fresh object.
// DefaultEnableWatchBookmarks is accepted (informerd's watches always resume). SyncPeriod is
// ignored: informerd never resyncs (requeue with RequeueAfter, as controller-runtime advises).
// NewInformer is refused: the informers are informerd watches.
func New(o Options, opts cache.Options) (*Cache, error) {
	if opts.NewInformer != nil {
		return nil, errors.New("crcache: cache.Options.NewInformer is not supported by the informerd cache: " +
			"informers are informerd watches of the sidecar's configured resources; remove the option")
	}
	c := &Cache{
		client:        o.Client,
		scheme:        opts.Scheme,
		informers:     map[string]*sharedInformer{},
		indexes:       map[string]map[string]indexRoute{},
		started:       make(chan struct{}),
		views:         map[schema.GroupVersionKind]*view{},
		requested:     map[shape]struct{}{},
		failOnMissing: opts.ReaderFailOnMissingInformer,
		watchErrors:   opts.DefaultWatchErrorHandler,
	}
	if c.scheme == nil {
		c.scheme = scheme.Scheme
	}
	opts.Scheme = c.scheme
	var err error
	if c.viewOptions, err = newViewOptions(opts); err != nil {
		return nil, err
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

// Client returns the connection to the sidecar, for reads this package does not wrap.
func (c *Cache) Client() *informerd.Client { return c.client }

// Start runs the informers until ctx ends; informers asked for later start at once. It blocks.
func (c *Cache) Start(ctx context.Context) error {
	c.mu.Lock()
	if c.runCtx != nil {
		c.mu.Unlock()
		// The default cache's words, which callers match on.
		return errors.New("crcache: informer already started: Start was called twice")
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
	if err := timeoutOf(ctx, sh); err != nil {
		return nil, err
	}
	res, err := c.resolver.lookup(ctx, sh.gvk)
	if err != nil {
		if terr := timeoutOf(ctx, sh); terr != nil {
			return nil, terr
		}
		return nil, err
	}
	v, err := c.viewOf(ctx, res)
	if err != nil {
		return nil, err
	}
	o := cache.InformerGetOptions{}
	for _, opt := range opts {
		opt(&o)
	}
	c.mu.Lock()
	inf := &informer{shape: sh}
	for _, sc := range v.scopes {
		key := res.name + "\x00" + sc.key()
		s, ok := c.informers[key]
		if !ok {
			s = newSharedInformer(c, res, sc)
			c.informers[key] = s
			if c.runCtx != nil {
				s.start(c.runCtx)
			}
		}
		inf.parts = append(inf.parts, s)
	}
	c.requested[sh] = struct{}{}
	started := c.runCtx != nil
	c.mu.Unlock()
	if started && (o.BlockUntilSynced == nil || *o.BlockUntilSynced) && !inf.HasSynced() {
		if !waitFor(ctx, inf.HasSynced) {
			return nil, timeoutOf(ctx, sh)
		}
	}
	return inf, nil
}

// viewOf is how this manager sees res's kind (the options of New, resolved once per kind). A
// view naming namespaces the sidecar does not cache for the resource is an error naming the
// configuration to add, never a silently empty read.
func (c *Cache) viewOf(ctx context.Context, res resource) (*view, error) {
	c.mu.Lock()
	v, ok := c.views[res.gvk]
	c.mu.Unlock()
	if ok {
		return v, nil
	}
	v, err := c.viewOptions.viewOf(res.gvk, res.namespaced)
	if err != nil {
		return nil, err
	}
	if err := c.checkNamespaces(ctx, res, v); err != nil {
		return nil, err
	}
	c.mu.Lock()
	c.views[res.gvk] = v
	c.mu.Unlock()
	return v, nil
}

// checkNamespaces makes sure the sidecar caches every namespace a view names (a resource
// cached cluster-wide or by namespaceSelector caches whichever exist).
func (c *Cache) checkNamespaces(ctx context.Context, res resource, v *view) error {
	if v.byNamespace == nil {
		return nil
	}
	st, err := c.client.Status(ctx, res.name)
	if err != nil {
		return fmt.Errorf("crcache: ask informerd which namespaces it caches for %q (Status): %w", res.name, err)
	}
	cached := map[string]bool{}
	for _, r := range st.GetResources() {
		for _, sc := range r.GetScopes() {
			if sc.GetScope() == "*" || sc.GetScope() == "namespaceSelector" {
				return nil
			}
			cached[sc.GetScope()] = true
		}
	}
	var missing []string
	for ns := range v.byNamespace {
		if ns != "" && !cached[ns] {
			missing = append(missing, ns)
		}
	}
	if len(missing) == 0 {
		return nil
	}
	sort.Strings(missing)
	have := make([]string, 0, len(cached))
	for ns := range cached {
		have = append(have, ns)
	}
	sort.Strings(have)
	return fmt.Errorf("crcache: the cache options name namespace(s) %s of %s, which informerd does not cache "+
		"(resource %q caches %s): add them to that resource's `namespaces:` in the sidecar's configuration, "+
		"or remove them from DefaultNamespaces / ByObject.Namespaces",
		strings.Join(missing, ", "), res.gvk, res.name, strings.Join(have, ", "))
}

// checkRequested is ReaderFailOnMissingInformer: with it, a read of a shape no GetInformer
// asked for fails as in the default cache.
func (c *Cache) checkRequested(sh shape) error {
	if !c.failOnMissing {
		return nil
	}
	c.mu.Lock()
	_, ok := c.requested[sh]
	c.mu.Unlock()
	if !ok {
		return &cache.ErrResourceNotCached{GVK: sh.gvk}
	}
	return nil
}

// timeoutOf is the default cache's error for a call whose context has ended (callers test it
// with apierrors.IsTimeout); nil while ctx is live.
func timeoutOf(ctx context.Context, sh shape) error {
	if ctx.Err() == nil {
		return nil
	}
	return apierrors.NewTimeoutError(fmt.Sprintf("failed waiting for %s informer to sync: %v", sh, ctx.Err()), 0)
}

// resolve returns the shape of an object or of a list's items, and the informerd resource
// that serves its kind.
func (c *Cache) resolve(ctx context.Context, obj runtime.Object) (shape, resource, error) {
	sh, err := c.shapeOfAny(obj)
	if err != nil {
		return shape{}, resource{}, err
	}
	if err := timeoutOf(ctx, sh); err != nil {
		return shape{}, resource{}, err
	}
	return c.lookup(ctx, sh)
}

// shapeOfAny is the shape of an object, or of a list's items.
func (c *Cache) shapeOfAny(obj runtime.Object) (shape, error) {
	if list, ok := obj.(client.ObjectList); ok && meta.IsListType(obj) {
		return shapeOfList(list, c.scheme)
	}
	return shapeOf(obj, c.scheme)
}

// lookup is the resource serving a shape's kind.
func (c *Cache) lookup(ctx context.Context, sh shape) (shape, resource, error) {
	res, err := c.resolver.lookup(ctx, sh.gvk)
	if terr := timeoutOf(ctx, sh); err != nil && terr != nil {
		return shape{}, resource{}, terr
	}
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

// RemoveInformer stops the shared watches of obj's kind in this manager's view (for every
// shape of it) and forgets them; their handlers receive nothing more.
func (c *Cache) RemoveInformer(ctx context.Context, obj client.Object) error {
	sh, res, err := c.resolve(ctx, obj)
	if err != nil {
		return err
	}
	v, err := c.viewOf(ctx, res)
	if err != nil {
		return err
	}
	var stop []*sharedInformer
	c.mu.Lock()
	for _, sc := range v.scopes {
		key := res.name + "\x00" + sc.key()
		if s, ok := c.informers[key]; ok {
			stop = append(stop, s)
			delete(c.informers, key)
		}
	}
	for other := range c.requested {
		if other.gvk == sh.gvk {
			delete(c.requested, other)
		}
	}
	c.mu.Unlock()
	for _, s := range stop {
		s.stop()
	}
	return nil
}
