package informerd

// The options of each call kind, as controller-runtime's client.GetOption and
// client.ListOption: every call takes its own option interface, and each constructor returns a
// type that implements exactly the kinds of call it means something to, so that an option a
// call cannot use (Since on a Get, WithLimit on a Watch) is a compile error rather than being
// silently ignored.
//
// Decision: the *Options structs keep their fields unexported. Callers choose options through
// the constructors below (whose doc says what each does); a type of their own can still
// bundle options by calling the constructors' ApplyTo methods. Exporting the fields would
// make every request field public API twice, once as a field and once as an option.

import (
	"time"

	"informerd.io/clients/go/informerdv1"
)

// GetOption is an option of Get, GetAs and GetObject.
type GetOption interface{ ApplyToGet(*GetOptions) }

// ListOption is an option of List, ListAs and ListObjects.
type ListOption interface{ ApplyToList(*ListOptions) }

// WatchOption is an option of Watch.
type WatchOption interface{ ApplyToWatch(*WatchOptions) }

// InformerOption is an option of NewInformer.
type InformerOption interface{ ApplyToInformer(*InformerOptions) }

// WorkQueueOption is an option of NewWorkQueue.
type WorkQueueOption interface{ ApplyToWorkQueue(*WorkQueueOptions) }

// StatusOption is an option of Status.
type StatusOption interface{ ApplyToStatus(*StatusOptions) }

// EnsureOption is an option of EnsureWith.
type EnsureOption interface{ ApplyToEnsure(*EnsureOptions) }

// selection is which objects of a resource a List, Watch, Informer or WorkQueue covers.
type selection struct {
	namespace     string
	labelSelector string
	fieldSelector string
	index         *informerdv1.IndexLookup
}

// updateFilter is the update predicates of a watch or key subscription.
type updateFilter struct {
	predicates   []Predicate
	predicateCEL string
}

// delivery is how a watch stream carries its events (Watch and an Informer).
type delivery struct {
	bookmarkInterval time.Duration
	sendPrevious     bool
}

// GetOptions collects what the options of a Get set.
type GetOptions struct {
	cluster            string
	minResourceVersion string
	fields             []string
	waitForSync        bool
	omitLabels         bool
}

// ListOptions collects what the options of a List set.
type ListOptions struct {
	cluster string
	selection
	fields             []string
	minResourceVersion string
	waitForSync        bool
	chunkSize          uint32
	limit              int64
	omitLabels         bool
}

// followed is what a Watch and an Informer both set: which objects, and how their changes come.
type followed struct {
	cluster string
	selection
	updateFilter
	delivery
	fields     []string
	omitLabels bool
}

// InformerOptions collects what the options of NewInformer set: a watch's, less the starting
// point (the Informer's to choose) and WaitForSync (an Informer always waits for the sync).
type InformerOptions struct{ followed }

// WatchOptions collects what the options of a Watch set.
type WatchOptions struct {
	followed
	waitForSync  bool
	since        *ResumeToken
	initialState bool
	held         []byte // a delta resume's entries (the Informer's; see held.go)
}

// WorkQueueOptions collects what the options of NewWorkQueue set.
type WorkQueueOptions struct {
	cluster string
	selection
	updateFilter
	waitForSync bool
	since       *ResumeToken
}

// StatusOptions collects what the options of Status set.
type StatusOptions struct{ cluster string }

// EnsureOptions collects what the options of EnsureWith set.
type EnsureOptions struct{ cluster string }

// apply runs each option of one kind on a fresh set; nil options are skipped.
func apply[O, T any](opts []T, fn func(T, *O)) O {
	var o O
	for _, opt := range opts {
		if any(opt) != nil {
			fn(opt, &o)
		}
	}
	return o
}

func getOptions(opts []GetOption) GetOptions {
	return apply(opts, GetOption.ApplyToGet)
}

func listOptions(opts []ListOption) ListOptions {
	return apply(opts, ListOption.ApplyToList)
}

func watchOptions(opts []WatchOption) WatchOptions {
	return apply(opts, WatchOption.ApplyToWatch)
}

func informerOptions(opts []InformerOption) InformerOptions {
	return apply(opts, InformerOption.ApplyToInformer)
}

func workQueueOptions(opts []WorkQueueOption) WorkQueueOptions {
	return apply(opts, WorkQueueOption.ApplyToWorkQueue)
}

func statusOptions(opts []StatusOption) StatusOptions {
	return apply(opts, StatusOption.ApplyToStatus)
}

func ensureOptions(opts []EnsureOption) EnsureOptions {
	return apply(opts, EnsureOption.ApplyToEnsure)
}
