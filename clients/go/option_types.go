package informerd

// The option constructors and the types they return. Each type has an ApplyTo method for
// exactly the kinds of call (options.go) that can use it, so its method set is the list of
// calls that take it, and passing it to any other call does not compile.

import (
	"time"

	"informerd.io/clients/go/informerdv1"
)

// ClusterOption is what WithCluster returns; every call takes it.
type ClusterOption string

// WithCluster reads the resource from the sidecar's remote cluster name (its configuration's
// clusters[].name) instead of the cluster it runs in (default, or ""). Each cluster's cache has
// its own revisions: a resume token of one is refused by another (EpochChanged: relist).
// Every call takes it: Get, List, Watch, NewInformer, NewWorkQueue, Status, EnsureWith.
func WithCluster(name string) ClusterOption { return ClusterOption(name) }

// ApplyToGet applies WithCluster to the options of Get.
func (c ClusterOption) ApplyToGet(o *GetOptions) { o.cluster = string(c) }

// ApplyToList applies WithCluster to the options of List.
func (c ClusterOption) ApplyToList(o *ListOptions) { o.cluster = string(c) }

// ApplyToWatch applies WithCluster to the options of Watch.
func (c ClusterOption) ApplyToWatch(o *WatchOptions) { o.cluster = string(c) }

// ApplyToInformer applies WithCluster to the options of NewInformer.
func (c ClusterOption) ApplyToInformer(o *InformerOptions) { o.cluster = string(c) }

// ApplyToWorkQueue applies WithCluster to the options of NewWorkQueue.
func (c ClusterOption) ApplyToWorkQueue(o *WorkQueueOptions) { o.cluster = string(c) }

// ApplyToStatus applies WithCluster to the options of Status.
func (c ClusterOption) ApplyToStatus(o *StatusOptions) { o.cluster = string(c) }

// ApplyToEnsure applies WithCluster to the options of EnsureWith.
func (c ClusterOption) ApplyToEnsure(o *EnsureOptions) { o.cluster = string(c) }

// SelectionOption is what InNamespace, WithLabelSelector, WithFieldSelector and WithIndex
// return: which objects a List, Watch, Informer or WorkQueue covers. A Get names its object.
type SelectionOption struct{ set func(*selection) }

// InNamespace limits a List, Watch, Informer or WorkQueue to one namespace (default: all
// namespaces).
func InNamespace(ns string) SelectionOption {
	return SelectionOption{func(s *selection) { s.namespace = ns }}
}

// WithLabelSelector filters a List, Watch, Informer or WorkQueue by a Kubernetes label
// selector: "app=web,tier in (a,b),!canary".
func WithLabelSelector(sel string) SelectionOption {
	return SelectionOption{func(s *selection) { s.labelSelector = sel }}
}

// WithFieldSelector filters a List, Watch, Informer or WorkQueue by a Kubernetes field
// selector on metadata.name, metadata.namespace and the fields of `path` indexes:
// "spec.nodeName=node-1".
func WithFieldSelector(sel string) SelectionOption {
	return SelectionOption{func(s *selection) { s.fieldSelector = sel }}
}

// WithIndex makes a List, Watch, Informer or WorkQueue cover only the objects whose secondary
// index `name` (from the sidecar's configuration) has this value.
func WithIndex(name, value string) SelectionOption {
	return SelectionOption{func(s *selection) { s.index = &informerdv1.IndexLookup{Name: name, Value: value} }}
}

// ApplyToList applies the option to the options of List.
func (s SelectionOption) ApplyToList(o *ListOptions) { s.set(&o.selection) }

// ApplyToWatch applies the option to the options of Watch.
func (s SelectionOption) ApplyToWatch(o *WatchOptions) { s.set(&o.selection) }

// ApplyToInformer applies the option to the options of NewInformer.
func (s SelectionOption) ApplyToInformer(o *InformerOptions) { s.set(&o.selection) }

// ApplyToWorkQueue applies the option to the options of NewWorkQueue.
func (s SelectionOption) ApplyToWorkQueue(o *WorkQueueOptions) { s.set(&o.selection) }

// FieldsOption is what WithFields returns: Get, List, Watch and an Informer take it (a
// WorkQueue carries keys, not objects).
type FieldsOption []string

// WithFields returns only these fields of each object (paths like "status.phase" or
// `metadata.labels["app"]`); identity fields are always returned. Get, List, Watch and
// NewInformer take it.
func WithFields(paths ...string) FieldsOption { return FieldsOption(paths) }

// ApplyToGet applies WithFields to the options of Get.
func (f FieldsOption) ApplyToGet(o *GetOptions) { o.fields = append(o.fields, f...) }

// ApplyToList applies WithFields to the options of List.
func (f FieldsOption) ApplyToList(o *ListOptions) { o.fields = append(o.fields, f...) }

// ApplyToWatch applies WithFields to the options of Watch.
func (f FieldsOption) ApplyToWatch(o *WatchOptions) { o.fields = append(o.fields, f...) }

// ApplyToInformer applies WithFields to the options of NewInformer.
func (f FieldsOption) ApplyToInformer(o *InformerOptions) { o.fields = append(o.fields, f...) }

// OmitLabelsOption is what OmitLabels returns: Get, List, Watch and NewInformer take it.
type OmitLabelsOption struct{}

// OmitLabels leaves each object's proto labels map (informerdv1.Object.Labels) empty: the
// labels stay in the object's JSON, as the fields say. A caller that decodes the JSON saves the
// sidecar building the map and itself decoding it. GetAs, ListAs and a typed Informer set it
// themselves, unless their type is an ObjectReceiver (which may read the map).
func OmitLabels() OmitLabelsOption { return OmitLabelsOption{} }

// ApplyToGet applies OmitLabels to the options of Get.
func (OmitLabelsOption) ApplyToGet(o *GetOptions) { o.omitLabels = true }

// ApplyToList applies OmitLabels to the options of List.
func (OmitLabelsOption) ApplyToList(o *ListOptions) { o.omitLabels = true }

// ApplyToWatch applies OmitLabels to the options of Watch.
func (OmitLabelsOption) ApplyToWatch(o *WatchOptions) { o.omitLabels = true }

// ApplyToInformer applies OmitLabels to the options of NewInformer.
func (OmitLabelsOption) ApplyToInformer(o *InformerOptions) { o.omitLabels = true }

// ResourceVersionOption is what MinResourceVersion returns: Get and List take it.
type ResourceVersionOption string

// MinResourceVersion makes Get wait (up to the context's deadline, 30 s without one) until the
// cache holds this resourceVersion of the object or a later one: read your own writes by
// passing the resourceVersion the API server returned for the write. On List, the wait is
// until the cache holds an object of the listed namespace (of any, listing all namespaces) at
// this resourceVersion or later; it must be one of a write to an object of this resource that
// the cache keeps (a number), or the List fails with ReasonNotCaughtUp at the deadline.
// Get and List take it (a watch starts from a resume token: Since).
func MinResourceVersion(rv string) ResourceVersionOption { return ResourceVersionOption(rv) }

// ApplyToGet applies MinResourceVersion to the options of Get.
func (rv ResourceVersionOption) ApplyToGet(o *GetOptions) { o.minResourceVersion = string(rv) }

// ApplyToList applies MinResourceVersion to the options of List.
func (rv ResourceVersionOption) ApplyToList(o *ListOptions) { o.minResourceVersion = string(rv) }

// WaitForSyncOption is what WaitForSync returns: Get, List, Watch and a WorkQueue take it (an
// Informer always waits).
type WaitForSyncOption struct{}

// WaitForSync makes a Get, List, Watch or WorkQueue wait until the cache has synced (up to the
// context's deadline) instead of answering from a cache still in its initial list. An
// Informer always waits, so NewInformer does not take it.
func WaitForSync() WaitForSyncOption { return WaitForSyncOption{} }

// ApplyToGet applies WaitForSync to the options of Get.
func (WaitForSyncOption) ApplyToGet(o *GetOptions) { o.waitForSync = true }

// ApplyToList applies WaitForSync to the options of List.
func (WaitForSyncOption) ApplyToList(o *ListOptions) { o.waitForSync = true }

// ApplyToWatch applies WaitForSync to the options of Watch.
func (WaitForSyncOption) ApplyToWatch(o *WatchOptions) { o.waitForSync = true }

// ApplyToWorkQueue applies WaitForSync to the options of NewWorkQueue.
func (WaitForSyncOption) ApplyToWorkQueue(o *WorkQueueOptions) { o.waitForSync = true }

// ChunkSizeOption is what WithChunkSize returns: only List takes it.
type ChunkSizeOption uint32

// WithChunkSize sets how many objects a List receives per message. Only List takes it.
func WithChunkSize(n uint32) ChunkSizeOption { return ChunkSizeOption(n) }

// ApplyToList applies WithChunkSize to the options of List.
func (n ChunkSizeOption) ApplyToList(o *ListOptions) { o.chunkSize = uint32(n) }

// LimitOption is what WithLimit returns: only List takes it.
type LimitOption int64

// WithLimit makes a List return at most n objects, the first ones in the list's order (0: every
// match). There is no continue token: a List is one snapshot; list without a limit to read
// every match. Only List takes it.
func WithLimit(n int64) LimitOption { return LimitOption(n) }

// ApplyToList applies WithLimit to the options of List.
func (n LimitOption) ApplyToList(o *ListOptions) { o.limit = int64(n) }

// SinceOption is what Since returns: Watch and a WorkQueue take it (an Informer chooses its
// own starting point).
type SinceOption ResumeToken

// Since starts a Watch or WorkQueue after this token: exactly the changes after it are
// replayed. Watch and NewWorkQueue take it; an Informer resumes from its own token.
func Since(t ResumeToken) SinceOption { return SinceOption(t) }

// ApplyToWatch applies Since to the options of Watch.
func (s SinceOption) ApplyToWatch(o *WatchOptions) {
	t := ResumeToken(s)
	o.since = &t
}

// ApplyToWorkQueue applies Since to the options of NewWorkQueue.
func (s SinceOption) ApplyToWorkQueue(o *WorkQueueOptions) {
	t := ResumeToken(s)
	o.since = &t
}

// InitialStateOption is what SendInitialState returns: only Watch takes it.
type InitialStateOption struct{}

// SendInitialState starts a Watch with the current state, as ADDED events and one SYNCED event.
// Only Watch takes it: an Informer starts so by itself, and a WorkQueue always hands out
// every key first unless started Since a token.
func SendInitialState() InitialStateOption { return InitialStateOption{} }

// ApplyToWatch applies SendInitialState to the options of Watch.
func (InitialStateOption) ApplyToWatch(o *WatchOptions) { o.initialState = true }

// PredicateOption is what WithPredicates and WithPredicateCEL return: Watch, an Informer and
// a WorkQueue take it.
type PredicateOption struct{ set func(*updateFilter) }

// WithPredicates delivers an update only when one of the predicates (or the CEL predicate)
// holds; additions and deletions are always delivered. Watch, NewInformer and NewWorkQueue
// take it.
func WithPredicates(p ...Predicate) PredicateOption {
	return PredicateOption{func(o *updateFilter) { o.predicates = append(o.predicates, p...) }}
}

// WithPredicateCEL adds a CEL predicate over `object` and `oldObject`, e.g.
// "object.spec != oldObject.spec". Watch, NewInformer and NewWorkQueue take it.
func WithPredicateCEL(expr string) PredicateOption {
	return PredicateOption{func(o *updateFilter) { o.predicateCEL = expr }}
}

// ApplyToWatch applies the predicate to the options of Watch.
func (p PredicateOption) ApplyToWatch(o *WatchOptions) { p.set(&o.updateFilter) }

// ApplyToInformer applies the predicate to the options of NewInformer.
func (p PredicateOption) ApplyToInformer(o *InformerOptions) { p.set(&o.updateFilter) }

// ApplyToWorkQueue applies the predicate to the options of NewWorkQueue.
func (p PredicateOption) ApplyToWorkQueue(o *WorkQueueOptions) { p.set(&o.updateFilter) }

// DeliveryOption is what WithBookmarkInterval and WithPrevious return: how a watch stream
// carries its events. Watch and an Informer take it.
type DeliveryOption struct{ set func(*delivery) }

// WithBookmarkInterval sets how often the sidecar sends a BOOKMARK (default 10 s). Watch and
// NewInformer take it.
func WithBookmarkInterval(d time.Duration) DeliveryOption {
	return DeliveryOption{func(o *delivery) { o.bookmarkInterval = d }}
}

// WithPrevious makes a watch's MODIFIED events carry the object before the change
// (WatchEvent.Previous), and an Informer's updates their Meta.Previous: the old side of an
// update, without keeping a copy of every object. Watch and NewInformer take it.
func WithPrevious() DeliveryOption {
	return DeliveryOption{func(o *delivery) { o.sendPrevious = true }}
}

// ApplyToWatch applies the option to the options of Watch.
func (d DeliveryOption) ApplyToWatch(o *WatchOptions) { d.set(&o.delivery) }

// ApplyToInformer applies the option to the options of NewInformer.
func (d DeliveryOption) ApplyToInformer(o *InformerOptions) { d.set(&o.delivery) }
