package crcache_test

// The token options with per-client authorization end to end: a real sidecar with
// `server.authorization: kubernetes`, a ServiceAccount whose Role reads pods in namespace A
// only, and its token from the TokenRequest API in a file, as a projected token would be.
// What the cache's reads return is what that ServiceAccount may read; so the token reached
// informerd.

import (
	"context"
	"errors"
	"os"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/client-go/kubernetes/scheme"
	"sigs.k8s.io/controller-runtime/pkg/cache"
	"sigs.k8s.io/controller-runtime/pkg/client"

	informerd "informerd.io/clients/go"
	"informerd.io/clients/go/crcache"
)

// TestTokenOptionsReachInformerd: a cache with Options.TokenFile, and one with Options.Token,
// lists the pods of the namespace its ServiceAccount may read and is refused
// PERMISSION_DENIED for another cached namespace; a cache without a token is refused
// UNAUTHENTICATED.
func TestTokenOptionsReachInformerd(t *testing.T) {
	e := setup(t)
	a, b := e.Namespace(t, "authz-a"), e.Namespace(t, "authz-b")
	for _, ns := range []string{a, b} {
		for _, name := range []string{"p0", "p1"} {
			e.create(t, pod(ns, name, "", nil))
		}
	}
	tokenFile := e.PodReaderToken(t, a, "reader-a")
	token, err := os.ReadFile(tokenFile)
	if err != nil {
		t.Fatal(err)
	}
	// deniedTTL 1s: a denial given before RBAC's caches saw the new RoleBinding must not stick.
	s := e.NewSidecar(t, func(sock string) string {
		return strings.Replace(config(sock, a, b), "server:\n",
			"server:\n  authorization:\n    mode: kubernetes\n    deniedTTL: 1s\n", 1)
	})
	s.Start()
	target := "unix://" + s.Socket

	for _, o := range []crcache.Options{
		{Target: target, TokenFile: tokenFile},
		{Target: target, Token: string(token)},
	} {
		option := "TokenFile"
		if o.Token != "" {
			option = "Token"
		}
		c := newCache(t, o)
		// Until the sidecar has synced and the apiserver's RBAC serves the new binding.
		var pods corev1.PodList
		eventually(t, "the reader lists namespace A with Options."+option, func() string {
			ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
			defer cancel()
			if err := c.List(ctx, &pods, client.InNamespace(a)); err != nil {
				return err.Error()
			}
			return ""
		})
		if len(pods.Items) != 2 {
			t.Errorf("Options.%s: listed %d pods in %s, want the 2 created there", option, len(pods.Items), a)
		}
		err := c.List(context.Background(), &corev1.PodList{}, client.InNamespace(b))
		if !errors.Is(err, informerd.ErrForbidden) {
			t.Errorf("Options.%s: List of namespace B: %v, want PERMISSION_DENIED/Forbidden", option, err)
		}
	}

	anonymous := newCache(t, crcache.Options{Target: target})
	err = anonymous.List(context.Background(), &corev1.PodList{}, client.InNamespace(a))
	if !errors.Is(err, informerd.ErrUnauthenticated) {
		t.Errorf("List without a token: %v, want UNAUTHENTICATED/Unauthenticated", err)
	}
}

// TestTokenOptionsAreRefusedWhereTheyWouldBeIgnored: both options at once, or either with a
// connection of the caller's own (which the cache does not dial), are errors, never ignored.
func TestTokenOptionsAreRefusedWhereTheyWouldBeIgnored(t *testing.T) {
	conn, err := informerd.Dial("unix:///nonexistent/informerd.sock")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = conn.Close() })
	for name, o := range map[string]crcache.Options{
		"Token and TokenFile":  {Token: "t", TokenFile: "/var/run/secrets/informerd/token"},
		"Client and Token":     {Client: conn, Token: "t"},
		"Client and TokenFile": {Client: conn, TokenFile: "/var/run/secrets/informerd/token"},
	} {
		_, err := crcache.New(o, cache.Options{Scheme: scheme.Scheme})
		if err == nil || !strings.Contains(err.Error(), "Options.Token") {
			t.Errorf("%s: %v, want an error naming the options", name, err)
		}
	}
}

// newCache is a cache that dials the sidecar itself with o; its connection is closed when the
// test ends.
func newCache(t *testing.T, o crcache.Options) *crcache.Cache {
	t.Helper()
	c, err := crcache.New(o, cache.Options{Scheme: scheme.Scheme})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = c.Client().Close() })
	return c
}
