package crcache

// A handler added to an informer: its own queue and goroutine, so that handlers are called one
// event at a time, in order, without waiting for each other or holding up the watch (as
// client-go's processorListener does).

import (
	"sync"

	"k8s.io/apimachinery/pkg/runtime/schema"
	toolscache "k8s.io/client-go/tools/cache"
	"k8s.io/klog/v2"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"informerd.io/clients/go/informerdv1"
)

type eventType int

const (
	addEvent eventType = iota
	updateEvent
	deleteEvent
	// syncMark follows the handler's initial additions: HasSynced turns true once it is reached.
	syncMark
)

type event struct {
	typ     eventType
	obj     *informerdv1.Object
	old     *informerdv1.Object
	initial bool
	// tombstone is the key of a deletion learnt by relisting (obj is then the last metadata).
	tombstone string
}

type registration struct {
	s       *sharedInformer
	shape   shape
	handler toolscache.ResourceEventHandler
	log     klog.Logger

	mu     sync.Mutex
	cond   *sync.Cond
	queue  []event
	closed bool
	// joining: the handler is reading its initial state (join.go); the informer's events wait
	// in pending meanwhile.
	joining bool
	pending []event

	syncOnce sync.Once
	synced   chan struct{}
}

var _ toolscache.ResourceEventHandlerRegistration = (*registration)(nil)

func newRegistration(s *sharedInformer, sh shape, h toolscache.ResourceEventHandler, log klog.Logger) *registration {
	r := &registration{s: s, shape: sh, handler: h, log: log, synced: make(chan struct{})}
	r.cond = sync.NewCond(&r.mu)
	return r
}

// HasSynced reports whether the informer has synced and this handler has received every
// event of its initial state.
func (r *registration) HasSynced() bool {
	select {
	case <-r.synced:
		return true
	default:
		return false
	}
}

func (r *registration) HasSyncedChecker() toolscache.DoneChecker {
	return doneChecker{name: "informerd handler of " + r.shape.String(), done: r.synced}
}

func (r *registration) push(e event) {
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.closed {
		return
	}
	if r.joining {
		r.pending = append(r.pending, e)
		return
	}
	r.queue = append(r.queue, e)
	r.cond.Signal()
}

func (r *registration) close() {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.closed = true
	r.queue, r.pending = nil, nil
	r.cond.Broadcast()
}

func (r *registration) run() {
	for {
		r.mu.Lock()
		for len(r.queue) == 0 && !r.closed {
			r.cond.Wait()
		}
		if r.closed {
			r.mu.Unlock()
			return
		}
		e := r.queue[0]
		r.queue[0] = event{}
		r.queue = r.queue[1:]
		if len(r.queue) == 0 {
			// Decision: an empty queue lets go of its array. The initial state (a late
			// handler's, or the first list's burst) grows it to every object of the scope,
			// and a drained slice of it would keep that array for the informer's life.
			r.queue = nil
		}
		r.mu.Unlock()
		r.deliver(e)
	}
}

// decode decodes an object in the handler's shape and runs the scope's transform on it.
func (r *registration) decode(o *informerdv1.Object) (client.Object, bool) {
	obj, err := r.shape.decode(r.s.c.scheme, o.GetJson())
	if err == nil && r.shape.kind == typed {
		// As client-go's informers hand typed objects out: without apiVersion and kind
		// (a handler comparing an event's object with one it wrote sees them equal).
		obj.GetObjectKind().SetGroupVersionKind(schema.GroupVersionKind{})
	}
	if err == nil {
		obj, err = r.s.scope.apply(obj)
	}
	if err != nil {
		r.log.Error(err, "informerd object does not decode or transform; event skipped", "shape", r.shape.String())
		return nil, false
	}
	return obj, true
}

func (r *registration) deliver(e event) {
	switch e.typ {
	case syncMark:
		r.syncOnce.Do(func() { close(r.synced) })
	case addEvent:
		if obj, ok := r.decode(e.obj); ok {
			r.handler.OnAdd(obj, e.initial)
		}
	case updateEvent:
		old, ok1 := r.decode(e.old)
		obj, ok2 := r.decode(e.obj)
		if ok1 && ok2 {
			r.handler.OnUpdate(old, obj)
		}
	case deleteEvent:
		obj, ok := r.decode(e.obj)
		switch {
		case !ok:
		case e.tombstone != "":
			r.handler.OnDelete(toolscache.DeletedFinalStateUnknown{Key: e.tombstone, Obj: obj})
		default:
			r.handler.OnDelete(obj)
		}
	}
}

// multiRegistration is a handler added to the informers of several scopes (a view of several
// namespaces): synced once every one is.
type multiRegistration struct {
	parts []*registration
	done  chan struct{}
}

var _ toolscache.ResourceEventHandlerRegistration = (*multiRegistration)(nil)

func newMultiRegistration(parts []*registration) *multiRegistration {
	chans := make([]chan struct{}, len(parts))
	for i, p := range parts {
		chans[i] = p.synced
	}
	return &multiRegistration{parts: parts, done: allDone(chans)}
}

func (m *multiRegistration) HasSynced() bool {
	select {
	case <-m.done:
		return true
	default:
		return false
	}
}

func (m *multiRegistration) HasSyncedChecker() toolscache.DoneChecker {
	return doneChecker{name: "informerd handler of " + m.parts[0].shape.String(), done: m.done}
}
