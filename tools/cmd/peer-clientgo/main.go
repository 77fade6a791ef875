// Command peer-clientgo is the client-go peer of informerd's memory benchmark: one process that
// caches the cluster's Pods the way a Go controller does, and reports what that costs.
//
//	peer-clientgo --kubeconfig FILE [--mode informer|informer-strip|metadata]
//	              [--namespaces all|a,b,c] [--hold 10s] [--timeout 30m]
//
// Modes (each keeps one store per namespace, or one cluster-wide store for "all"):
//
//   - informer: a SharedInformerFactory (informers.WithNamespace per namespace) and its typed
//     Pod informer, objects stored as they arrive.
//   - informer-strip: the same, with informer.SetTransform set before Start to a function that
//     removes metadata.managedFields (meta.Accessor(obj).SetManagedFields(nil)), the way users
//     trim informer caches.
//   - metadata: a metadatainformer factory and its informer for pods, storing
//     *metav1.PartialObjectMetadata (metadata only, managedFields included, as served).
//
// Client settings are client-go's defaults, as a typical controller has them: one clientset
// (or metadata client) from the kubeconfig, shared by the factories, no ContentType set, so the
// typed Pod client asks for protobuf (client-go >= 1.35 prefers protobuf for built-in types when
// ContentType is unset) and the metadata client asks for PartialObjectMetadata(List) in
// protobuf; default QPS 5 and burst 10; no resync. Every informer has one event handler
// (counting adds), and sync means every handler registration reports HasSynced, which is what
// controllers wait for. The initial list is client-go's default: a streaming list (the
// WatchListClient feature, on by default since client-go 1.35; watch requests bypass the
// client-side rate limiter), which falls back to a paginated list of 500 at resourceVersion 0
// (rate-limited: with more than 10 namespaces the later lists wait) when the server refuses it.
// KUBE_FEATURE_WatchListClient=false turns it off; "initial_list" in the output reports the
// setting ("watch-list" or "list"), not whether a fallback happened.
//
// What is measured, in this order:
//
//  1. Baseline, after the client is built and before any informer exists: runtime.GC() twice,
//     runtime.MemStats.HeapAlloc; VmRSS from /proc/self/status; user+sys CPU (getrusage).
//  2. sync_seconds: from creating the factories to every registration's HasSynced (polled
//     every 10 ms); cpu_seconds: user+sys CPU spent over the same interval.
//  3. objects: the keys in the stores, summed over namespaces.
//  4. After --hold (the process keeps its informers running, so that RSS settles):
//     runtime.GC() twice; heap_bytes = HeapAlloc - baseline HeapAlloc (live heap the informers
//     hold); rss_bytes = VmRSS; peak_rss_bytes = VmHWM (the high-water mark of the whole run,
//     which in practice is reached during the initial sync).
//
// The one line on stdout is JSON:
//
//	{"system":"client-go","profile":MODE,"objects":N,"sync_seconds":S,"heap_bytes":B,
//	 "heap_bytes_per_object":B/N,"rss_bytes":R,"rss_baseline_bytes":R0,
//	 "rss_bytes_per_object":(R-R0)/N,"peak_rss_bytes":P,"cpu_seconds":C,
//	 "initial_list":"watch-list"|"list","namespaces":K}
//
// Logs go to stderr. The exit status is non-zero when the informers do not sync in --timeout.
package main

import (
	"context"
	"encoding/json"
	"flag"
	"fmt"
	"math"
	"os"
	"runtime"
	"strconv"
	"strings"
	"sync/atomic"
	"syscall"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/features"
	"k8s.io/client-go/informers"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/metadata"
	"k8s.io/client-go/metadata/metadatainformer"
	"k8s.io/client-go/tools/cache"
	"k8s.io/client-go/tools/clientcmd"
)

type result struct {
	System             string  `json:"system"`
	Profile            string  `json:"profile"`
	Objects            int     `json:"objects"`
	SyncSeconds        float64 `json:"sync_seconds"`
	HeapBytes          int64   `json:"heap_bytes"`
	HeapBytesPerObject float64 `json:"heap_bytes_per_object"`
	RSSBytes           int64   `json:"rss_bytes"`
	RSSBaselineBytes   int64   `json:"rss_baseline_bytes"`
	RSSBytesPerObject  float64 `json:"rss_bytes_per_object"`
	PeakRSSBytes       int64   `json:"peak_rss_bytes"`
	CPUSeconds         float64 `json:"cpu_seconds"`
	InitialList        string  `json:"initial_list"`
	Namespaces         int     `json:"namespaces"`
}

func main() {
	if err := run(); err != nil {
		fmt.Fprintf(os.Stderr, "peer-clientgo: %v\n", err)
		os.Exit(1)
	}
}

func run() error {
	kubeconfig := flag.String("kubeconfig", "", "kubeconfig file (required)")
	mode := flag.String("mode", "informer", "informer, informer-strip or metadata")
	nsFlag := flag.String("namespaces", "all", `comma-separated namespaces, or "all" for one cluster-wide informer`)
	hold := flag.Duration("hold", 10*time.Second, "how long to keep running after sync before measuring")
	timeout := flag.Duration("timeout", 30*time.Minute, "give up when not synced by then")
	flag.Parse()
	if *kubeconfig == "" {
		return fmt.Errorf("--kubeconfig is required")
	}
	switch *mode {
	case "informer", "informer-strip", "metadata":
	default:
		return fmt.Errorf("--mode %q: want informer, informer-strip or metadata", *mode)
	}
	namespaces := []string{metav1.NamespaceAll}
	if *nsFlag != "all" {
		namespaces = nil
		for _, ns := range strings.Split(*nsFlag, ",") {
			if ns = strings.TrimSpace(ns); ns != "" {
				namespaces = append(namespaces, ns)
			}
		}
		if len(namespaces) == 0 {
			return fmt.Errorf("--namespaces %q names no namespace", *nsFlag)
		}
	}

	cfg, err := clientcmd.BuildConfigFromFlags("", *kubeconfig)
	if err != nil {
		return err
	}
	var clientset kubernetes.Interface
	var metaClient metadata.Interface
	if *mode == "metadata" {
		metaClient, err = metadata.NewForConfig(cfg)
	} else {
		clientset, err = kubernetes.NewForConfig(cfg)
	}
	if err != nil {
		return err
	}

	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()

	initialList := "list"
	if features.FeatureGates().Enabled(features.WatchListClient) {
		initialList = "watch-list"
	}
	fmt.Fprintf(os.Stderr, "peer-clientgo: mode %s, %d informer(s), initial list %s, hold %s\n",
		*mode, len(namespaces), initialList, *hold)

	heapBase := liveHeap()
	rssBase := procStatusBytes("VmRSS")
	cpuBase := cpuSeconds()
	start := time.Now()

	var adds atomic.Int64
	handler := cache.ResourceEventHandlerFuncs{AddFunc: func(any) { adds.Add(1) }}
	var stores []cache.Store
	var synced []cache.InformerSynced
	var starts []func(<-chan struct{})
	for _, ns := range namespaces {
		var inf cache.SharedIndexInformer
		if *mode == "metadata" {
			f := metadatainformer.NewFilteredSharedInformerFactory(metaClient, 0, ns, nil)
			inf = f.ForResource(corev1.SchemeGroupVersion.WithResource("pods")).Informer()
			starts = append(starts, f.Start)
			defer f.Shutdown()
		} else {
			f := informers.NewSharedInformerFactoryWithOptions(clientset, 0, informers.WithNamespace(ns))
			inf = f.Core().V1().Pods().Informer()
			if *mode == "informer-strip" {
				if err := inf.SetTransform(stripManagedFields); err != nil {
					return err
				}
			}
			starts = append(starts, f.Start)
			defer f.Shutdown()
		}
		reg, err := inf.AddEventHandler(handler)
		if err != nil {
			return err
		}
		stores = append(stores, inf.GetStore())
		synced = append(synced, reg.HasSynced)
	}
	// Shutdown (deferred above) waits for the informers, which stop when ctx is cancelled;
	// defers run last-in first-out, so cancel again before them.
	defer cancel()
	for _, start := range starts {
		start(ctx.Done())
	}

	deadline := time.After(*timeout)
	tick := time.NewTicker(10 * time.Millisecond)
	defer tick.Stop()
	for !allSynced(synced) {
		select {
		case <-deadline:
			return fmt.Errorf("not synced after %s (%d objects so far)", *timeout, adds.Load())
		case <-tick.C:
		}
	}
	syncSeconds := time.Since(start).Seconds()
	cpu := cpuSeconds() - cpuBase
	objects := 0
	for _, s := range stores {
		objects += len(s.ListKeys())
	}
	fmt.Fprintf(os.Stderr, "peer-clientgo: synced %d objects in %.2fs; holding %s\n", objects, syncSeconds, *hold)

	time.Sleep(*hold)
	heap := liveHeap() - heapBase
	rss := procStatusBytes("VmRSS")
	peak := procStatusBytes("VmHWM")
	perObject := func(b int64) float64 {
		if objects == 0 {
			return 0
		}
		return float64(b) / float64(objects)
	}
	line, err := json.Marshal(result{
		System:             "client-go",
		Profile:            *mode,
		Objects:            objects,
		SyncSeconds:        round(syncSeconds, 3),
		HeapBytes:          heap,
		HeapBytesPerObject: round(perObject(heap), 1),
		RSSBytes:           rss,
		RSSBaselineBytes:   rssBase,
		RSSBytesPerObject:  round(perObject(rss-rssBase), 1),
		PeakRSSBytes:       peak,
		CPUSeconds:         round(cpu, 3),
		InitialList:        initialList,
		Namespaces:         len(namespaces),
	})
	if err != nil {
		return err
	}
	fmt.Println(string(line))
	// Keep the stores reachable until after the measurement.
	runtime.KeepAlive(stores)
	return nil
}

func allSynced(synced []cache.InformerSynced) bool {
	for _, s := range synced {
		if !s() {
			return false
		}
	}
	return true
}

// stripManagedFields is the transform users set on informers to keep managedFields out of the
// cache. It also receives cache.DeletedFinalStateUnknown, which it passes through.
func stripManagedFields(obj any) (any, error) {
	if a, err := meta.Accessor(obj); err == nil {
		a.SetManagedFields(nil)
	}
	return obj, nil
}

// liveHeap is the live heap after two full collections (the second one frees what the first
// one's finalizers released).
func liveHeap() int64 {
	runtime.GC()
	runtime.GC()
	var ms runtime.MemStats
	runtime.ReadMemStats(&ms)
	return int64(ms.HeapAlloc)
}

// procStatusBytes reads a "kB" field (VmRSS, VmHWM) of /proc/self/status, in bytes.
func procStatusBytes(field string) int64 {
	data, err := os.ReadFile("/proc/self/status")
	if err != nil {
		return 0
	}
	for _, l := range strings.Split(string(data), "\n") {
		if rest, ok := strings.CutPrefix(l, field+":"); ok {
			f := strings.Fields(rest)
			if len(f) > 0 {
				if kb, err := strconv.ParseInt(f[0], 10, 64); err == nil {
					return kb * 1024
				}
			}
		}
	}
	return 0
}

// cpuSeconds is the user+sys CPU time of this process so far.
func cpuSeconds() float64 {
	var ru syscall.Rusage
	if err := syscall.Getrusage(syscall.RUSAGE_SELF, &ru); err != nil {
		return 0
	}
	tv := func(t syscall.Timeval) float64 { return float64(t.Sec) + float64(t.Usec)/1e6 }
	return tv(ru.Utime) + tv(ru.Stime)
}

func round(v float64, digits int) float64 {
	p := math.Pow10(digits)
	return math.Round(v*p) / p
}
