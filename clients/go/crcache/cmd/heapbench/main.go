// Command heapbench measures what a controller-runtime controller's process holds with its own
// cache against the same controller over informerd (crcache), and informerd's own memory, for
// one controller and for three controllers sharing one sidecar: issue 12's benchmark.
//
//	heapbench run        --bin DIR --informerd BIN [--pods 10000,50000] [--controllers 1,3] ...
//	heapbench controller --kubeconfig FILE --cache default|default-strip|informerd [--socket S] ...
//
// `run` (what `make bench-adapters` calls) starts a private control plane of its own
// (`cluster up` in --cluster-dir, stopped at the end), seeds the pods, and for each pod count
// starts one informerd and then, for each controller count k and each cache, k `controller`
// processes at once; each reports its heap as one JSON line, informerd's /metrics and /proc give
// the sidecar's figures. It prints a table and writes OUT.md and OUT.json (see report.go),
// keeping the rows of pod counts it does not measure; on a control plane still running in
// --cluster-dir (a run killed before its `cluster down`) it starts from the pods already there,
// so that a long run can be continued, e.g. `--pods 50000` after 10,000 were measured.
//
// `controller` runs labelctl's controller (the one compare_test.go proves equivalent under both
// caches) in a manager, waits until its caches have synced, its pod informer has delivered
// every pod and it has reconciled every Deployment once, holds a few seconds, forces two
// garbage collections, prints one JSON line (measure.go's sample) and runs until SIGINT or
// SIGTERM.
package main

import (
	"fmt"
	"os"
)

func main() {
	if len(os.Args) < 2 {
		usage()
	}
	var err error
	switch os.Args[1] {
	case "run":
		err = runMain(os.Args[2:])
	case "controller":
		err = controllerMain(os.Args[2:])
	default:
		usage()
	}
	if err != nil {
		fmt.Fprintf(os.Stderr, "heapbench %s: %v\n", os.Args[1], err)
		os.Exit(1)
	}
}

func usage() {
	fmt.Fprintln(os.Stderr, "usage: heapbench run|controller [flags]; heapbench CMD -h for flags")
	os.Exit(2)
}
