package informerd

// WorkQueue: WatchKeys behind client-go's rate-limited workqueue, so that a reconcile loop is
// written the usual way (Get, reconcile, Forget or AddRateLimited, Done) while the sidecar
// keeps the coalescing queue: Done acknowledges the key, and the sidecar sends it again when it
// changes after that.

import (
	"context"
	"errors"
	"fmt"
	"io"
	"sync"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
	"k8s.io/client-go/util/workqueue"

	"informerd.io/clients/go/informerdv1"
)

// QueueKey is what a WorkQueue hands out: the object to look at. Kind is the resource's kind, or
// the owner's kind for a key of WorkQueueConfig.Owner.
type QueueKey struct {
	Kind, Namespace, Name string
}

func (k QueueKey) String() string {
	if k.Namespace == "" {
		return k.Kind + " " + k.Name
	}
	return k.Kind + " " + k.Namespace + "/" + k.Name
}

// OwnerMapping makes the queue hand out the key of each object's controller owner of Kind
// (APIVersion: its group by one of its versions, "apps/v1", or "" for any group), as
// controller-runtime's EnqueueRequestForOwner does; AndSelf keeps the objects' own keys too.
type OwnerMapping struct {
	Kind, APIVersion string
	AndSelf          bool
}

// WorkQueueConfig configures NewWorkQueue.
type WorkQueueConfig struct {
	// Debounce: a key is handed out once it has not changed for this long (0: at once).
	// MaxDelay: at the latest this long after its first change (0: ten times Debounce).
	Debounce, MaxDelay time.Duration
	Owner              *OwnerMapping
	// RateLimiter for AddRateLimited; nil: client-go's DefaultTypedControllerRateLimiter.
	RateLimiter workqueue.TypedRateLimiter[QueueKey]
}

// WorkQueue is a client-go rate-limited workqueue of keys fed by WatchKeys. It reconnects by
// itself (resuming from its token, or with a resync after a sidecar restart) until ShutDown or
// its context ends. The first subscription's refusal is NewWorkQueue's error; after that a
// refusal (PERMISSION_DENIED, UNAUTHENTICATED) is asked again, reported by Err meanwhile, and a
// subscription no grant fixes (INVALID_ARGUMENT, NOT_FOUND, UNIMPLEMENTED) shuts it down, with
// the reason in Err.
type WorkQueue struct {
	queue    workqueue.TypedRateLimitingInterface[QueueKey]
	cancel   context.CancelFunc
	finished chan struct{}

	// acks wait here for sendAcks, which sends them in one message; ackReady wakes it.
	acks     []*informerdv1.KeyAck
	ackReady chan struct{}
	mu       sync.Mutex
	stream   informerdv1.Cache_WatchKeysClient
	// The revision each key was handed out with by the current stream, until Done acks it.
	sent   map[QueueKey]uint64
	token  *informerdv1.ResumeToken
	synced bool
	err    error
}

// NewWorkQueue subscribes to the keys of a resource: the filters and predicates of opts
// (WithCluster, InNamespace, WithLabelSelector, WithFieldSelector, WithIndex, WithPredicates,
// WithPredicateCEL, Since, WaitForSync) with the debounce and owner mapping of cfg. It waits for
// a sidecar that does not listen yet, until ctx ends; the subscription's refusal is its error.
func NewWorkQueue(ctx context.Context, c *Client, resource string, cfg WorkQueueConfig, opts ...WorkQueueOption) (*WorkQueue, error) {
	sub, err := keysSubscription(resource, cfg, workQueueOptions(opts))
	if err != nil {
		return nil, err
	}
	limiter := cfg.RateLimiter
	if limiter == nil {
		limiter = workqueue.DefaultTypedControllerRateLimiter[QueueKey]()
	}
	ctx, cancel := context.WithCancel(ctx)
	w := &WorkQueue{
		queue:    workqueue.NewTypedRateLimitingQueue(limiter),
		cancel:   cancel,
		finished: make(chan struct{}),
		sent:     map[QueueKey]uint64{},
		ackReady: make(chan struct{}, 1),
	}
	// The first subscription's refusal is the caller's error.
	stream, err := w.subscribe(ctx, c, sub)
	if err != nil {
		cancel()
		w.queue.ShutDown()
		return nil, err
	}
	go w.run(ctx, c, sub, stream)
	go w.sendAcks(ctx)
	return w, nil
}

func keysSubscription(resource string, cfg WorkQueueConfig, o WorkQueueOptions) (*informerdv1.KeysSubscription, error) {
	sub := &informerdv1.KeysSubscription{
		Resource:       resource,
		Cluster:        o.cluster,
		Namespace:      o.namespace,
		LabelSelector:  o.labelSelector,
		FieldSelector:  o.fieldSelector,
		Index:          o.index,
		Predicates:     o.predicates,
		PredicateCel:   o.predicateCEL,
		DebounceMillis: uint32(cfg.Debounce.Milliseconds()),
		MaxDelayMillis: uint32(cfg.MaxDelay.Milliseconds()),
		WaitForSync:    o.waitForSync,
	}
	if cfg.Debounce < 0 || cfg.MaxDelay < 0 {
		return nil, fmt.Errorf("WorkQueueConfig: Debounce and MaxDelay must not be negative")
	}
	if o.since != nil {
		sub.Since = &informerdv1.ResumeToken{Epoch: o.since.Epoch, Revision: o.since.Revision}
	}
	if cfg.Owner != nil {
		mode := informerdv1.OwnerMode_OWNER_ONLY
		if cfg.Owner.AndSelf {
			mode = informerdv1.OwnerMode_OWNER_AND_SELF
		}
		sub.Owner = &informerdv1.OwnerMapping{Kind: cfg.Owner.Kind, ApiVersion: cfg.Owner.APIVersion, Mode: mode}
	}
	return sub, nil
}

// subscribe opens a stream and sends the subscription; the server's answer to it (a refusal)
// comes with the first Recv, which subscribe waits for only as far as the headers.
func (w *WorkQueue) subscribe(ctx context.Context, c *Client, sub *informerdv1.KeysSubscription) (informerdv1.Cache_WatchKeysClient, error) {
	// WaitForReady: while the sidecar is unreachable (a pod whose containers start together, a
	// sidecar restarting), wait for it rather than fail at once, as the Informer does.
	stream, err := c.cache.WatchKeys(ctx, grpc.WaitForReady(true))
	if err != nil {
		return nil, wrapError(err, nil, nil)
	}
	req := &informerdv1.WatchKeysRequest{Request: &informerdv1.WatchKeysRequest_Subscribe{Subscribe: sub}}
	if err := stream.Send(req); err != nil && !errors.Is(err, io.EOF) {
		return nil, wrapError(err, nil, nil)
	}
	// The server reads the subscription before it answers: headers mean it was accepted; a
	// stream that ended without headers was refused, with the status Recv returns.
	header, err := stream.Header()
	if err != nil {
		return nil, wrapError(err, nil, nil)
	}
	if header == nil {
		_, err := stream.Recv()
		if err == nil {
			err = status.Error(codes.Internal, "WatchKeys: an event without headers")
		}
		return nil, wrapError(err, stream.Trailer(), nil)
	}
	w.mu.Lock()
	w.stream = stream
	w.sent = map[QueueKey]uint64{}
	w.acks = nil
	w.mu.Unlock()
	return stream, nil
}

// run receives keys into the queue; after a broken stream it subscribes again, from its token.
//
// Decision: after the first subscription, a refusal (PERMISSION_DENIED when a re-check finds the
// read revoked, UNAUTHENTICATED when the token no longer authenticates) is asked again, backing
// off from 1 s up to 5 s, and reported by Err until a subscription is accepted; only what no
// grant fixes (INVALID_ARGUMENT, NOT_FOUND, UNIMPLEMENTED) shuts the queue down. This is the
// Informer's rule (informer.go, Run) and client-go's reflector's with a forbidden list: a grant
// removed and given back (a RoleBinding re-applied, a token rotated late) must not end the
// controller's loop for the rest of the pod's life.
func (w *WorkQueue) run(ctx context.Context, c *Client, sub *informerdv1.KeysSubscription, stream informerdv1.Cache_WatchKeysClient) {
	defer close(w.finished)
	defer w.queue.ShutDown()
	// Ends sendAcks too: with no stream to come, nothing is left to acknowledge.
	defer w.cancel()
	for {
		err := w.receive(stream)
		if ctx.Err() != nil {
			return
		}
		delay := time.Second
		for {
			if !w.note(err) {
				return
			}
			select {
			case <-ctx.Done():
				return
			case <-time.After(delay):
			}
			if refused(err) {
				delay = min(2*delay, 5*time.Second)
			}
			w.mu.Lock()
			sub.Since = w.token
			w.mu.Unlock()
			if stream, err = w.subscribe(ctx, c, sub); err == nil {
				w.mu.Lock()
				w.err = nil
				w.mu.Unlock()
				break
			}
		}
	}
}

// note records why the stream ended when it was refused or cannot be fixed by asking again (for
// Err), and reports whether to ask again.
func (w *WorkQueue) note(err error) bool {
	if refused(err) || isPermanent(err) {
		w.mu.Lock()
		w.err = err
		w.mu.Unlock()
	}
	return !isPermanent(err)
}

// refused: the sidecar's authorization refused the subscription; a grant may come.
func refused(err error) bool {
	switch Code(err) {
	case codes.PermissionDenied, codes.Unauthenticated:
		return true
	}
	return false
}

func (w *WorkQueue) receive(stream informerdv1.Cache_WatchKeysClient) error {
	for {
		ev, err := stream.Recv()
		if err != nil {
			header, _ := stream.Header()
			return wrapError(err, stream.Trailer(), header)
		}
		w.mu.Lock()
		if ev.Token != nil {
			w.token = ev.Token
		}
		switch ev.Type {
		case informerdv1.KeyEventType_KEY:
			k := QueueKey{Kind: ev.Key.GetKind(), Namespace: ev.Key.GetNamespace(), Name: ev.Key.GetName()}
			w.sent[k] = ev.Revision
			w.mu.Unlock()
			w.queue.Add(k)
			continue
		case informerdv1.KeyEventType_RESYNC_END:
			w.synced = true
		}
		w.mu.Unlock()
	}
}

// Get blocks until a key is ready or the queue shuts down (shutdown true).
func (w *WorkQueue) Get() (key QueueKey, shutdown bool) { return w.queue.Get() }

// Done marks the key processed and acknowledges it: the sidecar sends it again when it changes.
func (w *WorkQueue) Done(key QueueKey) {
	w.queue.Done(key)
	w.mu.Lock()
	revision, ok := w.sent[key]
	delete(w.sent, key)
	if ok && w.stream != nil {
		w.acks = append(w.acks, &informerdv1.KeyAck{Key: &informerdv1.Key{Kind: key.Kind, Namespace: key.Namespace, Name: key.Name}, Revision: revision})
	}
	w.mu.Unlock()
	select {
	case w.ackReady <- struct{}{}:
	default:
	}
}

// sendAcks sends the acks that Done leaves, every ack waiting in one message, until ctx ends.
//
// Decision: a goroutine of its own rather than a Send in Done. A worker that acks key by key
// would send a small message per key, and the sidecar's HTTP/2 server ends a connection on
// which about 2,000 small DATA frames wait unread (GOAWAY ENHANCE_YOUR_CALM,
// "too_many_data_frames"): a first resync of 140,000 pods did that several times under load,
// and each time the queue subscribed again with no token and received every key again. Here
// the acks that come while a Send is under way go together in the next one, so the busier
// the sidecar, the fewer the messages.
func (w *WorkQueue) sendAcks(ctx context.Context) {
	for {
		select {
		case <-ctx.Done():
			return
		case <-w.ackReady:
		}
		w.mu.Lock()
		acks, stream := w.acks, w.stream
		w.acks = nil
		w.mu.Unlock()
		if len(acks) == 0 || stream == nil {
			continue
		}
		// A failed send means the stream broke: the next subscription sends the keys again.
		_ = stream.Send(&informerdv1.WatchKeysRequest{Request: &informerdv1.WatchKeysRequest_Ack{Ack: &informerdv1.KeyAcks{Acks: acks}}})
	}
}

// Forget ends the key's rate limiting (after a successful reconcile).
func (w *WorkQueue) Forget(key QueueKey) { w.queue.Forget(key) }

// AddRateLimited hands the key out again after its rate limiter's delay (a failed reconcile).
func (w *WorkQueue) AddRateLimited(key QueueKey) { w.queue.AddRateLimited(key) }

// AddAfter hands the key out again after d.
func (w *WorkQueue) AddAfter(key QueueKey, d time.Duration) { w.queue.AddAfter(key, d) }

// Add hands the key out (again) as soon as a worker takes it.
func (w *WorkQueue) Add(key QueueKey) { w.queue.Add(key) }

// NumRequeues is how many times the key was rate limited since its last Forget.
func (w *WorkQueue) NumRequeues(key QueueKey) int { return w.queue.NumRequeues(key) }

// Len is the number of keys waiting for a worker.
func (w *WorkQueue) Len() int { return w.queue.Len() }

// HasSynced reports whether every key of the first resync has been handed to the queue (false
// until then; a queue started Since a token has no such resync and stays false).
func (w *WorkQueue) HasSynced() bool {
	w.mu.Lock()
	defer w.mu.Unlock()
	return w.synced
}

// Token is where a new WorkQueue resumes from (Since): every key changed after it comes again.
func (w *WorkQueue) Token() (ResumeToken, bool) {
	w.mu.Lock()
	defer w.mu.Unlock()
	if w.token == nil {
		return ResumeToken{}, false
	}
	return ResumeToken{Epoch: w.token.Epoch, Revision: w.token.Revision}, true
}

// ShutDown stops the stream and the queue: Get returns shutdown once the queue is empty.
func (w *WorkQueue) ShutDown() {
	w.cancel()
	w.queue.ShutDown()
	<-w.finished
}

// ShuttingDown reports whether ShutDown was called (or a subscription could not be made).
func (w *WorkQueue) ShuttingDown() bool { return w.queue.ShuttingDown() }

// Err is why the queue shut down by itself (a subscription no grant fixes), or the refusal it is
// asking again after (PERMISSION_DENIED, UNAUTHENTICATED) until a subscription is accepted, or
// nil.
func (w *WorkQueue) Err() error {
	w.mu.Lock()
	defer w.mu.Unlock()
	return w.err
}
