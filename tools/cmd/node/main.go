// Command node adds real nodes to the control plane that `cluster up` started: on each, a
// kubelet, containerd, runc, the CNI bridge plugins and kube-proxy; beside them, one
// kube-scheduler and a kube-controller-manager running the controllers that Deployments and
// DaemonSets need (the control plane's own runs only those a cache needs).
//
//	node up    --cluster-dir DIR --dir DIR --bin BINDIR [--nodes N] [--image TAR ...]
//	           [--prefix NAME] [--controllers=false]
//	           start (or confirm running) N nodes; the images (`docker save` archives) are
//	           imported into each node's containerd, as the CRI names them
//	node down  --dir DIR      stop what `up` started, by the pids it recorded; remove its cgroups
//	node image --binary FILE --name NAME:TAG --out TAR [--user UID:GID] [--entrypoint PATH]
//	           a `docker save` archive of an image holding one static binary (the pause image,
//	           the demo controller)
//
// Each node is a process tree in namespaces of its own (mount, PID, network): /run, /var/lib
// and /var/log are the node's own directories there, the kernel settings the kubelet rewrites
// are bind-mounted copies, and the pods' bridge, veths and iptables rules (the bridge plugin's,
// kube-proxy's) live in the node's network namespace. When the tree stops, the kernel drops the
// namespaces with all they hold; what remains is the kubelet's cgroups, which the node's
// supervisor removes. So the host is left as it was. While a node runs, the host has one veth
// (infd-S, 10.246.S.1/30 for a free slot S) to it: the apiserver reaches the kubelet at the node's address
// (logs, exec). The node reaches the apiserver, which listens on the host's loopback only,
// through a forwarder: a Unix socket on the host, served inside the node on the apiserver's port
// at 127.0.0.1 (the kubelet, kube-proxy) and at APIAddress, the `kubernetes` Service's endpoint
// (the pods, with in-cluster configuration).
package main

import (
	"flag"
	"fmt"
	"os"
	"strings"
)

type flagList []string

func (l *flagList) String() string     { return strings.Join(*l, ",") }
func (l *flagList) Set(v string) error { *l = append(*l, v); return nil }

func usage() {
	fmt.Fprintln(os.Stderr, "usage: node up|down|image [flags]; node CMD -h for flags")
	os.Exit(2)
}

func main() {
	if len(os.Args) < 2 {
		usage()
	}
	fs := flag.NewFlagSet(os.Args[1], flag.ExitOnError)
	var err error
	switch os.Args[1] {
	case "up":
		var o upOptions
		fs.StringVar(&o.clusterDir, "cluster-dir", ".cluster", "the state directory of `cluster up`")
		fs.StringVar(&o.dir, "dir", "", "the nodes' state directory (default: CLUSTER-DIR/nodes)")
		fs.StringVar(&o.bin, "bin", ".cache/bin", "directory holding kubelet, containerd, runc, the CNI plugins ...")
		fs.IntVar(&o.nodes, "nodes", 1, "how many nodes")
		fs.StringVar(&o.prefix, "prefix", "informerd-node", "the nodes' names: PREFIX-1 ... PREFIX-N")
		fs.BoolVar(&o.controllers, "controllers", true, "also start kube-scheduler and the controllers pods need (once per control plane)")
		fs.Var(&o.images, "image", "a `docker save` archive to import into every node (repeatable)")
		_ = fs.Parse(os.Args[2:])
		if o.dir == "" {
			o.dir = o.clusterDir + "/nodes"
		}
		err = up(o)
	case "down":
		dir := fs.String("dir", ".cluster/nodes", "the nodes' state directory")
		_ = fs.Parse(os.Args[2:])
		err = down(*dir)
	case "image":
		var o imageOptions
		fs.StringVar(&o.binary, "binary", "", "the static binary")
		fs.StringVar(&o.name, "name", "", "the image's NAME:TAG")
		fs.StringVar(&o.out, "out", "", "the archive to write")
		fs.StringVar(&o.user, "user", "65532:65532", "the image's user")
		fs.StringVar(&o.entrypoint, "entrypoint", "", "where the binary goes, and the entrypoint (default: /NAME of the binary)")
		_ = fs.Parse(os.Args[2:])
		err = writeImage(o)
	case "supervise":
		// Internal: one node's host-side process (see supervise.go).
		err = supervise(os.Args[2])
	case "init":
		// Internal: PID 1 of one node's namespaces (see init.go).
		err = nodeInit(os.Args[2])
	default:
		usage()
	}
	if err != nil {
		fmt.Fprintf(os.Stderr, "node %s: %v\n", os.Args[1], err)
		os.Exit(1)
	}
}
