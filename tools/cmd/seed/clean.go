package main

import (
	"context"
	"flag"
	"fmt"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/metadata"
)

// runClean deletes the namespaces PREFIX-<n> that seed created. Seeded pods are bound to
// nodes, so a plain namespace deletion would wait for a kubelet that never comes to confirm
// their graceful deletion: the namespace would stay Terminating for ever. clean therefore
// force-deletes (grace period 0) the pods first, many at a time, then deletes the namespaces.
func runClean(ctx context.Context, args []string) error {
	fs := flag.NewFlagSet("clean", flag.ContinueOnError)
	var common commonFlags
	wait := fs.Duration("wait", 5*time.Minute, "how long to wait for the namespaces to be gone (0: do not wait)")
	concurrency := fs.Int("concurrency", 64, "deletions in flight")
	common.register(fs)
	if err := fs.Parse(args); err != nil {
		return err
	}
	if err := common.check(fs); err != nil {
		return err
	}
	if *concurrency < 1 {
		return usageError(fs, "--concurrency must be at least 1")
	}
	if fs.NArg() > 0 {
		return usageError(fs, "unexpected arguments %q", fs.Args())
	}
	clients, cfg, err := newClients(&common)
	if err != nil {
		return err
	}
	meta, err := metadata.NewForConfig(cfg)
	if err != nil {
		return err
	}
	start := time.Now()
	c := clients[0]
	names, err := seededNamespaces(ctx, c, common.prefix)
	if err != nil {
		return err
	}

	// Pods, by name from a metadata-only list, then one deletion each: a DeleteCollection
	// deletes one pod after the other and runs into the request timeout on large namespaces.
	type podKey struct{ ns, name string }
	var (
		pods []podKey
		mu   sync.Mutex
	)
	err = parallel(ctx, 8, len(names), func(ctx context.Context, w, i int) error {
		opts := metav1.ListOptions{Limit: 1000}
		for {
			var list *metav1.PartialObjectMetadataList
			err := retry(ctx, func() (err error) {
				list, err = meta.Resource(corev1.SchemeGroupVersion.WithResource("pods")).Namespace(names[i]).List(ctx, opts)
				return err
			})
			if err != nil {
				return fmt.Errorf("listing pods in %s: %w", names[i], err)
			}
			mu.Lock()
			for _, p := range list.Items {
				pods = append(pods, podKey{p.Namespace, p.Name})
			}
			mu.Unlock()
			if list.Continue == "" {
				return nil
			}
			opts.Continue = list.Continue
		}
	})
	if err != nil {
		return err
	}
	var deleted atomic.Int64
	stopProgress := progress(5*time.Second, func(el time.Duration) string {
		return fmt.Sprintf("clean: %5.1fs deleted %d/%d pods", el.Seconds(), deleted.Load(), len(pods))
	})
	err = parallel(ctx, *concurrency, len(pods), func(ctx context.Context, w, i int) error {
		p := pods[i]
		err := retry(ctx, func() error {
			return clients[w%len(clients)].CoreV1().Pods(p.ns).Delete(ctx, p.name, metav1.DeleteOptions{GracePeriodSeconds: ptr(int64(0))})
		})
		if err != nil && !apierrors.IsNotFound(err) {
			return fmt.Errorf("deleting pod %s/%s: %w", p.ns, p.name, err)
		}
		deleted.Add(1)
		return nil
	})
	stopProgress()
	if err != nil {
		return err
	}
	podsDone := time.Since(start)

	err = parallel(ctx, 16, len(names), func(ctx context.Context, w, i int) error {
		return retry(ctx, func() error {
			err := clients[w%len(clients)].CoreV1().Namespaces().Delete(ctx, names[i], metav1.DeleteOptions{})
			if apierrors.IsNotFound(err) {
				return nil
			}
			return err
		})
	})
	if err != nil {
		return fmt.Errorf("deleting namespaces: %w", err)
	}
	if *wait > 0 {
		deadline := time.Now().Add(*wait)
		for {
			left, err := seededNamespaces(ctx, c, common.prefix)
			if err != nil {
				return err
			}
			if len(left) == 0 {
				break
			}
			if time.Now().After(deadline) {
				return fmt.Errorf("%d namespaces still there after %s: %s", len(left), *wait, strings.Join(left, " "))
			}
			// Pods created meanwhile (by churn, say) would hold the namespaces up as well.
			if err := forceDeletePods(ctx, clients, left); err != nil {
				return err
			}
			select {
			case <-ctx.Done():
				return ctx.Err()
			case <-time.After(time.Second):
			}
		}
	}
	fmt.Printf("deleted %d namespaces (%d pods in %.1fs) in %.1fs\n", len(names), len(pods), podsDone.Seconds(), time.Since(start).Seconds())
	return nil
}

// seededNamespaces lists the namespaces PREFIX-<n> labelled as seeded.
func seededNamespaces(ctx context.Context, c kubernetes.Interface, prefix string) ([]string, error) {
	var names []string
	err := retry(ctx, func() error {
		list, err := c.CoreV1().Namespaces().List(ctx, metav1.ListOptions{LabelSelector: seedLabel + "=true"})
		if err != nil {
			return err
		}
		names = names[:0]
		for _, ns := range list.Items {
			rest, ok := strings.CutPrefix(ns.Name, prefix+"-")
			if _, err := strconv.Atoi(rest); ok && err == nil {
				names = append(names, ns.Name)
			}
		}
		return nil
	})
	if err != nil {
		return nil, fmt.Errorf("listing namespaces: %w", err)
	}
	return names, nil
}

// forceDeletePods deletes whatever pods are left in the namespaces, without grace period.
func forceDeletePods(ctx context.Context, clients []kubernetes.Interface, namespaces []string) error {
	return parallel(ctx, 32, len(namespaces), func(ctx context.Context, w, i int) error {
		err := retry(ctx, func() error {
			return clients[w%len(clients)].CoreV1().Pods(namespaces[i]).DeleteCollection(ctx,
				metav1.DeleteOptions{GracePeriodSeconds: ptr(int64(0))}, metav1.ListOptions{})
		})
		if err != nil && !apierrors.IsNotFound(err) {
			return fmt.Errorf("deleting pods in %s: %w", namespaces[i], err)
		}
		return nil
	})
}
