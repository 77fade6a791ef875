package main

// The measured process: labelctl's controller in a manager with one of the caches.

import (
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"os"
	"os/signal"
	"path/filepath"
	"runtime/pprof"
	"strings"
	"sync/atomic"
	"syscall"
	"time"

	"github.com/go-logr/logr"
	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/client-go/kubernetes/scheme"
	toolscache "k8s.io/client-go/tools/cache"
	"k8s.io/client-go/tools/clientcmd"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/cache"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/log"
	metricsserver "sigs.k8s.io/controller-runtime/pkg/metrics/server"

	"informerd.io/clients/go/crcache"
	"informerd.io/clients/go/crcache/internal/labelctl"
)

// The caches a controller process can run with.
const (
	cacheDefault      = "default"       // controller-runtime's own cache, as a manager has it unconfigured
	cacheDefaultStrip = "default-strip" // the same with cache.TransformStripManagedFields, a common tuning
	cacheInformerd    = "informerd"     // crcache over the sidecar
)

type controllerFlags struct {
	kubeconfig, cache, socket, namespaces string
	cpuProfile                            string
	hold, timeout                         time.Duration
}

func controllerMain(args []string) error {
	var f controllerFlags
	fs := flag.NewFlagSet("controller", flag.ContinueOnError)
	fs.StringVar(&f.kubeconfig, "kubeconfig", os.Getenv("KUBECONFIG"), "kubeconfig of the API server")
	fs.StringVar(&f.cache, "cache", cacheDefault, "the manager's cache: default, default-strip or informerd")
	fs.StringVar(&f.socket, "socket", "", "informerd's socket (with --cache informerd)")
	fs.StringVar(&f.namespaces, "namespaces", "", "comma-separated namespaces the default cache watches (default: all); informerd's config decides its own")
	fs.DurationVar(&f.hold, "hold", 5*time.Second, "how long to run after the first full reconcile pass before measuring")
	fs.DurationVar(&f.timeout, "timeout", 10*time.Minute, "give up if the caches have not synced by then")
	fs.StringVar(&f.cpuProfile, "cpuprofile", "", "write a CPU profile of the process, from start to its sample, to this file")
	if err := fs.Parse(args); err != nil {
		return err
	}
	opts, err := managerOptions(f)
	if err != nil {
		return err
	}
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	return runController(ctx, f, opts)
}

// managerOptions are the manager's options for the cache f names; nothing else differs.
func managerOptions(f controllerFlags) (ctrl.Options, error) {
	opts := ctrl.Options{
		Scheme:                 scheme.Scheme,
		Metrics:                metricsserver.Options{BindAddress: "0"},
		HealthProbeBindAddress: "0",
	}
	if f.namespaces != "" && f.cache != cacheInformerd {
		opts.Cache.DefaultNamespaces = map[string]cache.Config{}
		for _, ns := range strings.Split(f.namespaces, ",") {
			opts.Cache.DefaultNamespaces[ns] = cache.Config{}
		}
	}
	switch f.cache {
	case cacheDefault:
	case cacheDefaultStrip:
		opts.Cache.DefaultTransform = cache.TransformStripManagedFields()
	case cacheInformerd:
		if f.socket == "" {
			return opts, errors.New("--cache informerd needs --socket, the sidecar's Unix socket")
		}
		opts.NewCache = crcache.NewCacheFunc(crcache.Options{Target: "unix://" + f.socket})
	default:
		return opts, fmt.Errorf("--cache %q: want %s, %s or %s", f.cache, cacheDefault, cacheDefaultStrip, cacheInformerd)
	}
	return opts, nil
}

// runController starts the manager, measures once synced, prints the sample and runs until ctx ends.
func runController(ctx context.Context, f controllerFlags, opts ctrl.Options) error {
	log.SetLogger(logr.Discard())
	cfg, err := clientcmd.BuildConfigFromFlags("", f.kubeconfig)
	if err != nil {
		return err
	}
	// Decision: the client's rate limits matter only for the reconcilers' own reads and writes;
	// informers list and watch outside them. The defaults stay, as in an unconfigured manager.
	start := time.Now()
	stopProfile, err := startCPUProfile(f.cpuProfile)
	if err != nil {
		return err
	}
	mgr, err := ctrl.NewManager(cfg, opts)
	if err != nil {
		return err
	}
	r, err := labelctl.Setup(ctx, mgr, "label-"+f.cache)
	if err != nil {
		return err
	}
	done := make(chan error, 1)
	go func() { done <- mgr.Start(ctx) }()

	go logProgress(ctx, r, start)
	pods, err := waitSynced(ctx, mgr, f.timeout)
	if err != nil {
		return err
	}
	synced := time.Since(start)
	deployments, err := waitFirstPass(ctx, mgr, r, f.timeout)
	if err != nil {
		return err
	}
	passed := time.Since(start)
	stopProfile()
	select {
	case <-time.After(f.hold):
	case <-ctx.Done():
	}
	s := measure()
	if dir := os.Getenv("HEAPBENCH_HEAP_PROFILES"); dir != "" {
		// The live heap the sample measured, by where it was allocated (go tool pprof).
		out, err := os.Create(filepath.Join(dir, fmt.Sprintf("heap-%s-%d.pprof", f.cache, os.Getpid())))
		if err != nil {
			return err
		}
		err = pprof.WriteHeapProfile(out)
		out.Close()
		if err != nil {
			return err
		}
	}
	s.Cache, s.Pods, s.SyncSeconds, s.Reconciles = f.cache, pods.Load(), synced.Seconds(), r.Reconciles()
	s.Deployments, s.FirstPassSeconds = deployments, passed.Seconds()
	if err := json.NewEncoder(os.Stdout).Encode(s); err != nil {
		return err
	}
	return <-done
}

// startCPUProfile writes a CPU profile to path (none for "") until the returned func is called.
func startCPUProfile(path string) (func(), error) {
	if path == "" {
		return func() {}, nil
	}
	out, err := os.Create(path)
	if err != nil {
		return nil, err
	}
	if err := pprof.StartCPUProfile(out); err != nil {
		out.Close()
		return nil, err
	}
	return func() { pprof.StopCPUProfile(); out.Close() }, nil
}

// waitFirstPass waits until the controller has reconciled every Deployment the cache holds at
// least once (its first full pass: what a controller does at start over the objects that exist)
// and returns how many there are.
//
// Decision: the heap is measured after it, so that every variant is measured having done the
// same work; a sample taken a fixed time after sync caught the controllers at different points
// of that pass (with crcache, before any reconcile: its pod handler's initial state was still
// being delivered).
func waitFirstPass(ctx context.Context, mgr ctrl.Manager, r *labelctl.Reconciler, timeout time.Duration) (int, error) {
	ctx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()
	// Decision: the Deployments are listed once (the bench runs no churn); listing them every
	// 200 ms, as this did, cost the sidecar a List of every Deployment five times a second,
	// competing with the reconciles it measured (in a 221-Deployment pass, 177 Lists besides the
	// reconciles' 221, nearly all of them this poll's).
	var deps appsv1.DeploymentList
	if err := mgr.GetCache().List(ctx, &deps); err != nil {
		return 0, fmt.Errorf("list Deployments: %w", err)
	}
	for {
		missing := 0
		for i := range deps.Items {
			if !r.Reconciled(client.ObjectKeyFromObject(&deps.Items[i])) {
				missing++
			}
		}
		if missing == 0 {
			return len(deps.Items), nil
		}
		select {
		case <-ctx.Done():
			return 0, fmt.Errorf("%d of %d Deployments not reconciled after %s", missing, len(deps.Items), timeout)
		case <-time.After(200 * time.Millisecond):
		}
	}
}

// logProgress writes the reconciles run so far to stderr (the process's log) every second.
func logProgress(ctx context.Context, r *labelctl.Reconciler, start time.Time) {
	for {
		select {
		case <-ctx.Done():
			return
		case <-time.After(time.Second):
			fmt.Fprintf(os.Stderr, "%6.1fs: %d reconciles\n", time.Since(start).Seconds(), r.Reconciles())
		}
	}
}

// waitSynced waits until the manager's caches have synced and a handler on the pod informer
// has received every pod the cache holds; the returned counter follows the pods it holds.
func waitSynced(ctx context.Context, mgr ctrl.Manager, timeout time.Duration) (*atomic.Int64, error) {
	ctx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()
	inf, err := mgr.GetCache().GetInformer(ctx, &corev1.Pod{})
	if err != nil {
		return nil, fmt.Errorf("pod informer: %w", err)
	}
	var pods atomic.Int64
	reg, err := inf.AddEventHandler(toolscache.ResourceEventHandlerFuncs{
		AddFunc:    func(any) { pods.Add(1) },
		DeleteFunc: func(any) { pods.Add(-1) },
	})
	if err != nil {
		return nil, err
	}
	if !mgr.GetCache().WaitForCacheSync(ctx) || !toolscache.WaitForCacheSync(ctx.Done(), reg.HasSynced) {
		return nil, fmt.Errorf("caches not synced after %s", timeout)
	}
	return &pods, nil
}
