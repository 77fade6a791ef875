package main

// The churn under a dying API server (as the chaos suite kills kube-apiserver under it): the
// seeder's connections go through a TCP proxy that the test cuts and brings back.

import (
	"fmt"
	"io"
	"net"
	"path/filepath"
	"sync"
	"testing"
	"time"

	"k8s.io/client-go/tools/clientcmd"
)

// cuttable is a TCP proxy to an address that can refuse and cut every connection, then
// listen again on the same port.
type cuttable struct {
	upstream, addr string

	mu    sync.Mutex
	ln    net.Listener
	conns map[net.Conn]struct{}
}

func newCuttable(t *testing.T, upstream string) *cuttable {
	t.Helper()
	p := &cuttable{upstream: upstream, addr: "127.0.0.1:0", conns: map[net.Conn]struct{}{}}
	if err := p.up(); err != nil {
		t.Fatal(err)
	}
	p.addr = p.ln.Addr().String()
	t.Cleanup(p.cut)
	return p
}

// up listens (again) and serves connections until cut.
func (p *cuttable) up() error {
	ln, err := net.Listen("tcp", p.addr)
	if err != nil {
		return fmt.Errorf("proxy listen on %s: %w", p.addr, err)
	}
	p.mu.Lock()
	p.ln = ln
	p.mu.Unlock()
	go func() {
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			go p.serve(c)
		}
	}()
	return nil
}

func (p *cuttable) serve(c net.Conn) {
	u, err := net.Dial("tcp", p.upstream)
	if err != nil {
		c.Close()
		return
	}
	p.mu.Lock()
	p.conns[c], p.conns[u] = struct{}{}, struct{}{}
	p.mu.Unlock()
	go func() { _, _ = io.Copy(u, c); u.Close() }()
	_, _ = io.Copy(c, u)
	c.Close()
}

// cut closes the listener (new connections are refused) and every open connection.
func (p *cuttable) cut() {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.ln != nil {
		p.ln.Close()
		p.ln = nil
	}
	for c := range p.conns {
		c.Close()
	}
	clear(p.conns)
}

// proxiedKubeconfig writes a copy of kubeconfig whose API server is reached through a proxy,
// and returns its path and the proxy. The server certificate names 127.0.0.1, whatever the port.
func proxiedKubeconfig(t *testing.T, kubeconfig string) (string, *cuttable) {
	t.Helper()
	cfg, err := clientcmd.LoadFromFile(kubeconfig)
	if err != nil {
		t.Fatal(err)
	}
	var p *cuttable
	for _, cluster := range cfg.Clusters {
		host, port, err := net.SplitHostPort(cluster.Server[len("https://"):])
		if err != nil {
			t.Fatalf("server %s: %v", cluster.Server, err)
		}
		if p == nil {
			p = newCuttable(t, net.JoinHostPort(host, port))
		}
		cluster.Server = "https://" + p.addr
	}
	path := filepath.Join(t.TempDir(), "kubeconfig")
	if err := clientcmd.WriteToFile(*cfg, path); err != nil {
		t.Fatal(err)
	}
	return path, p
}

// TestChurnOutlivesTheAPIServer: churn through an API server that goes away in the middle of
// the run and comes back goes on and finishes without an error, doing operations after it is
// back; one that goes away until the end counts the operations it gave up on as failed, and
// still ends without an error on time.
func TestChurnOutlivesTheAPIServer(t *testing.T) {
	prefix, flags, ctx := clusterTest(t, "seedchurn")
	if err := runPods(ctx, append(flags, "--pods", "30", "--namespaces", "1")); err != nil {
		t.Fatalf("seed pods: %v", err)
	}
	kubeconfig, proxy := proxiedKubeconfig(t, flags[1])
	common := commonFlags{kubeconfig: kubeconfig, prefix: prefix, connections: 2, timeout: 5 * time.Second}
	clients, _, err := newClients(&common)
	if err != nil {
		t.Fatal(err)
	}
	churn := func(t *testing.T, d time.Duration, outage func(ch *churner)) *churner {
		ch := newChurner(clients, 5, 3)
		if err := ch.list(ctx, []string{prefix + "-0"}, 1); err != nil {
			t.Fatal(err)
		}
		go outage(ch)
		start := time.Now()
		if err := ch.run(ctx, 20, d, 4); err != nil {
			t.Fatalf("churn ended with an error after %s: %v", time.Since(start).Round(time.Second), err)
		}
		return ch
	}
	total := func(ch *churner) (n int64) {
		for i := range ch.counts {
			n += ch.counts[i].Load()
		}
		return n
	}

	t.Run("away and back", func(t *testing.T) {
		var atReturn int64
		back := make(chan error, 1)
		ch := churn(t, 9*time.Second, func(ch *churner) {
			time.Sleep(2 * time.Second)
			proxy.cut()
			time.Sleep(3 * time.Second)
			atReturn = total(ch)
			back <- proxy.up()
		})
		if err := <-back; err != nil {
			t.Fatal(err)
		}
		if after := total(ch) - atReturn; after == 0 {
			t.Errorf("no operation done after the API server came back (%d before)", atReturn)
		}
	})

	t.Run("away until the end", func(t *testing.T) {
		ch := churn(t, 4*time.Second, func(*churner) {
			time.Sleep(time.Second)
			proxy.cut()
		})
		if ch.failed.Load() == 0 {
			t.Errorf("the API server was gone for the last 3 s and no operation is counted as failed (%d done)", total(ch))
		}
	})
}
