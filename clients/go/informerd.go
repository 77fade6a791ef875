// Package informerd is the Go client of informerd, the sidecar that keeps one filtered,
// field-stripped cache of Kubernetes objects and serves it over gRPC
// (proto/informerd/v1/cache.proto; the generated stubs are in package informerdv1).
//
//	c, err := informerd.Dial("") // $INFORMERD_SOCKET, else unix:///run/informerd/informerd.sock
//	pods, err := informerd.ListAs[corev1.Pod](ctx, c, "pods", informerd.InNamespace("web"))
//	inf := informerd.NewInformer[corev1.Pod](c, "pods", informerd.HandlerFuncs[corev1.Pod]{...})
//	go inf.Run(ctx)
//
// Objects travel as JSON: Get and List decode them into *unstructured.Unstructured, GetAs and
// ListAs into any type encoding/json can fill (*corev1.Pod, a CRD's Go type, ...).
package informerd

import (
	"context"
	"fmt"
	"io"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/backoff"
	"google.golang.org/grpc/credentials/insecure"
	"google.golang.org/grpc/metadata"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"

	"informerd.io/clients/go/informerdv1"
)

// DefaultSocket is where informerd listens unless its configuration says otherwise.
const DefaultSocket = "/run/informerd/informerd.sock"

// Client is a connection to one informerd sidecar. It is safe for concurrent use.
type Client struct {
	conn  *grpc.ClientConn
	cache informerdv1.CacheClient
}

// DialOption configures Dial.
type DialOption func(*dialOptions)

type dialOptions struct {
	grpc []grpc.DialOption
	// check runs at Dial: an option's error (an unreadable token file) fails Dial.
	check []func() error
}

// WithGRPCDialOptions adds options to the underlying grpc.NewClient call (interceptors,
// keepalive, credentials for a TCP listener behind a proxy, ...).
func WithGRPCDialOptions(opts ...grpc.DialOption) DialOption {
	return func(o *dialOptions) { o.grpc = append(o.grpc, opts...) }
}

// Dial connects to informerd at target: "unix:///path/to.sock" (or a plain absolute path), or
// "host:port" for its loopback TCP listener. An empty target means the socket path in
// $INFORMERD_SOCKET (SocketEnv), else DefaultSocket; a failure to connect to either says which
// it was. The connection is made lazily and re-made after it breaks; calls fail with
// UNAVAILABLE while the sidecar is unreachable (the Informer waits for it).
func Dial(target string, opts ...DialOption) (*Client, error) {
	var o dialOptions
	for _, opt := range opts {
		opt(&o)
	}
	target, hint := resolveTarget(target)
	gopts := []grpc.DialOption{
		// informerd listens on a Unix socket or on loopback only.
		grpc.WithTransportCredentials(insecure.NewCredentials()),
		// A sidecar that restarts comes back within seconds: retry the connection quickly
		// rather than with gRPC's default backoff, which grows to two minutes.
		grpc.WithConnectParams(grpc.ConnectParams{
			Backoff: backoff.Config{
				BaseDelay:  100 * time.Millisecond,
				Multiplier: 1.6,
				Jitter:     0.2,
				MaxDelay:   3 * time.Second,
			},
			MinConnectTimeout: 5 * time.Second,
		}),
		grpc.WithDefaultCallOptions(grpc.MaxCallRecvMsgSize(64 << 20)),
	}
	for _, check := range o.check {
		if err := check(); err != nil {
			return nil, err
		}
	}
	if hint != "" {
		gopts = append(gopts, hintInterceptors(hint)...)
	}
	gopts = append(gopts, o.grpc...)
	conn, err := grpc.NewClient(target, gopts...)
	if err != nil {
		return nil, fmt.Errorf("informerd: dial %s: %w", target, err)
	}
	return &Client{conn: conn, cache: informerdv1.NewCacheClient(conn)}, nil
}

// Close closes the connection; streams still open on it end.
func (c *Client) Close() error { return c.conn.Close() }

// Raw returns the generated gRPC client, for what this package does not wrap.
func (c *Client) Raw() informerdv1.CacheClient { return c.cache }

// Conn returns the connection itself, for the sidecar's other services on it: its gRPC health
// service (grpc_health_v1.NewHealthClient(c.Conn())), reflection.
func (c *Client) Conn() *grpc.ClientConn { return c.conn }

// ResumeToken is a point in a resource's cache: Watch with Since(token) replays exactly the
// changes after it. Revisions are only comparable within one epoch (one run of the sidecar).
type ResumeToken struct {
	Epoch    uint64
	Revision uint64
}

// IsZero reports whether the token is unset.
func (t ResumeToken) IsZero() bool { return t == ResumeToken{} }

func (t ResumeToken) String() string { return fmt.Sprintf("%d/%d", t.Epoch, t.Revision) }

// Predicate is an update predicate of a watch (see WithPredicates).
type Predicate = informerdv1.Predicate

// The predicates: an update (MODIFIED) is delivered when at least one holds.
const (
	GenerationChanged  = informerdv1.Predicate_GENERATION_CHANGED
	LabelsChanged      = informerdv1.Predicate_LABELS_CHANGED
	AnnotationsChanged = informerdv1.Predicate_ANNOTATIONS_CHANGED
)

// Get returns one object of a resource (the resource's name in the sidecar's configuration,
// e.g. "pods") by namespace and name ("" namespace for cluster-scoped objects).
func (c *Client) Get(ctx context.Context, resource, namespace, name string, opts ...GetOption) (*unstructured.Unstructured, error) {
	return GetAs[unstructured.Unstructured](ctx, c, resource, namespace, name, opts...)
}

// GetAs is Get decoding the object into a *T, e.g. GetAs[corev1.Pod].
func GetAs[T any](ctx context.Context, c *Client, resource, namespace, name string, opts ...GetOption) (*T, error) {
	if decodesJSON[T]() {
		opts = append(opts[:len(opts):len(opts)], OmitLabels())
	}
	resp, err := c.GetObject(ctx, resource, namespace, name, opts...)
	if err != nil {
		return nil, err
	}
	return decode[T](resp.GetObject())
}

// GetObject is Get returning the response as sent: the object's identity, revision and JSON,
// and the (epoch, revision) the read was made at.
func (c *Client) GetObject(ctx context.Context, resource, namespace, name string, opts ...GetOption) (*informerdv1.GetResponse, error) {
	o := getOptions(opts)
	req := &informerdv1.GetRequest{
		Resource:           resource,
		Cluster:            o.cluster,
		Namespace:          namespace,
		Name:               name,
		MinResourceVersion: o.minResourceVersion,
		Fields:             o.fields,
		WaitForSync:        o.waitForSync,
		OmitLabels:         o.omitLabels,
	}
	var header, trailer metadata.MD
	resp, err := c.cache.Get(ctx, req, grpc.Header(&header), grpc.Trailer(&trailer))
	if err != nil {
		return nil, wrapError(err, trailer, header)
	}
	return resp, nil
}

// ListResult is what List returns: the objects, all at one revision, and that revision as a
// resume token to Watch from.
type ListResult[T any] struct {
	Items []*T
	// Token is the (epoch, revision) the whole list is consistent at.
	Token ResumeToken
	// Synced tells whether every scope of the resource had finished its initial list.
	Synced bool
}

// List returns the objects of a resource that match the options.
func (c *Client) List(ctx context.Context, resource string, opts ...ListOption) (*ListResult[unstructured.Unstructured], error) {
	return ListAs[unstructured.Unstructured](ctx, c, resource, opts...)
}

// ListAs is List decoding the objects into *T, e.g. ListAs[corev1.Pod].
func ListAs[T any](ctx context.Context, c *Client, resource string, opts ...ListOption) (*ListResult[T], error) {
	if decodesJSON[T]() {
		opts = append(opts[:len(opts):len(opts)], OmitLabels())
	}
	res := &ListResult[T]{}
	var derr error
	token, synced, err := c.ListObjects(ctx, resource, func(obj *informerdv1.Object) {
		if derr != nil {
			return
		}
		v, err := decode[T](obj)
		if err != nil {
			derr = err
			return
		}
		res.Items = append(res.Items, v)
	}, opts...)
	if err != nil {
		return nil, err
	}
	if derr != nil {
		return nil, derr
	}
	res.Token, res.Synced = token, synced
	return res, nil
}

// ListObjects streams the raw objects of a List to fn, one at a time, without decoding them,
// and returns the token and synced flag of the last chunk.
func (c *Client) ListObjects(ctx context.Context, resource string, fn func(*informerdv1.Object), opts ...ListOption) (ResumeToken, bool, error) {
	o := listOptions(opts)
	req := &informerdv1.ListRequest{
		Resource:           resource,
		Cluster:            o.cluster,
		Namespace:          o.namespace,
		LabelSelector:      o.labelSelector,
		FieldSelector:      o.fieldSelector,
		Index:              o.index,
		Fields:             o.fields,
		WaitForSync:        o.waitForSync,
		ChunkSize:          o.chunkSize,
		MinResourceVersion: o.minResourceVersion,
		Limit:              o.limit,
		OmitLabels:         o.omitLabels,
	}
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	stream, err := c.cache.List(ctx, req)
	if err != nil {
		return ResumeToken{}, false, wrapError(err, nil, nil)
	}
	for {
		resp, err := stream.Recv()
		if err != nil {
			if err == io.EOF {
				return ResumeToken{}, false, fmt.Errorf("informerd: List %s: the stream ended without its last chunk", resource)
			}
			header, _ := stream.Header()
			return ResumeToken{}, false, wrapError(err, stream.Trailer(), header)
		}
		for _, obj := range resp.GetObjects() {
			fn(obj)
		}
		if resp.GetLast() {
			return ResumeToken{Epoch: resp.GetEpoch(), Revision: resp.GetRevision()}, resp.GetSynced(), nil
		}
	}
}

// Status returns what the sidecar caches and how it is doing; resource "" means all resources.
// WithCluster (its only option) limits it to that cluster's resources (and its entry of
// Clusters); an unknown cluster is NOT_FOUND.
func (c *Client) Status(ctx context.Context, resource string, opts ...StatusOption) (*informerdv1.StatusResponse, error) {
	o := statusOptions(opts)
	req := &informerdv1.StatusRequest{Resource: resource, Cluster: o.cluster}
	var header, trailer metadata.MD
	resp, err := c.cache.Status(ctx, req, grpc.Header(&header), grpc.Trailer(&trailer))
	if err != nil {
		return nil, wrapError(err, trailer, header)
	}
	return resp, nil
}

// WaitForSynced polls Status until every scope of every resource has synced, the sidecar being
// unreachable meanwhile counting as not yet synced. It returns the context's error if that
// ends first, with the last Status error if there was one.
func (c *Client) WaitForSynced(ctx context.Context, interval time.Duration) error {
	var last error
	for {
		callCtx, cancel := context.WithTimeout(ctx, 5*time.Second)
		st, err := c.Status(callCtx, "")
		cancel()
		if err == nil && st.GetSynced() {
			return nil
		}
		last = err
		select {
		case <-ctx.Done():
			if last != nil {
				return fmt.Errorf("%w (last error: %v)", ctx.Err(), last)
			}
			return ctx.Err()
		case <-time.After(interval):
		}
	}
}
