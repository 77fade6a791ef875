package informerd_test

// WithCluster end to end: a sidecar caching pods from its own cluster and from a remote one
// named "mirror" (the same control plane through a kubeconfig file, each with its own label
// selector), so that a pod is in one cache and not the other: the option picks the cache.

import (
	"fmt"
	"testing"

	"google.golang.org/grpc/codes"

	informerd "informerd.io/clients/go"
)

func TestWithClusterReadsThatClustersCache(t *testing.T) {
	e := setup(t)
	ns := e.Namespace(t, "cluster")
	e.createPod(t, ns, "own", map[string]string{"side": "own"})
	e.createPod(t, ns, "remote", map[string]string{"side": "remote"})
	s := e.StartSidecar(t, func(socket string) string {
		return fmt.Sprintf(`apiVersion: informerd.io/v1alpha1
kind: Config
server:
  socket: %s
clusters:
- name: mirror
  kubeconfig: %s
resources:
- name: pods
  apiVersion: v1
  kind: Pod
  namespaces: [%s]
  labelSelector: side=own
- name: pods
  apiVersion: v1
  kind: Pod
  namespaces: [%s]
  labelSelector: side=remote
  cluster: mirror
`, socket, e.Kubeconfig, ns, ns)
	})
	s.WaitSynced()
	c := s.Client()
	ctx := callCtx(t)

	names := func(opts ...informerd.ListOption) []string {
		list, err := c.List(ctx, "pods", append(opts, informerd.InNamespace(ns), informerd.WaitForSync())...)
		if err != nil {
			t.Fatalf("List: %v", err)
		}
		var out []string
		for _, p := range list.Items {
			out = append(out, p.GetName())
		}
		return out
	}
	if got := names(); fmt.Sprint(got) != "[own]" {
		t.Errorf("the default cluster's pods = %v, want [own]", got)
	}
	if got := names(informerd.WithCluster("mirror")); fmt.Sprint(got) != "[remote]" {
		t.Errorf("mirror's pods = %v, want [remote]", got)
	}
	if _, err := c.Get(ctx, "pods", ns, "remote", informerd.WithCluster("mirror")); err != nil {
		t.Errorf("Get remote from mirror: %v", err)
	}
	_, err := c.Get(ctx, "pods", ns, "remote")
	checkErr(t, "Get remote from the default cluster", err, codes.NotFound, "NotFound")
	_, err = c.Get(ctx, "pods", ns, "own", informerd.WithCluster("nowhere"))
	checkErr(t, "Get from an unknown cluster", err, codes.NotFound, "NotFound")

	// Status takes the cluster as the other calls do.
	st, err := c.Status(ctx, "", informerd.WithCluster("mirror"))
	if err != nil {
		t.Fatalf("Status of mirror: %v", err)
	}
	if len(st.GetClusters()) != 1 || st.GetClusters()[0].GetName() != "mirror" || len(st.GetResources()) != 1 || st.GetResources()[0].GetCluster() != "mirror" {
		t.Errorf("Status of mirror = clusters %v, resources %v; want mirror's only", st.GetClusters(), st.GetResources())
	}
	_, err = c.Status(ctx, "", informerd.WithCluster("nowhere"))
	checkErr(t, "Status of an unknown cluster", err, codes.NotFound, "NotFound")
}
