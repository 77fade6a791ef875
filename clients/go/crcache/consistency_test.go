package crcache_test

// KEP-5647's "ConsistencyStore" pattern through crcache: after a write, a controller requeues
// until its informer's LastSyncResourceVersion() has reached the write's resourceVersion, and
// then reads without any option; it must never read older than its write.

import (
	"context"
	"strconv"
	"testing"

	corev1 "k8s.io/api/core/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"
)

// lastSynced is the interface controllers assert an informer to (client-go's SharedInformer has it).
type lastSynced interface{ LastSyncResourceVersion() string }

func TestConsistencyStorePattern(t *testing.T) {
	e := setup(t)
	ns := e.Namespace(t, "consistency")
	s := e.StartSidecar(t, func(sock string) string { return config(sock, ns) })
	c := startCache(t, s)
	ctx := context.Background()
	p := pod(ns, "p", "", map[string]string{"n": "0"})
	e.create(t, p)
	inf, err := c.GetInformer(ctx, &corev1.Pod{})
	if err != nil {
		t.Fatal(err)
	}
	ls, ok := inf.(lastSynced)
	if !ok {
		t.Fatalf("the informer (%T) has no LastSyncResourceVersion", inf)
	}
	for i := 1; i <= 20; i++ {
		p.Labels["n"] = strconv.Itoa(i)
		if err := e.kube.Update(ctx, p); err != nil {
			t.Fatal(err)
		}
		written, _ := strconv.ParseUint(p.ResourceVersion, 10, 64)
		eventually(t, "LastSyncResourceVersion reaches the write's "+p.ResourceVersion, func() string {
			last, _ := strconv.ParseUint(ls.LastSyncResourceVersion(), 10, 64)
			if last >= written {
				return ""
			}
			return "at " + ls.LastSyncResourceVersion()
		})
		var got corev1.Pod
		if err := c.Get(ctx, client.ObjectKeyFromObject(p), &got); err != nil {
			t.Fatal(err)
		}
		if got.Labels["n"] != strconv.Itoa(i) {
			t.Fatalf("write %d (resourceVersion %s) seen by the informer, then Get read n=%s at %s: older than the write",
				i, p.ResourceVersion, got.Labels["n"], got.ResourceVersion)
		}
	}
}
