// Command etcd runs an embedded etcd server (go.etcd.io/etcd/server/v3/embed) on loopback.
// It is the storage behind the project's local kube-apiserver; see tools/cmd/cluster.
package main

import (
	"flag"
	"log"
	"net/url"
	"os"
	"os/signal"
	"syscall"

	"go.etcd.io/etcd/server/v3/embed"
)

func main() {
	dataDir := flag.String("data-dir", "", "directory for etcd's data (required)")
	clientURL := flag.String("listen-client-url", "http://127.0.0.1:2379", "URL to serve clients on")
	peerURL := flag.String("listen-peer-url", "http://127.0.0.1:2380", "URL for peer traffic (single member, loopback only)")
	quota := flag.Int64("quota-backend-bytes", 8<<30, "the backend's size past which etcd refuses writes "+
		"(make bench-nvsentinel writes about 8 GiB and raises it)")
	retention := flag.String("auto-compaction-retention", "5m", "how much history etcd keeps "+
		"(periodic compaction): a paginated list older than this ends with 410 Expired and starts "+
		"over, so make bench-nvsentinel, whose lists of pods from etcd take longer, raises it")
	flag.Parse()
	if *dataDir == "" {
		log.Fatal("etcd: --data-dir is required")
	}

	cfg := embed.NewConfig()
	cfg.Name = "informerd-local"
	cfg.Dir = *dataDir
	cfg.LogLevel = "warn"
	// Keep the history small: the local cluster is for tests and benchmarks, not for keeping.
	cfg.AutoCompactionMode = "periodic"
	cfg.AutoCompactionRetention = *retention
	cfg.QuotaBackendBytes = *quota
	cfg.UnsafeNoFsync = true // loopback test cluster: durability is not the point, speed is
	cu, err := url.Parse(*clientURL)
	if err != nil {
		log.Fatalf("etcd: --listen-client-url: %v", err)
	}
	pu, err := url.Parse(*peerURL)
	if err != nil {
		log.Fatalf("etcd: --listen-peer-url: %v", err)
	}
	cfg.ListenClientUrls = []url.URL{*cu}
	cfg.AdvertiseClientUrls = []url.URL{*cu}
	cfg.ListenPeerUrls = []url.URL{*pu}
	cfg.AdvertisePeerUrls = []url.URL{*pu}
	cfg.InitialCluster = cfg.Name + "=" + pu.String()

	e, err := embed.StartEtcd(cfg)
	if err != nil {
		log.Fatalf("etcd: start: %v", err)
	}
	<-e.Server.ReadyNotify()
	log.Printf("etcd: serving clients on %s", cu)

	sig := make(chan os.Signal, 1)
	signal.Notify(sig, syscall.SIGTERM, syscall.SIGINT)
	select {
	case s := <-sig:
		log.Printf("etcd: %v, stopping", s)
		e.Close()
	case err := <-e.Err():
		log.Fatalf("etcd: %v", err)
	}
}
