package crcache

// One informerd Watch per scope, shared by every handler of every shape: an informerd.Informer
// (resume, relist) feeds each handler's own queue and goroutine, as in client-go's shared
// informer.
//
// Decision: the process keeps no copy of the objects it watches. The old side of an update is
// the sidecar's (the watch asks for it with send_previous, masked as the new object); an update
// learnt by relisting, and the object of a DeletedFinalStateUnknown, carry the identity the
// informerd.Informer keeps to diff a relist (namespace, name, uid, resourceVersion) and nothing
// more: a predicate comparing them sees a change, so the object is reconciled. A handler added
// late reads its initial state from the sidecar (join.go).

import (
	"context"
	"encoding/json"
	"strconv"
	"sync"
	"sync/atomic"

	"k8s.io/klog/v2"

	informerd "informerd.io/clients/go"
	"informerd.io/clients/go/informerdv1"
)

// rawObject is an object as the sidecar sent it; each handler decodes its JSON in its shape.
type rawObject struct{ obj *informerdv1.Object }

// ReceiveObject keeps the sidecar's object (informerd.ObjectReceiver).
func (r *rawObject) ReceiveObject(obj *informerdv1.Object) error {
	r.obj = obj
	return nil
}

type sharedInformer struct {
	c     *Cache
	res   resource
	scope scope
	inf   *informerd.Informer[rawObject]
	log   klog.Logger

	// mu is held while an event is dispatched to the handlers' queues and while a handler
	// joins, so that a joining handler's initial state and the events after it meet exactly.
	mu       sync.Mutex
	handlers map[*registration]struct{}
	// dispatched: an object has been delivered, so a handler added now needs an initial state.
	dispatched bool

	synced   atomic.Bool
	syncedCh chan struct{}
	stopped  atomic.Bool
	// lastRV is the newest resourceVersion among the objects delivered (LastSyncResourceVersion).
	lastRV atomic.Uint64

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
		handlers: map[*registration]struct{}{},
		syncedCh: make(chan struct{}),
	}
	// Every handler decodes the JSON alone (registration.decode): no proto labels map.
	opts := append(sc.informerOptions(), informerd.WithPrevious(), informerd.OmitLabels())
	s.inf = informerd.NewInformer[rawObject](c.client, res.name, informerd.HandlerFuncs[rawObject]{
		AddFunc:    s.onAdd,
		UpdateFunc: s.onUpdate,
		DeleteFunc: s.onDelete,
	}, opts...)
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
	s.dispatched = true
	for r := range s.handlers {
		r.push(e)
	}
}

func (s *sharedInformer) onAdd(obj *rawObject) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.markSyncedLocked()
	s.seen(obj.obj.GetResourceVersion())
	s.dispatchLocked(event{typ: addEvent, obj: obj.obj, initial: !s.synced.Load()})
}

func (s *sharedInformer) onUpdate(old informerd.Meta, obj *rawObject) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.markSyncedLocked()
	s.seen(obj.obj.GetResourceVersion())
	prev := old.Previous
	if prev == nil {
		prev = s.identity(old)
	}
	s.dispatchLocked(event{typ: updateEvent, old: prev, obj: obj.obj})
}

func (s *sharedInformer) onDelete(old informerd.Meta, obj *rawObject) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.markSyncedLocked()
	s.seen(old.ResourceVersion)
	if obj != nil {
		s.seen(obj.obj.GetResourceVersion())
		s.dispatchLocked(event{typ: deleteEvent, obj: obj.obj})
		return
	}
	// Learnt by relisting: the final state is unknown, as client-go's tombstones say.
	s.dispatchLocked(event{typ: deleteEvent, obj: s.identity(old), tombstone: old.Key()})
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

// identity is an object with only the identity the informer keeps of it.
func (s *sharedInformer) identity(m informerd.Meta) *informerdv1.Object {
	apiVersion, kind := s.res.gvk.ToAPIVersionAndKind()
	data, _ := json.Marshal(map[string]any{
		"apiVersion": apiVersion,
		"kind":       kind,
		"metadata": map[string]string{
			"namespace": m.Namespace, "name": m.Name, "uid": m.UID, "resourceVersion": m.ResourceVersion,
		},
	})
	return &informerdv1.Object{Namespace: m.Namespace, Name: m.Name, Uid: m.UID, ResourceVersion: m.ResourceVersion, Json: data}
}

// HasSynced reports whether the initial state has been dispatched.
func (s *sharedInformer) HasSynced() bool { return s.synced.Load() }

// IsStopped reports whether the watch has ended.
func (s *sharedInformer) IsStopped() bool { return s.stopped.Load() }
