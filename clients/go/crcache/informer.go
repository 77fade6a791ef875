package crcache

// controller-runtime's cache.Informer: the shared informers (shared.go) of the scopes of the
// manager's view of a kind, one per namespace it was given or one for all, seen in one shape.

import (
	"errors"
	"fmt"
	"strconv"
	"time"

	toolscache "k8s.io/client-go/tools/cache"
	"sigs.k8s.io/controller-runtime/pkg/cache"
)

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
