package crcache

// IndexField over informerd's indexes: the sidecar computes index values itself, from its
// configuration, so registering a field only checks (in the sidecar's Status, which lists each
// resource's indexes) that the sidecar indexes it and records how List asks for it.

import (
	"context"
	"fmt"
	"strings"

	"sigs.k8s.io/controller-runtime/pkg/client"
)

// indexRoute is how List selects by a registered field: by the informerd index of that name,
// or by a field selector on the path of a `path:` index.
type indexRoute struct {
	name string
	path string
}

// IndexField registers field for MatchingFields on obj's kind. The sidecar must index it: by an
// index named exactly field (any `path:` or `cel:` index), or by a `path:` index whose path is
// field (without a leading dot). informerd computes the values from its configuration;
// extractValue is not called, so it must agree with the sidecar's index (a reconciler's
// results depend on it). A field the sidecar does not index is an error naming the
// configuration to add.
func (c *Cache) IndexField(ctx context.Context, obj client.Object, field string, _ client.IndexerFunc) error {
	sh, res, err := c.resolve(ctx, obj)
	if err != nil {
		return err
	}
	route, err := c.indexRouteOf(ctx, res, field)
	if err != nil {
		return err
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.indexes[res.name] == nil {
		c.indexes[res.name] = map[string]indexRoute{}
	}
	if _, dup := c.indexes[res.name][field]; dup {
		// As client-go's AddIndexers refuses an index that exists.
		return fmt.Errorf("indexer conflict: field %q of %s is already indexed", field, sh.gvk)
	}
	c.indexes[res.name][field] = route
	return nil
}

// indexRouteOf finds how the sidecar indexes field of res: an index named exactly field, or a
// `path:` index on field.
func (c *Cache) indexRouteOf(ctx context.Context, res resource, field string) (indexRoute, error) {
	st, err := c.client.Status(ctx, res.name)
	if err != nil {
		return indexRoute{}, fmt.Errorf("crcache: IndexField %q on informerd resource %q: %w", field, res.name, err)
	}
	path := strings.TrimPrefix(field, ".")
	var byPath *indexRoute
	for _, r := range st.GetResources() {
		for _, ix := range r.GetIndexes() {
			switch {
			case ix.GetName() == field && plainPath(ix.GetIndexes()):
				// A field selector term on its path uses the same index, and several such
				// terms combine in one List, where only one index is looked up by name.
				return indexRoute{path: ix.GetIndexes()}, nil
			case ix.GetName() == field:
				return indexRoute{name: field}, nil
			case ix.GetIndexes() == path && path != "cel" && byPath == nil: // "cel": a cel: index
				byPath = &indexRoute{path: path}
			}
		}
	}
	if byPath != nil {
		return *byPath, nil
	}
	return indexRoute{}, fmt.Errorf("crcache: IndexField %q: informerd does not index this field of resource %q; "+
		"add an index to that resource in the sidecar's configuration (informerd computes the values, "+
		"the IndexerFunc is not called):\n  indexes:\n  - name: %s\n    path: %s   # or cel: an expression giving the IndexerFunc's values",
		field, res.name, field, path)
}

// plainPath reports whether a `path:` index's path can be a field selector's field: dotted
// names, not `cel` or `labels` (what Status says of a `cel:` index and of the label index) nor
// a path with brackets.
func plainPath(path string) bool {
	if path == "" || path == "cel" || path == "labels" { // a cel: index, the label index
		return false
	}
	for _, r := range path {
		if !(r == '.' || r == '_' || r == '-' || r >= 'a' && r <= 'z' || r >= 'A' && r <= 'Z' || r >= '0' && r <= '9') {
			return false
		}
	}
	return true
}
