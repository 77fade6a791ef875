package crcache

// Adding and removing a handler. A handler added once the informer has delivered objects reads
// its initial state from the sidecar itself, without holding up the handlers already running
// (their events go on), and the events dispatched meanwhile are merged with it by uid and
// resourceVersion: it sees each object once, as an initial addition in its current state, and
// every change after that.

import (
	"context"
	"fmt"
	"strconv"
	"time"

	toolscache "k8s.io/client-go/tools/cache"

	informerd "informerd.io/clients/go"
	"informerd.io/clients/go/informerdv1"
)

// joinTimeout bounds the List of a late handler's initial state.
const joinTimeout = 2 * time.Minute

// add registers a handler.
func (s *sharedInformer) add(h toolscache.ResourceEventHandler, sh shape, opts toolscache.HandlerOptions) (*registration, error) {
	s.mu.Lock()
	if s.stopped.Load() {
		s.mu.Unlock()
		return nil, fmt.Errorf("crcache: handler was not added to the informer of %s because it has stopped already", sh)
	}
	log := s.log
	if opts.Logger != nil {
		log = *opts.Logger
	}
	r := newRegistration(s, sh, h, log)
	late := s.dispatched
	if late {
		r.joining = true
	} else if s.synced.Load() {
		r.queue = append(r.queue, event{typ: syncMark})
	}
	s.handlers[r] = struct{}{}
	s.mu.Unlock()
	go r.run()
	if late {
		if err := s.join(r); err != nil {
			_ = s.remove(r)
			return nil, fmt.Errorf("crcache: add a handler to the informer of %s: read its initial state: %w", sh, err)
		}
	}
	return r, nil
}

// join gives a late handler its initial state: the sidecar's current objects of the scope,
// then the events dispatched while they were read that are newer.
func (s *sharedInformer) join(r *registration) error {
	ctx, cancel := context.WithTimeout(s.runCtx(), joinTimeout)
	defer cancel()
	var listed []*informerdv1.Object
	_, _, err := s.c.client.ListObjects(ctx, s.res.name, func(o *informerdv1.Object) {
		listed = append(listed, o)
	}, append(s.scope.listOptions(), informerd.WaitForSync(), informerd.OmitLabels())...)
	if err != nil {
		return err
	}
	s.mu.Lock() // no event is dispatched while the two meet
	defer s.mu.Unlock()
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.closed {
		return nil
	}
	known := make(map[string]version, len(listed))
	queue := make([]event, 0, len(listed)+len(r.pending)+1)
	for _, o := range listed {
		known[informerd.Key(o)] = version{uid: o.GetUid(), rv: o.GetResourceVersion()}
		queue = append(queue, event{typ: addEvent, obj: o, initial: true})
	}
	for _, e := range r.pending {
		if e, keep := mergeEvent(known, e); keep {
			queue = append(queue, e)
		}
	}
	if s.synced.Load() {
		queue = append(queue, event{typ: syncMark})
	}
	r.pending, r.joining = nil, false
	r.queue = queue
	r.cond.Signal()
	return nil
}

// version is what a joining handler has of an object.
type version struct{ uid, rv string }

// mergeEvent decides whether an event dispatched while a handler read its initial state is
// news to it, and as what (an update of an object it has not seen is its addition).
func mergeEvent(known map[string]version, e event) (event, bool) {
	switch e.typ {
	case syncMark:
		return e, false // the handler's own sync mark follows its initial state
	case deleteEvent:
		key := e.tombstone
		if key == "" {
			key = informerd.Key(e.obj)
		}
		have, ok := known[key]
		if !ok || have.uid != e.obj.GetUid() && e.obj.GetUid() != "" {
			return e, false // gone before the list, or an earlier object of that name
		}
		delete(known, key)
		return e, true
	}
	key := informerd.Key(e.obj)
	have, ok := known[key]
	next := version{uid: e.obj.GetUid(), rv: e.obj.GetResourceVersion()}
	if ok && have.uid == next.uid && !newer(next.rv, have.rv) {
		return e, false // the list already had this version or a later one
	}
	known[key] = next
	if !ok && e.typ == updateEvent {
		return event{typ: addEvent, obj: e.obj}, true
	}
	return e, true
}

// newer reports whether resourceVersion a is later than b (true when either is not a number:
// then it cannot be known, and delivering twice is safer than not at all).
func newer(a, b string) bool {
	x, errA := strconv.ParseUint(a, 10, 64)
	y, errB := strconv.ParseUint(b, 10, 64)
	return errA != nil || errB != nil || x > y
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
