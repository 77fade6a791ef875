package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"math/rand/v2"
	"net"
	"net/http"
	"net/url"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"time"

	"go.etcd.io/etcd/api/v3/v3rpc/rpctypes"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	utilnet "k8s.io/apimachinery/pkg/util/net"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/clientcmd"
)

// newClients returns one clientset per HTTP/2 connection. Client-side rate limiting is off
// (a negative QPS makes client-go build no rate limiter): the API server's priority and
// fairness does the flow control, and 429s are retried.
func newClients(c *commonFlags) ([]kubernetes.Interface, *rest.Config, error) {
	cfg, err := clientcmd.BuildConfigFromFlags("", c.kubeconfig)
	if err != nil {
		return nil, nil, fmt.Errorf("loading kubeconfig %s: %w", c.kubeconfig, err)
	}
	cfg.QPS = -1
	cfg.Burst = 1 << 20 // unused without a rate limiter
	cfg.Timeout = c.timeout
	cfg.UserAgent = "informerd-seed"
	// Protobuf for request bodies of creates and for all responses. Apply bodies are JSON
	// (application/apply-patch+yaml) whatever this says.
	cfg.AcceptContentTypes = "application/vnd.kubernetes.protobuf,application/json"
	cfg.ContentType = "application/vnd.kubernetes.protobuf"

	var out []kubernetes.Interface
	for i := 0; i < c.connections; i++ {
		cc := rest.CopyConfig(cfg)
		// A Proxy function (client-go's default behaviour, wrapped) makes client-go build a
		// transport of its own for this config instead of sharing its cached one: one
		// transport, one HTTP/2 connection.
		proxy := utilnet.NewProxierWithNoProxyCIDR(http.ProxyFromEnvironment)
		cc.Proxy = func(r *http.Request) (*url.URL, error) { return proxy(r) }
		cs, err := kubernetes.NewForConfig(cc)
		if err != nil {
			return nil, nil, fmt.Errorf("creating client: %w", err)
		}
		out = append(out, cs)
	}
	// Fail early and clearly if the API server is not there.
	ctx, cancel := context.WithTimeout(context.Background(), 15*time.Second)
	defer cancel()
	if _, err := out[0].Discovery().RESTClient().Get().AbsPath("/readyz").DoRaw(ctx); err != nil {
		return nil, nil, fmt.Errorf("API server at %s is not ready: %w", cfg.Host, err)
	}
	return out, cfg, nil
}

// retriable reports whether a failed request is worth another try.
func retriable(err error) bool {
	switch {
	case err == nil:
		return false
	case apierrors.IsTooManyRequests(err), apierrors.IsServerTimeout(err), apierrors.IsTimeout(err),
		apierrors.IsConflict(err), apierrors.IsInternalError(err), apierrors.IsServiceUnavailable(err),
		apierrors.IsUnexpectedServerError(err):
		return true
	case errors.Is(err, io.EOF), errors.Is(err, io.ErrUnexpectedEOF), errors.Is(err, context.DeadlineExceeded),
		errors.Is(err, syscall.ECONNRESET), errors.Is(err, syscall.ECONNREFUSED), errors.Is(err, syscall.EPIPE),
		utilnet.IsConnectionReset(err), utilnet.IsProbableEOF(err):
		return true
	}
	// etcd itself (seed pods --etcd, seed nodes): a write that timed out in a stall (etcd
	// re-reading its database after the page cache was dropped, at millions of objects) or
	// while the server was unavailable. Our writes are idempotent puts of the same value.
	if errors.Is(err, rpctypes.ErrTimeout) || errors.Is(err, rpctypes.ErrTimeoutDueToConnectionLost) ||
		errors.Is(err, rpctypes.ErrTimeoutDueToLeaderFail) || errors.Is(err, rpctypes.ErrNoLeader) {
		return true
	}
	var ne net.Error
	if errors.As(err, &ne) && ne.Timeout() {
		return true
	}
	msg := err.Error()
	return strings.Contains(msg, "http2: client connection lost") || strings.Contains(msg, "GOAWAY") ||
		strings.Contains(msg, "connection reset") || strings.Contains(msg, "Client.Timeout")
}

// retries counts retried requests, for the summary.
var retries atomic.Int64

const maxAttempts = 8

// retry calls fn until it succeeds, fails with an error that is not transient, or has been
// tried maxAttempts times.
func retry(ctx context.Context, fn func() error) error {
	delay := 100 * time.Millisecond
	for attempt := 1; ; attempt++ {
		err := fn()
		if err == nil || !retriable(err) || attempt == maxAttempts || ctx.Err() != nil {
			if err != nil && ctx.Err() != nil {
				return context.Cause(ctx)
			}
			return err
		}
		retries.Add(1)
		wait := delay + rand.N(delay)
		if s, ok := apierrors.SuggestsClientDelay(err); ok && s > 0 {
			wait = time.Duration(s)*time.Second + rand.N(delay)
		}
		select {
		case <-ctx.Done():
			return context.Cause(ctx)
		case <-time.After(wait):
		}
		delay = min(2*delay, 5*time.Second)
	}
}

// parallel calls fn(ctx, worker, i) for i in [0, n) on up to workers goroutines. The first error
// cancels the rest and is returned.
func parallel(ctx context.Context, workers, n int, fn func(ctx context.Context, worker, i int) error) error {
	ctx, cancel := context.WithCancelCause(ctx)
	defer cancel(nil)
	var (
		next     atomic.Int64
		wg       sync.WaitGroup
		once     sync.Once
		firstErr error
	)
	for w := 0; w < min(workers, n); w++ {
		wg.Add(1)
		go func(w int) {
			defer wg.Done()
			for {
				i := int(next.Add(1) - 1)
				if i >= n || ctx.Err() != nil {
					return
				}
				if err := fn(ctx, w, i); err != nil {
					once.Do(func() { firstErr = err; cancel(err) })
					return
				}
			}
		}(w)
	}
	wg.Wait()
	if firstErr != nil {
		return firstErr
	}
	return ctx.Err()
}
