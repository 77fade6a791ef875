package main

// `heapbench run`: a private control plane, seeded step by step to each pod count.

import (
	"context"
	"flag"
	"fmt"
	"os"
	"os/exec"
	"os/signal"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"syscall"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/client-go/metadata"
	"k8s.io/client-go/tools/clientcmd"
)

type runFlags struct {
	bin, informerd, clusterDir, out string
	kubers                          string // the kube-rs benchmark's command line; "" skips it
	pods, controllers               []int
	caches                          []string
	namespaces                      int
	hold, timeout                   time.Duration
	keep                            bool
	profiles                        string
}

func runMain(args []string) error {
	var f runFlags
	var pods, controllers, caches string
	fs := flag.NewFlagSet("run", flag.ContinueOnError)
	fs.StringVar(&f.bin, "bin", ".cache/bin", "directory holding cluster, seed, etcd, kube-apiserver, kube-controller-manager")
	fs.StringVar(&f.informerd, "informerd", "", "the informerd binary (a release build: its memory is measured)")
	fs.StringVar(&f.clusterDir, "cluster-dir", ".cache/bench-adapters", "state directory of the private control plane (started and stopped here)")
	fs.StringVar(&f.out, "out", "benches/results/adapters", "results: OUT.md and OUT.json, rewritten after each pod count")
	fs.StringVar(&pods, "pods", "10000,50000", "pod counts, run in increasing order")
	fs.StringVar(&controllers, "controllers", "1,3", "controller processes sharing one sidecar")
	fs.StringVar(&caches, "caches", "default,default-strip,informerd", "the caches compared")
	fs.IntVar(&f.namespaces, "namespaces", 10, "namespaces each seeding step spreads its pods over")
	fs.DurationVar(&f.hold, "hold", 5*time.Second, "how long each controller runs after its first full reconcile pass before it measures")
	fs.DurationVar(&f.timeout, "timeout", 10*time.Minute, "bound on any one sync")
	fs.StringVar(&f.kubers, "kube-rs", "", "a shell command running clients/rust's controller_store benchmark "+
		"(e.g. `cargo bench -p informerd-client --bench controller_store`), run over the same pods after each pod count; empty: skipped")
	fs.BoolVar(&f.keep, "keep-cluster", false, "leave the control plane running at the end (`cluster down --dir` stops it), "+
		"e.g. for clients/rust's controller_store benchmark over the same pods")
	fs.StringVar(&f.profiles, "cpuprofile-dir", "", "write each controller process's CPU profile (from its start to its sample) to DIR/cpu-CACHE-K-I.pprof")
	if err := fs.Parse(args); err != nil {
		return err
	}
	var err error
	if f.pods, err = ints(pods); err != nil {
		return fmt.Errorf("--pods: %w", err)
	}
	if !slices.IsSorted(f.pods) {
		return fmt.Errorf("--pods %s: give them in increasing order (pods are only added)", pods)
	}
	if f.controllers, err = ints(controllers); err != nil {
		return fmt.Errorf("--controllers: %w", err)
	}
	f.caches = strings.Split(caches, ",")
	if f.informerd == "" {
		return fmt.Errorf("--informerd is required: the informerd binary, e.g. target/release/informerd")
	}
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	return run(ctx, f)
}

func run(ctx context.Context, f runFlags) error {
	self, err := os.Executable()
	if err != nil {
		return err
	}
	clusterDir, err := filepath.Abs(f.clusterDir)
	if err != nil {
		return err
	}
	up := exec.CommandContext(ctx, filepath.Join(f.bin, "cluster"), "up", "--dir", clusterDir, "--bin", f.bin)
	up.Stderr = os.Stderr
	kc, err := up.Output()
	if err != nil {
		return fmt.Errorf("cluster up: %w", err)
	}
	lines := strings.Split(strings.TrimSpace(string(kc)), "\n")
	kubeconfig := lines[len(lines)-1]
	defer func() {
		if f.keep {
			fmt.Fprintf(os.Stderr, "the control plane is still running (kubeconfig %s): stop it with `cluster down --dir %s`\n",
				kubeconfig, clusterDir)
			return
		}
		down := exec.Command(filepath.Join(f.bin, "cluster"), "down", "--dir", clusterDir)
		down.Stdout, down.Stderr = os.Stderr, os.Stderr
		_ = down.Run()
	}()
	b := &bench{kubeconfig: kubeconfig, informerd: f.informerd, self: self,
		dir: filepath.Join(clusterDir, "heapbench"), hold: f.hold, timeout: f.timeout, profiles: f.profiles}
	if err := os.MkdirAll(b.dir, 0o755); err != nil {
		return err
	}
	// Rows of other pod counts from an earlier run stay in the results.
	all, err := earlierResults(f.out, f.pods)
	if err != nil {
		return err
	}
	var kubersReplaced []int
	if f.kubers != "" {
		kubersReplaced = f.pods
	}
	kubers, err := kubersResults(f.out, kubersReplaced)
	if err != nil {
		return err
	}
	// A control plane still running in --cluster-dir (an interrupted run's) keeps its pods.
	have, err := countPods(ctx, b.kubeconfig)
	if err != nil {
		return err
	}
	for _, n := range f.pods {
		if n > have {
			if err := seed(ctx, f, b.kubeconfig, n-have, fmt.Sprintf("adapters-%d", n)); err != nil {
				return err
			}
		}
		if have, err = countPods(ctx, b.kubeconfig); err != nil {
			return err
		}
		if have != n {
			return fmt.Errorf("the cluster holds %d pods after seeding, want %d", have, n)
		}
		rs, err := b.measure(ctx, n, f.controllers, f.caches)
		all = append(all, rs...)
		if werr := writeResults(f.out, all, kubers); werr != nil {
			return werr
		}
		if err != nil {
			return err
		}
		if f.kubers != "" {
			kr, err := runKubers(ctx, f.kubers, clusterDir, b.dir, n)
			if err != nil {
				return err
			}
			kubers = append(kubers, kr)
			if err := writeResults(f.out, all, kubers); err != nil {
				return err
			}
		}
	}
	fmt.Print(table(all) + "\n" + passTable(all) + "\n" + kubersTable(kubers))
	return nil
}

// seed adds pods in the namespaces PREFIX-0.. with the project's seeder (Deployments with
// their ReplicaSets, DaemonSets, StatefulSets and Jobs own them). Each step gets a prefix of its
// own, so that the pods of the steps add up: the controllers watch all namespaces.
func seed(ctx context.Context, f runFlags, kubeconfig string, pods int, prefix string) error {
	cmd := exec.CommandContext(ctx, filepath.Join(f.bin, "seed"), "pods", "--kubeconfig", kubeconfig,
		"--pods", strconv.Itoa(pods), "--namespaces", strconv.Itoa(f.namespaces), "--prefix", prefix)
	cmd.Stdout, cmd.Stderr = os.Stderr, os.Stderr
	if err := cmd.Run(); err != nil {
		return fmt.Errorf("seed %d pods into %s-*: %w", pods, prefix, err)
	}
	return nil
}

// countPods counts the cluster's pods, paging through their metadata.
func countPods(ctx context.Context, kubeconfig string) (int, error) {
	cfg, err := clientcmd.BuildConfigFromFlags("", kubeconfig)
	if err != nil {
		return 0, err
	}
	mc, err := metadata.NewForConfig(cfg)
	if err != nil {
		return 0, err
	}
	pods := mc.Resource(schema.GroupVersionResource{Version: "v1", Resource: "pods"})
	n, cont := 0, ""
	for {
		l, err := pods.List(ctx, metav1.ListOptions{Limit: 5000, Continue: cont})
		if err != nil {
			return 0, err
		}
		n += len(l.Items)
		if cont = l.Continue; cont == "" {
			return n, nil
		}
	}
}

func ints(s string) ([]int, error) {
	var out []int
	for _, p := range strings.Split(s, ",") {
		n, err := strconv.Atoi(strings.TrimSpace(p))
		if err != nil || n <= 0 {
			return nil, fmt.Errorf("%q is not a positive number", p)
		}
		out = append(out, n)
	}
	return out, nil
}
