package informerd

import (
	"context"

	"google.golang.org/grpc"
	"google.golang.org/grpc/metadata"

	"informerd.io/clients/go/informerdv1"
)

// Ensure asks the sidecar for a cache of apiVersion/kind in namespaces (none: every namespace,
// and cluster-scoped kinds), a kind its configuration does not list, within the operator's
// onDemand bounds; it returns once the cache has synced, with the resource name to use with
// Get, List and Watch. Give ctx a deadline: when it passes before the sync, the error's reason
// is NotCaughtUp (the cache keeps syncing: call again). Refusals are PERMISSION_DENIED with the
// reason Forbidden, naming the bound (onDemand.allow, onDemand.namespaces, onDemand.maxCaches)
// or the RBAC rule. The sidecar stops the cache after onDemand.idleTimeout without a client
// (no Watch open, no call naming it). For a remote cluster, use EnsureWith.
func (c *Client) Ensure(ctx context.Context, apiVersion, kind string, namespaces ...string) (string, error) {
	return c.EnsureWith(ctx, apiVersion, kind, namespaces)
}

// EnsureWith is Ensure with options: WithCluster("east") (its only option) caches from the
// sidecar's remote cluster east (read it with the same option). A remote cluster
// that does not answer is UNAVAILABLE (reason NotSynced) naming it: retry with backoff.
func (c *Client) EnsureWith(ctx context.Context, apiVersion, kind string, namespaces []string, opts ...EnsureOption) (string, error) {
	o := ensureOptions(opts)
	var header, trailer metadata.MD
	resp, err := c.cache.Ensure(ctx, &informerdv1.EnsureRequest{
		ApiVersion: apiVersion,
		Kind:       kind,
		Namespaces: namespaces,
		Cluster:    o.cluster,
	}, grpc.Header(&header), grpc.Trailer(&trailer))
	if err != nil {
		return "", wrapError(err, trailer, header)
	}
	return resp.GetResource(), nil
}
