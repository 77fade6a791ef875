package informerd

import (
	"context"
	"fmt"
	"io"

	"informerd.io/clients/go/informerdv1"
)

// EventType is the type of a watch event.
type EventType = informerdv1.EventType

// The event types.
const (
	Added    = informerdv1.EventType_ADDED
	Modified = informerdv1.EventType_MODIFIED
	Deleted  = informerdv1.EventType_DELETED
	// Bookmark: no object; the watch has seen every change up to Token.
	Bookmark = informerdv1.EventType_BOOKMARK
	// Synced: no object; the initial state (SendInitialState) is complete at Token.
	Synced = informerdv1.EventType_SYNCED
)

// Watcher is an open Watch stream: call Next until it returns an error, then Close (or cancel
// the context the watch was opened with).
type Watcher struct {
	stream informerdv1.Cache_WatchClient
	cancel context.CancelFunc
}

// Watch opens a watch of a resource. Without Since or SendInitialState it follows from the
// current revision.
func (c *Client) Watch(ctx context.Context, resource string, opts ...WatchOption) (*Watcher, error) {
	o := watchOptions(opts)
	req := watchRequest(resource, o)
	ctx, cancel := context.WithCancel(ctx)
	stream, err := c.cache.Watch(ctx, req)
	if err != nil {
		cancel()
		return nil, wrapError(err, nil, nil)
	}
	return &Watcher{stream: stream, cancel: cancel}, nil
}

func watchRequest(resource string, o WatchOptions) *informerdv1.WatchRequest {
	req := &informerdv1.WatchRequest{
		Resource:                resource,
		Cluster:                 o.cluster,
		Namespace:               o.namespace,
		LabelSelector:           o.labelSelector,
		FieldSelector:           o.fieldSelector,
		Index:                   o.index,
		Fields:                  o.fields,
		Predicates:              o.predicates,
		PredicateCel:            o.predicateCEL,
		BookmarkIntervalSeconds: uint32(o.bookmarkInterval.Seconds()),
		WaitForSync:             o.waitForSync,
		SendPrevious:            o.sendPrevious,
		OmitLabels:              o.omitLabels,
	}
	if o.bookmarkInterval > 0 && req.BookmarkIntervalSeconds == 0 {
		req.BookmarkIntervalSeconds = 1
	}
	switch {
	case o.since != nil:
		req.Start = &informerdv1.WatchRequest_Since{Since: &informerdv1.ResumeToken{Epoch: o.since.Epoch, Revision: o.since.Revision}}
	case o.held != nil:
		req.Start = &informerdv1.WatchRequest_Held{Held: &informerdv1.HeldObjects{Entries: o.held}}
	case o.initialState:
		req.Start = &informerdv1.WatchRequest_SendInitialState{SendInitialState: true}
	}
	return req
}

// Next returns the next event. When the stream ends it returns an *Error with the server's
// code and reason (io.EOF if the server closed the stream without one, which it does not do
// while serving).
func (w *Watcher) Next() (*informerdv1.WatchEvent, error) {
	ev, err := w.stream.Recv()
	if err != nil {
		if err == io.EOF {
			return nil, io.EOF
		}
		header, _ := w.stream.Header()
		return nil, wrapError(err, w.stream.Trailer(), header)
	}
	return ev, nil
}

// Close ends the watch.
func (w *Watcher) Close() { w.cancel() }

// TokenOf returns the resume token of an event: (epoch, revision).
func TokenOf(ev *informerdv1.WatchEvent) ResumeToken {
	return ResumeToken{Epoch: ev.GetEpoch(), Revision: ev.GetRevision()}
}

// DecodeObject decodes a watch event's (or any) object into a *T.
func DecodeObject[T any](obj *informerdv1.Object) (*T, error) { return decode[T](obj) }

// Key is the "namespace/name" (or "name" for cluster-scoped objects) of an object.
func Key(obj *informerdv1.Object) string {
	return keyOf(obj.GetNamespace(), obj.GetName())
}

func keyOf(ns, name string) string {
	if ns == "" {
		return name
	}
	return fmt.Sprintf("%s/%s", ns, name)
}
