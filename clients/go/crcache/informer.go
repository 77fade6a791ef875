package crcache

// controller-runtime's cache.Informer over one informerd Watch per resource: an
// informerd.Informer (resume, relist) feeds every handler of every shape, each handler with
// its own queue and goroutine as in client-go's shared informer.
//
// Decision: the process keeps, per watched object, only its metadata (apiVersion, kind,
// metadata) as last delivered: it is the old side of an update (ObjectOld carries the old
// labels, annotations, owner references, generation, resourceVersion; its spec and status are
// empty) and the object of a DeletedFinalStateUnknown. Keeping whole objects would be the
// copy informerd exists to remove; keeping less would break predicates such as
// GenerationChangedPredicate and owner handlers that read the old object.

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"strconv"
	"sync"
	"sync/atomic"
	"time"

	toolscache "k8s.io/client-go/tools/cache"
	"k8s.io/klog/v2"
	"sigs.k8s.io/controller-runtime/pkg/cache"

	informerd "informerd.io/clients/go"
	"informerd.io/clients/go/informerdv1"
)

// rawObject keeps an object's JSON as the sidecar sent it; each handler decodes it in its shape.
type rawObject struct{ data []byte }

// UnmarshalJSON keeps a copy of the bytes.
func (r *rawObject) UnmarshalJSON(b []byte) error {
	r.data = append([]byte(nil), b...)
	return nil
}

// viewEntry is what the shared informer remembers of an object it has delivered.
type viewEntry struct {
	rv   string
	meta []byte // {"apiVersion", "kind", "metadata"} of the last state delivered
}

type sharedInformer struct {
	c     *Cache
	res   resource
	scope scope
	inf   *informerd.Informer[rawObject]
	log   klog.Logger

	// mu is held while an event is dispatched to the handlers' queues and while a handler
	// joins, so that a joining handler's initial additions and the events after them meet
	// exactly.
	mu       sync.Mutex
	view     map[string]viewEntry
	handlers map[*registration]struct{}

	synced atomic.Bool
	// lastRV is the newest resourceVersion among the objects delivered (LastSyncResourceVersion).
	lastRV   atomic.Uint64
	syncedCh chan struct{}
	stopped  atomic.Bool

	runMu  sync.Mutex
	ctx    context.Context
	cancel context.CancelFunc
	done   chan struct{}
}

func newSharedInformer(c *Cache, res resource, sc scope) *sharedInformer {
	s := &sharedInformer{
		c:        c,
		res:      res,
		scope:    sc,
		log:      klog.Background().WithValues("informerd-resource", res.name),
		view:     map[string]viewEntry{},
		handlers: map[*registration]struct{}{},
		syncedCh: make(chan struct{}),
	}
	s.inf = informerd.NewInformer[rawObject](c.client, res.name, informerd.HandlerFuncs[rawObject]{
		AddFunc:    s.onAdd,
		UpdateFunc: s.onUpdate,
		DeleteFunc: s.onDelete,
	}, sc.watchOptions()...)
	s.inf.OnError = func(err error, decision string) {
		s.log.V(1).Info("informerd watch ended", "error", err.Error(), "decision", decision)
		if c.watchErrors != nil {
			// There is no Reflector: the watch is informerd's (nil, which the default
			// handler, toolscache.DefaultWatchErrorHandler, accepts).
			c.watchErrors(s.runCtx(), nil, err)
		}
	}
	return s
}

// runCtx is the context the informer runs under (Background before it starts).
func (s *sharedInformer) runCtx() context.Context {
	s.runMu.Lock()
	defer s.runMu.Unlock()
	if s.ctx == nil {
		return context.Background()
	}
	return s.ctx
}

func (s *sharedInformer) start(ctx context.Context) {
	s.runMu.Lock()
	defer s.runMu.Unlock()
	if s.done != nil || s.stopped.Load() {
		return
	}
	ctx, s.cancel = context.WithCancel(ctx)
	s.ctx = ctx
	s.done = make(chan struct{})
	go func() {
		defer close(s.done)
		go s.pollSynced(ctx)
		if err := s.inf.Run(ctx); ctx.Err() == nil {
			s.log.Error(err, "informerd informer stopped")
		}
		s.halt()
	}()
}

// halt marks the informer stopped and ends its handlers.
func (s *sharedInformer) halt() {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.stopped.Store(true)
	for r := range s.handlers {
		r.close()
	}
}

func (s *sharedInformer) stop() {
	s.runMu.Lock()
	cancel, done := s.cancel, s.done
	s.runMu.Unlock()
	if cancel == nil {
		s.halt()
		return
	}
	cancel()
	<-done
}

func (s *sharedInformer) wait() {
	s.runMu.Lock()
	done := s.done
	s.runMu.Unlock()
	if done != nil {
		<-done
	}
}

// pollSynced notices the end of the initial state when no event follows it.
func (s *sharedInformer) pollSynced(ctx context.Context) {
	if waitFor(ctx, s.inf.HasSynced) {
		s.mu.Lock()
		s.markSyncedLocked()
		s.mu.Unlock()
	}
}

// markSyncedLocked records that the initial state has been dispatched, and tells the handlers
// that were there for it.
func (s *sharedInformer) markSyncedLocked() {
	if s.synced.Load() || !s.inf.HasSynced() {
		return
	}
	s.synced.Store(true)
	close(s.syncedCh)
	for r := range s.handlers {
		r.push(event{typ: syncMark})
	}
}

func (s *sharedInformer) dispatchLocked(e event) {
	for r := range s.handlers {
		r.push(e)
	}
}

func (s *sharedInformer) onAdd(obj *rawObject) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.markSyncedLocked()
	if !s.rememberLocked(obj) {
		return
	}
	s.dispatchLocked(event{typ: addEvent, obj: obj.data, initial: !s.synced.Load()})
}

func (s *sharedInformer) onUpdate(old informerd.Meta, obj *rawObject) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.markSyncedLocked()
	oldMeta := s.oldLocked(old)
	if !s.rememberLocked(obj) {
		return
	}
	s.dispatchLocked(event{typ: updateEvent, old: oldMeta, obj: obj.data})
}

func (s *sharedInformer) onDelete(old informerd.Meta, obj *rawObject) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.markSyncedLocked()
	oldMeta := s.oldLocked(old)
	delete(s.view, old.Key())
	s.seen(old.ResourceVersion)
	if obj != nil {
		s.dispatchLocked(event{typ: deleteEvent, obj: obj.data})
		return
	}
	// Learnt by relisting: the final state is unknown, as client-go's tombstones say.
	s.dispatchLocked(event{typ: deleteEvent, obj: oldMeta, tombstone: old.Key()})
}

// rememberLocked records an object's metadata as delivered; false (logged) if it has none.
func (s *sharedInformer) rememberLocked(obj *rawObject) bool {
	key, entry, err := entryOf(obj.data)
	if err != nil {
		s.log.Error(err, "informerd sent an object without metadata; skipped")
		return false
	}
	s.view[key] = entry
	s.seen(entry.rv)
	return true
}

// seen records a resourceVersion the informer has delivered.
func (s *sharedInformer) seen(rv string) {
	n, err := strconv.ParseUint(rv, 10, 64)
	if err != nil {
		return // not an etcd revision: nothing to compare it with
	}
	for {
		cur := s.lastRV.Load()
		if n <= cur || s.lastRV.CompareAndSwap(cur, n) {
			return
		}
	}
}

// oldLocked is the metadata last delivered for an object, or its identity if there is none.
func (s *sharedInformer) oldLocked(old informerd.Meta) []byte {
	if e, ok := s.view[old.Key()]; ok {
		return e.meta
	}
	apiVersion, kind := s.res.gvk.ToAPIVersionAndKind()
	data, _ := json.Marshal(map[string]any{
		"apiVersion": apiVersion,
		"kind":       kind,
		"metadata": map[string]string{
			"namespace": old.Namespace, "name": old.Name, "uid": old.UID, "resourceVersion": old.ResourceVersion,
		},
	})
	return data
}

// entryOf reads an object's key and metadata.
func entryOf(data []byte) (string, viewEntry, error) {
	var obj struct {
		APIVersion string          `json:"apiVersion"`
		Kind       string          `json:"kind"`
		Metadata   json.RawMessage `json:"metadata"`
	}
	if err := json.Unmarshal(data, &obj); err != nil {
		return "", viewEntry{}, err
	}
	var id struct {
		Namespace       string `json:"namespace"`
		Name            string `json:"name"`
		ResourceVersion string `json:"resourceVersion"`
	}
	if err := json.Unmarshal(obj.Metadata, &id); err != nil || id.Name == "" {
		return "", viewEntry{}, fmt.Errorf("crcache: object without metadata.name: %v", err)
	}
	meta, err := json.Marshal(obj)
	if err != nil {
		return "", viewEntry{}, err
	}
	return keyOf(id.Namespace, id.Name), viewEntry{rv: id.ResourceVersion, meta: meta}, nil
}

func keyOf(ns, name string) string {
	if ns == "" {
		return name
	}
	return ns + "/" + name
}

// add registers a handler. Its initial additions are the objects the informer has delivered
// so far, in the state delivered: read from the sidecar where the sidecar still holds that
// resourceVersion, otherwise as their metadata (the update that follows brings the rest).
func (s *sharedInformer) add(h toolscache.ResourceEventHandler, sh shape, opts toolscache.HandlerOptions) (*registration, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.stopped.Load() {
		return nil, fmt.Errorf("crcache: handler was not added to the informer of %s because it has stopped already", sh)
	}
	log := s.log
	if opts.Logger != nil {
		log = *opts.Logger
	}
	r := newRegistration(s, sh, h, log)
	if len(s.view) > 0 {
		full, err := s.currentLocked()
		if err != nil {
			return nil, fmt.Errorf("crcache: add a handler to the informer of %s: read its initial state: %w", sh, err)
		}
		for key, e := range s.view {
			data := full[key]
			if data == nil {
				data = e.meta
			}
			r.queue = append(r.queue, event{typ: addEvent, obj: data, initial: true})
		}
	}
	if s.synced.Load() {
		r.queue = append(r.queue, event{typ: syncMark})
	}
	s.handlers[r] = struct{}{}
	go r.run()
	return r, nil
}

// currentLocked returns the JSON of the objects whose resourceVersion in the sidecar is the one
// the informer delivered.
func (s *sharedInformer) currentLocked() (map[string][]byte, error) {
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	full := map[string][]byte{}
	_, _, err := s.c.client.ListObjects(ctx, s.res.name, func(obj *informerdv1.Object) {
		key := informerd.Key(obj)
		if e, ok := s.view[key]; ok && e.rv == obj.GetResourceVersion() {
			full[key] = obj.GetJson()
		}
	}, s.scope.watchOptions()...)
	return full, err
}

func (s *sharedInformer) remove(handle toolscache.ResourceEventHandlerRegistration) error {
	r, ok := handle.(*registration)
	if !ok || r.s != s {
		return fmt.Errorf("crcache: RemoveEventHandler: %T is not a registration of this informer", handle)
	}
	s.mu.Lock()
	delete(s.handlers, r)
	s.mu.Unlock()
	r.close()
	return nil
}

// informer is the cache.Informer of one shape of a kind: the shared informers of the scopes
// of the manager's view of the kind (one, or one per namespace it was given).
type informer struct {
	parts []*sharedInformer
	shape shape
}

var _ cache.Informer = (*informer)(nil)

func (i *informer) AddEventHandler(h toolscache.ResourceEventHandler) (toolscache.ResourceEventHandlerRegistration, error) {
	return i.add(h, toolscache.HandlerOptions{})
}

// AddEventHandlerWithResyncPeriod adds a handler; informerd never resyncs, so the period is
// ignored (requeue with RequeueAfter instead, as controller-runtime advises).
func (i *informer) AddEventHandlerWithResyncPeriod(h toolscache.ResourceEventHandler, _ time.Duration) (toolscache.ResourceEventHandlerRegistration, error) {
	return i.add(h, toolscache.HandlerOptions{})
}

// AddEventHandlerWithOptions adds a handler; of the options it uses Logger (no resync).
func (i *informer) AddEventHandlerWithOptions(h toolscache.ResourceEventHandler, opts toolscache.HandlerOptions) (toolscache.ResourceEventHandlerRegistration, error) {
	return i.add(h, opts)
}

func (i *informer) add(h toolscache.ResourceEventHandler, opts toolscache.HandlerOptions) (toolscache.ResourceEventHandlerRegistration, error) {
	regs := make([]*registration, 0, len(i.parts))
	for _, p := range i.parts {
		r, err := p.add(h, i.shape, opts)
		if err != nil {
			for _, r := range regs {
				_ = r.s.remove(r)
			}
			return nil, err
		}
		regs = append(regs, r)
	}
	if len(regs) == 1 {
		return regs[0], nil
	}
	return newMultiRegistration(regs), nil
}

func (i *informer) RemoveEventHandler(handle toolscache.ResourceEventHandlerRegistration) error {
	switch r := handle.(type) {
	case *registration:
		return r.s.remove(r)
	case *multiRegistration:
		for _, part := range r.parts {
			if err := part.s.remove(part); err != nil {
				return err
			}
		}
		return nil
	}
	return fmt.Errorf("crcache: RemoveEventHandler: %T is not a registration of this informer", handle)
}

// AddIndexers is refused: informerd computes indexes from its configuration.
func (i *informer) AddIndexers(toolscache.Indexers) error {
	return errors.New("crcache: AddIndexers is not supported: informerd computes indexes from its configuration; " +
		"add an index to the sidecar's resource and register its field with the cache's IndexField")
}

// HasSynced reports whether every scope's initial state has been dispatched.
func (i *informer) HasSynced() bool {
	for _, p := range i.parts {
		if !p.HasSynced() {
			return false
		}
	}
	return true
}

func (i *informer) HasSyncedChecker() toolscache.DoneChecker {
	chans := make([]chan struct{}, len(i.parts))
	for n, p := range i.parts {
		chans[n] = p.syncedCh
	}
	return doneChecker{name: "informerd informer of " + i.shape.String(), done: allDone(chans)}
}

// LastSyncResourceVersion is client-go's SharedInformer method, which controllers use to wait
// until their informer has seen their own write (KEP-5647's "ConsistencyStore": requeue until
// LastSyncResourceVersion() >= the write's resourceVersion, compared as numbers): the newest
// resourceVersion among the objects this informer has delivered, "" before any.
//
// Decision: a view of several namespaces (DefaultNamespaces) has one watch per namespace, and
// reports the oldest of their newest: a write is only known seen when every namespace's watch
// has reached it. A namespace whose objects do not change holds it back; the write's own
// namespace informer (a view of that namespace) is exact.
func (i *informer) LastSyncResourceVersion() string {
	var low uint64
	for n, p := range i.parts {
		v := p.lastRV.Load()
		if n == 0 || v < low {
			low = v
		}
	}
	if low == 0 {
		return ""
	}
	return strconv.FormatUint(low, 10)
}

// IsStopped reports whether a scope's watch has ended.
func (i *informer) IsStopped() bool {
	for _, p := range i.parts {
		if p.IsStopped() {
			return true
		}
	}
	return false
}

// allDone is a channel closed once every one of chans is.
func allDone(chans []chan struct{}) chan struct{} {
	if len(chans) == 1 {
		return chans[0]
	}
	done := make(chan struct{})
	go func() {
		for _, c := range chans {
			<-c
		}
		close(done)
	}()
	return done
}

type doneChecker struct {
	name string
	done chan struct{}
}

func (d doneChecker) Name() string          { return d.name }
func (d doneChecker) Done() <-chan struct{} { return d.done }

// HasSynced reports whether the initial state has been dispatched.
func (s *sharedInformer) HasSynced() bool { return s.synced.Load() }

// IsStopped reports whether the watch has ended.
func (s *sharedInformer) IsStopped() bool { return s.stopped.Load() }
