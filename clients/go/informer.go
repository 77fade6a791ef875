package informerd

import (
	"context"
	"errors"
	"fmt"
	"io"
	"sync"
	"sync/atomic"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"

	"informerd.io/clients/go/informerdv1"
)

// Meta is what an Informer remembers of an object it has delivered: its identity and
// versions, not its contents. Handlers receive it as the "old" side of updates and deletions.
type Meta struct {
	Namespace       string
	Name            string
	UID             string
	ResourceVersion string
	// Revision is the cache revision of the object's last change seen, in the epoch it was
	// seen in.
	Revision uint64
	// Previous is, for an update watched with WithPrevious, the object before the change as
	// the sidecar sent it (under the same field mask as the new one); nil otherwise (an update
	// learnt by relisting, or a watch without the option).
	Previous *informerdv1.Object
}

// Key is "namespace/name", or "name" for a cluster-scoped object.
func (m Meta) Key() string { return keyOf(m.Namespace, m.Name) }

// Handler receives an Informer's notifications, one at a time, in the order of the changes.
//
// The Informer does not keep objects (informerd exists so that controllers need not), so the
// old side of an update or deletion is its Meta. OnDelete's obj is the object's last state
// when the deletion was watched, and nil when the Informer learnt of it by relisting (the
// object had vanished while the resume token could not be used): the analogue of client-go's
// DeletedFinalStateUnknown.
type Handler[T any] interface {
	OnAdd(obj *T)
	OnUpdate(old Meta, obj *T)
	OnDelete(old Meta, obj *T)
}

// HandlerFuncs adapts functions to a Handler; nil functions are skipped.
type HandlerFuncs[T any] struct {
	AddFunc    func(obj *T)
	UpdateFunc func(old Meta, obj *T)
	DeleteFunc func(old Meta, obj *T)
}

// OnAdd calls AddFunc if it is set.
func (h HandlerFuncs[T]) OnAdd(obj *T) {
	if h.AddFunc != nil {
		h.AddFunc(obj)
	}
}

// OnUpdate calls UpdateFunc if it is set.
func (h HandlerFuncs[T]) OnUpdate(old Meta, obj *T) {
	if h.UpdateFunc != nil {
		h.UpdateFunc(old, obj)
	}
}

// OnDelete calls DeleteFunc if it is set.
func (h HandlerFuncs[T]) OnDelete(old Meta, obj *T) {
	if h.DeleteFunc != nil {
		h.DeleteFunc(old, obj)
	}
}

// InformerStats are an Informer's counters.
type InformerStats struct {
	// Lists counts the watches started with the initial state; Relists those after the first
	// (the resume token was Expired, from another epoch, or not yet obtained when the stream
	// broke).
	Lists, Relists uint64
	// Resumes counts the watches started from a resume token.
	Resumes uint64
	// DeltaResumes counts the relists made by a delta resume (held.go): the sidecar sent only
	// what changed. They are not counted in Lists and Relists.
	DeltaResumes uint64
	// Errors counts the streams that ended with an error (each followed by a resume or relist).
	Errors uint64
	// Handler calls.
	Adds, Updates, Deletes uint64
	// Anomalies counts events that contradict the protocol and were tolerated: an update or
	// deletion of an object the Informer did not have, an addition of one it had at the same
	// resourceVersion, an event of another epoch than the watch's, or revisions not increasing.
	Anomalies uint64
	// Objects is the number of objects in the handler's view.
	Objects int
	// Token is the resume token: the (epoch, revision) of the last event or bookmark handled.
	Token ResumeToken
	// LastError is the last error a stream ended with.
	LastError error
}

// Informer follows a resource and calls a Handler so that the handler's view stays exactly the
// cache's: it starts with the initial state, resumes from the last (epoch, revision) it
// handled when the stream breaks or falls behind, and relists when the token cannot be used
// any more (Expired, EpochChanged), delivering the differences against what it had (by a delta
// resume once it holds objects: held.go). It keeps only the identity and versions of each
// object.
type Informer[T any] struct {
	c        *Client
	resource string
	handler  Handler[T]
	opts     InformerOptions

	// OnError, when set before Run, is called with every error a stream ends with, and the
	// Informer's decision: "resume", "relist" or "stop".
	OnError func(err error, decision string)

	mu    sync.Mutex
	known map[string]entry
	// noDelta: a sidecar refused a delta resume; relist in full from then on (held.go).
	noDelta bool
	token   ResumeToken
	pass    uint32
	stats   InformerStats
	synced  atomic.Bool
}

// NewInformer returns an Informer of resource (its name in the sidecar's configuration) that
// calls handler. The options are those of Watch (cluster, namespace, selectors, index,
// fields, predicates, bookmark interval, WithPrevious) but for the starting point (Since,
// SendInitialState), which is the Informer's to choose, and WaitForSync, which it always sets.
//
// With predicates, skipped updates leave the handler's view at an older resourceVersion of an
// object; a relist then delivers the newer one as an update.
func NewInformer[T any](c *Client, resource string, handler Handler[T], opts ...InformerOption) *Informer[T] {
	o := informerOptions(opts)
	return &Informer[T]{c: c, resource: resource, handler: handler, opts: o, known: map[string]entry{}}
}

// HasSynced reports whether the initial state has been delivered once.
func (inf *Informer[T]) HasSynced() bool { return inf.synced.Load() }

// Stats returns the counters.
func (inf *Informer[T]) Stats() InformerStats {
	inf.mu.Lock()
	defer inf.mu.Unlock()
	s := inf.stats
	s.Objects = len(inf.known)
	s.Token = inf.token
	return s
}

// Known returns the handler's view: key ("namespace/name") -> resourceVersion.
func (inf *Informer[T]) Known() map[string]string {
	inf.mu.Lock()
	defer inf.mu.Unlock()
	m := make(map[string]string, len(inf.known))
	for k, e := range inf.known {
		m[k] = e.rvString()
	}
	return m
}

// errEpoch is a stream that delivered an event of another epoch than its token's.
var errEpoch = errors.New("informerd: the watch delivered an event of another epoch")

// errDeltaRefused wraps the error of a delta resume the sidecar refused: relist in full.
var errDeltaRefused = errors.New("informerd: the sidecar refused a delta resume; relisting in full")

// Run follows the resource until ctx ends (it then returns ctx.Err()) or a call fails in a way
// retrying cannot fix: INVALID_ARGUMENT (a bad selector, field mask or CEL expression),
// NOT_FOUND (no such resource), UNIMPLEMENTED. Everything else is retried: while the sidecar
// is unreachable the Informer waits for it, and while its token is refused (UNAUTHENTICATED)
// or its RBAC does not allow the read (PERMISSION_DENIED) it asks again, backing off up to 5 s,
// each refusal given to OnError and counted in Stats. Run must not be called twice at once.
//
// Decision: a refusal is retried, as client-go's reflector retries a forbidden list, rather
// than ending Run: RBAC is applied with the workload that needs it (one `kubectl apply`, one
// Helm release) and the apiserver's authorizer, then the sidecar's cache of denials (30 s by
// default), may refuse the first calls of a pod that starts at once. An Informer that stopped
// then would hold nothing for the rest of the pod's life (the real-node tests met exactly
// that); one that asks again serves as soon as the grant is seen, and one never granted keeps
// reporting why.
func (inf *Informer[T]) Run(ctx context.Context) error {
	delay := time.Duration(0)
	for {
		progress, err := inf.session(ctx)
		if ctx.Err() != nil {
			return ctx.Err()
		}
		if err == nil {
			err = io.ErrUnexpectedEOF
		}
		decision := "resume"
		switch {
		case errors.Is(err, errEpoch) || errors.Is(err, errDeltaRefused) || IsRelist(err):
			decision = "relist"
		case isPermanent(err):
			decision = "stop"
		}
		inf.mu.Lock()
		inf.stats.Errors++
		inf.stats.LastError = err
		if decision == "relist" {
			inf.token = ResumeToken{}
		}
		inf.mu.Unlock()
		if inf.OnError != nil {
			inf.OnError(err, decision)
		}
		if decision == "stop" {
			return err
		}
		// Back off when nothing came through; FellBehind and a relist go again at once.
		switch {
		case progress || decision == "relist" || Reason(err) == ReasonFellBehind:
			delay = 0
		case delay == 0:
			delay = 100 * time.Millisecond
		default:
			delay = min(2*delay, 5*time.Second)
		}
		if delay > 0 {
			select {
			case <-ctx.Done():
				return ctx.Err()
			case <-time.After(delay):
			}
		}
	}
}

// isPermanent: errors that another call would meet again whatever is granted (INVALID_ARGUMENT,
// NOT_FOUND, UNIMPLEMENTED); the Informer's Run and the WorkQueue end on them.
func isPermanent(err error) bool {
	switch Code(err) {
	case codes.InvalidArgument, codes.NotFound, codes.Unimplemented:
		return true
	}
	return false
}

// session runs one Watch stream until it ends; progress tells whether any event came.
func (inf *Informer[T]) session(ctx context.Context) (progress bool, err error) {
	o := WatchOptions{followed: inf.opts.followed, waitForSync: true}
	o.omitLabels = o.omitLabels || decodesJSON[T]()
	inf.mu.Lock()
	token := inf.token
	listing := token.IsZero()
	// A relist of an Informer that holds objects is a delta resume (held.go).
	delta := listing && len(inf.known) > 0 && inf.stats.Lists > 0 && !inf.noDelta
	var heldKeys map[uint64]string
	switch {
	case delta:
		o.held, heldKeys = heldEntries(inf.known)
		inf.stats.DeltaResumes++
	case listing:
		o.initialState = true
		inf.pass++
		inf.stats.Lists++
		if inf.stats.Lists > 1 {
			inf.stats.Relists++
		}
	default:
		o.since = &token
		inf.stats.Resumes++
	}
	pass := inf.pass
	inf.mu.Unlock()

	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	// WaitForReady: while the sidecar is unreachable, wait for it rather than fail at once.
	stream, err := inf.c.cache.Watch(ctx, watchRequest(inf.resource, o), grpc.WaitForReady(true))
	if err != nil {
		return false, inf.refused(delta, wrapError(err, nil, nil))
	}
	for {
		ev, err := stream.Recv()
		if err != nil {
			if err == io.EOF {
				return progress, io.ErrUnexpectedEOF
			}
			header, _ := stream.Header()
			return progress, inf.refused(delta && listing, wrapError(err, stream.Trailer(), header))
		}
		progress = true
		if !listing {
			if ev.GetEpoch() != token.Epoch {
				inf.anomaly()
				return progress, fmt.Errorf("%w: token %s, event %d/%d", errEpoch, token, ev.GetEpoch(), ev.GetRevision())
			}
			if ev.GetRevision() < token.Revision || (ev.GetRevision() == token.Revision && ev.GetType() != Bookmark) {
				inf.anomaly()
			}
		}
		switch ev.GetType() {
		case Added, Modified, Deleted:
			if listing {
				if ev.GetType() != Added {
					inf.anomaly()
				}
				inf.initial(ev.GetObject(), pass)
				continue
			}
			inf.apply(ev)
		case Bookmark:
			if listing {
				continue
			}
		case Synced:
			if !listing {
				inf.anomaly()
				continue
			}
			if delta {
				inf.endDelta(ev.GetGone(), heldKeys)
			} else {
				inf.endInitial(pass)
			}
			listing = false
			inf.synced.Store(true)
		default:
			inf.anomaly()
			continue
		}
		token = TokenOf(ev)
		inf.mu.Lock()
		inf.token = token
		inf.mu.Unlock()
	}
}

// refused is err, marked as a refused delta resume (and delta resumes stopped) when it is one.
func (inf *Informer[T]) refused(delta bool, err error) error {
	if !delta || !refusesDelta(err) {
		return err
	}
	inf.mu.Lock()
	inf.noDelta = true
	inf.mu.Unlock()
	return fmt.Errorf("%w: %w", errDeltaRefused, err)
}

func (inf *Informer[T]) anomaly() {
	inf.mu.Lock()
	inf.stats.Anomalies++
	inf.mu.Unlock()
}

func metaOf(obj *informerdv1.Object, e entry) Meta {
	return Meta{Namespace: obj.GetNamespace(), Name: obj.GetName(), UID: e.uidString(), ResourceVersion: e.rvString(), Revision: e.revision}
}

// decodeOrNil decodes an object; one that does not decode into T is delivered as nil rather
// than stopping the informer (the key and versions stay exact).
func (inf *Informer[T]) decodeOrNil(obj *informerdv1.Object) *T {
	v, err := decode[T](obj)
	if err != nil {
		if inf.OnError != nil {
			inf.OnError(err, "deliver")
		}
		return nil
	}
	return v
}

// initial handles one object of an initial state: an addition if it is new, an update if its
// resourceVersion (or uid) changed, nothing if the handler already has it.
func (inf *Informer[T]) initial(obj *informerdv1.Object, pass uint32) {
	key := Key(obj)
	next := newEntry(obj.GetUid(), obj.GetResourceVersion(), obj.GetRevision(), pass)
	inf.mu.Lock()
	old, had := inf.known[key]
	inf.known[key] = next
	switch {
	case !had:
		inf.stats.Adds++
	case !old.sameUID(next):
		inf.stats.Deletes++
		inf.stats.Adds++
	case !old.sameRV(next):
		inf.stats.Updates++
	}
	inf.mu.Unlock()
	switch {
	case !had:
		inf.handler.OnAdd(inf.decodeOrNil(obj))
	case !old.sameUID(next):
		inf.handler.OnDelete(metaOf(obj, old), nil)
		inf.handler.OnAdd(inf.decodeOrNil(obj))
	case !old.sameRV(next):
		inf.handler.OnUpdate(metaOf(obj, old), inf.decodeOrNil(obj))
	}
}

// endInitial deletes what the initial state of this pass did not contain.
func (inf *Informer[T]) endInitial(pass uint32) {
	var gone []Meta
	inf.mu.Lock()
	for key, e := range inf.known {
		if e.pass != pass {
			gone = append(gone, metaOfKey(key, e))
			delete(inf.known, key)
			inf.stats.Deletes++
		}
	}
	inf.mu.Unlock()
	for _, m := range gone {
		inf.handler.OnDelete(m, nil)
	}
}

// metaOfKey is the Meta of a known object by its key, for a deletion learnt by relisting.
func metaOfKey(key string, e entry) Meta {
	ns, name := splitKey(key)
	return Meta{Namespace: ns, Name: name, UID: e.uidString(), ResourceVersion: e.rvString(), Revision: e.revision}
}

func splitKey(key string) (string, string) {
	for i := 0; i < len(key); i++ {
		if key[i] == '/' {
			return key[:i], key[i+1:]
		}
	}
	return "", key
}

// apply handles one change after the initial state.
func (inf *Informer[T]) apply(ev *informerdv1.WatchEvent) {
	obj := ev.GetObject()
	key := Key(obj)
	inf.mu.Lock()
	next := newEntry(obj.GetUid(), obj.GetResourceVersion(), obj.GetRevision(), inf.pass)
	old, had := inf.known[key]
	var call func()
	switch ev.GetType() {
	case Added, Modified:
		switch {
		case !had:
			if ev.GetType() == Modified {
				inf.stats.Anomalies++
			}
			inf.stats.Adds++
			call = func() { inf.handler.OnAdd(inf.decodeOrNil(obj)) }
		case !old.sameUID(next):
			// The object was deleted and re-created under the same name.
			inf.stats.Deletes++
			inf.stats.Adds++
			call = func() {
				inf.handler.OnDelete(metaOf(obj, old), nil)
				inf.handler.OnAdd(inf.decodeOrNil(obj))
			}
		case old.sameRV(next) && ev.GetType() == Added:
			inf.stats.Anomalies++
		default:
			if ev.GetType() == Added {
				inf.stats.Anomalies++
			}
			inf.stats.Updates++
			m := metaOf(obj, old)
			m.Previous = ev.GetPrevious()
			call = func() { inf.handler.OnUpdate(m, inf.decodeOrNil(obj)) }
		}
		inf.known[key] = next
	case Deleted:
		if !had {
			inf.stats.Anomalies++
			break
		}
		delete(inf.known, key)
		inf.stats.Deletes++
		call = func() { inf.handler.OnDelete(metaOf(obj, old), inf.decodeOrNil(obj)) }
	}
	inf.mu.Unlock()
	if call != nil {
		call()
	}
}
