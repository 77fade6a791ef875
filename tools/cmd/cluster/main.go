// Command cluster starts, inspects and stops the project's local Kubernetes control plane:
// an embedded etcd, kube-apiserver and kube-controller-manager on 127.0.0.1, with TLS, RBAC
// and the ServiceAccount token machinery on. Everything it writes (certificates, data, logs,
// the admin kubeconfig, the pids it started) lives in one state directory.
//
//	cluster up    --dir DIR --bin BINDIR   start (or confirm running) and print the kubeconfig path
//	              [--apiserver-arg=--FLAG=VALUE ...] [--controllers LIST] [--controller-manager=false]
//	                                       extra kube-apiserver flags; the controller manager's
//	                                       controllers (for benchmarks at scale: `make bench-large`);
//	                                       or no controller manager at all, as envtest (for
//	                                       controller-runtime's own suites: `make crcache-suite`)
//	cluster down  --dir DIR                stop what `up` started, by the pids it recorded
//	cluster token --dir DIR --namespace NS --service-account SA
//	                                       create the ServiceAccount if needed, print a token for it
//
// `up` is idempotent: while the recorded processes are alive and /readyz answers, it only
// prints the kubeconfig path.
package main

import (
	"flag"
	"fmt"
	"os"
	"strings"
)

// options are what `up` may change of the control plane it starts.
type options struct {
	apiserverArgs flagList
	// etcdArgs are extra etcd flags: a benchmark of millions of objects raises the 2 GB
	// backend quota (--quota-backend-bytes), past which etcd refuses every write.
	etcdArgs    flagList
	controllers string
	// apiserverGOGC and apiserverMemoryLimit are the apiserver's GOGC and GOMEMLIMIT. Its
	// ServiceAccount token authenticator keeps an informer of every pod and node whatever the
	// flags (pkg/kubeapiserver/options/authentication.go), so the apiserver of a cluster of a
	// million pods holds them all: the NVSentinel profile (1.4 million pods) raises the limit
	// and collects at Go's default pace instead of thrashing against 8 GiB.
	apiserverGOGC        string
	apiserverMemoryLimit string
	// controllerManager false starts etcd and kube-apiserver alone, as controller-runtime's
	// envtest does: no namespace gets a default ServiceAccount (so the apiserver's
	// ServiceAccount admission plugin, which would refuse every pod, is disabled, as envtest
	// disables it) and nothing finalizes a deleted namespace or collects garbage.
	controllerManager bool
}

// flagList is a repeatable string flag.
type flagList []string

func (l *flagList) String() string { return strings.Join(*l, " ") }
func (l *flagList) Set(v string) error {
	if !strings.HasPrefix(v, "--") {
		return fmt.Errorf("%q is not a flag: give it as --FLAG=VALUE", v)
	}
	*l = append(*l, v)
	return nil
}

func usage() {
	fmt.Fprintln(os.Stderr, "usage: cluster up|down|token --dir DIR [flags]; cluster CMD -h for flags")
	os.Exit(2)
}

func main() {
	if len(os.Args) < 2 {
		usage()
	}
	fs := flag.NewFlagSet(os.Args[1], flag.ExitOnError)
	dir := fs.String("dir", ".cluster", "state directory: certificates, data, logs, kubeconfig, pids")
	var err error
	switch os.Args[1] {
	case "up":
		bin := fs.String("bin", ".cache/bin", "directory holding etcd, kube-apiserver and kube-controller-manager")
		var opts options
		fs.Var(&opts.apiserverArgs, "apiserver-arg", "an extra kube-apiserver flag, as --FLAG=VALUE (repeatable)")
		fs.Var(&opts.etcdArgs, "etcd-arg", "an extra etcd flag, as --FLAG=VALUE (repeatable)")
		fs.StringVar(&opts.apiserverGOGC, "apiserver-gogc", "400", "kube-apiserver's GOGC")
		fs.StringVar(&opts.apiserverMemoryLimit, "apiserver-memory-limit", "8GiB",
			"kube-apiserver's GOMEMLIMIT: the heap it collects to stay within")
		fs.StringVar(&opts.controllers, "controllers", defaultControllers,
			"kube-controller-manager's --controllers: the controllers it runs")
		fs.BoolVar(&opts.controllerManager, "controller-manager", true,
			"start kube-controller-manager; false: etcd and kube-apiserver alone, as envtest "+
				"(and without the ServiceAccount admission plugin, as envtest)")
		_ = fs.Parse(os.Args[2:])
		var kubeconfig string
		kubeconfig, err = up(*dir, *bin, opts)
		if err == nil {
			fmt.Println(kubeconfig)
		}
	case "down":
		_ = fs.Parse(os.Args[2:])
		err = down(*dir)
	case "token":
		ns := fs.String("namespace", "default", "namespace of the ServiceAccount")
		sa := fs.String("service-account", "", "name of the ServiceAccount (created if missing)")
		_ = fs.Parse(os.Args[2:])
		if *sa == "" {
			err = fmt.Errorf("--service-account is required")
			break
		}
		var tok string
		tok, err = token(*dir, *ns, *sa)
		if err == nil {
			fmt.Println(tok)
		}
	default:
		usage()
	}
	if err != nil {
		fmt.Fprintf(os.Stderr, "cluster %s: %v\n", os.Args[1], err)
		os.Exit(1)
	}
}
