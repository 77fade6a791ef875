package main

// One pod count: one sidecar, then k controller processes at once per controller count and
// cache, each reporting its own sample while the sidecar serves them all.

import (
	"bufio"
	"context"
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"time"
)

// bench is what a measurement needs: the API server, the binaries, where logs go.
type bench struct {
	kubeconfig string
	informerd  string   // informerd binary
	self       string   // this binary, run as `heapbench controller`
	namespaces []string // what every cache watches; empty: all namespaces
	dir        string   // logs and the sidecar's socket
	hold       time.Duration
	timeout    time.Duration // bound on any one sync; only keeps a broken run from hanging
	profiles   string        // when set, each controller writes its CPU profile here
}

// result is one pod count, controller count and cache.
type result struct {
	Pods        int            `json:"pods"`
	Controllers int            `json:"controllers"`
	Cache       string         `json:"cache"`
	Processes   []sample       `json:"processes"`
	Sidecar     *sidecarSample `json:"sidecar,omitempty"` // informerd while the k processes ran (cache informerd)
	Idle        *sidecarSample `json:"sidecar_idle,omitempty"`
}

// heap is the sum of the processes' live heaps; rss the sum of their resident sets.
func (r result) heap() (sum uint64) {
	for _, p := range r.Processes {
		sum += p.HeapLive
	}
	return sum
}

// reconciles is the sum of the processes' reconciles before their samples.
func (r result) reconciles() (sum int) {
	for _, p := range r.Processes {
		sum += p.Reconciles
	}
	return sum
}

func (r result) rss() (sum uint64) {
	for _, p := range r.Processes {
		sum += p.RSS
	}
	return sum
}

// measure runs every controller count with every cache over the pods present (want of them).
func (b *bench) measure(ctx context.Context, want int, controllers []int, caches []string) ([]result, error) {
	s, err := startSidecar(ctx, b.informerd, b.kubeconfig, b.dir, b.namespaces, b.timeout)
	if err != nil {
		return nil, err
	}
	defer s.Stop()
	idle, err := s.sample()
	if err != nil {
		return nil, err
	}
	var out []result
	for _, k := range controllers {
		for _, c := range caches {
			r, err := b.runControllers(ctx, s, k, c)
			if err != nil {
				return out, err
			}
			r.Pods = want
			for i, p := range r.Processes {
				if p.Pods != int64(want) {
					return out, fmt.Errorf("%s controller %d of %d holds %d pods, want %d", c, i+1, k, p.Pods, want)
				}
				if p.Deployments == 0 || p.Reconciles < p.Deployments {
					return out, fmt.Errorf("%s controller %d of %d ran %d reconciles over %d Deployments before its sample: "+
						"no first full pass", c, i+1, k, p.Reconciles, p.Deployments)
				}
			}
			if c == cacheInformerd {
				r.Idle = &idle
			}
			fmt.Fprintf(os.Stderr, "%d pods, %d × %s: heap %s, RSS %s, %d reconciles%s\n", want, k, c, mib(r.heap()), mib(r.rss()),
				r.reconciles(), sidecarNote(r))
			out = append(out, r)
		}
	}
	return out, nil
}

func sidecarNote(r result) string {
	if r.Sidecar == nil {
		return ""
	}
	return fmt.Sprintf("; informerd allocated %s, RSS %s", mib(r.Sidecar.Allocated), mib(r.Sidecar.RSS))
}

// runControllers starts k controller processes with cache c at once, collects their samples
// (and the sidecar's while they are connected) and stops them.
func (b *bench) runControllers(ctx context.Context, s *sidecar, k int, c string) (result, error) {
	r := result{Controllers: k, Cache: c}
	type reply struct {
		s   sample
		err error
	}
	replies := make(chan reply, k)
	var cmds []*exec.Cmd
	defer func() {
		for _, cmd := range cmds {
			_ = cmd.Process.Signal(syscall.SIGTERM)
		}
		for _, cmd := range cmds {
			_ = cmd.Wait()
		}
	}()
	for i := range k {
		args := []string{"controller", "--kubeconfig", b.kubeconfig, "--cache", c, "--socket", s.Socket,
			"--hold", b.hold.String(), "--timeout", b.timeout.String()}
		if len(b.namespaces) > 0 {
			args = append(args, "--namespaces", strings.Join(b.namespaces, ","))
		}
		if b.profiles != "" {
			args = append(args, "--cpuprofile", filepath.Join(b.profiles, fmt.Sprintf("cpu-%s-%d-%d.pprof", c, k, i)))
		}
		cmd := exec.Command(b.self, args...)
		logFile, err := os.Create(filepath.Join(b.dir, fmt.Sprintf("controller-%s-%d.log", c, i)))
		if err != nil {
			return r, err
		}
		cmd.Stderr = logFile
		stdout, err := cmd.StdoutPipe()
		if err != nil {
			return r, err
		}
		if err := cmd.Start(); err != nil {
			logFile.Close()
			return r, err
		}
		logFile.Close()
		cmds = append(cmds, cmd)
		go func() {
			line, err := bufio.NewReader(stdout).ReadBytes('\n')
			if err != nil {
				replies <- reply{err: fmt.Errorf("controller %s %d ended without a sample (log: %s): %w", c, i, logFile.Name(), err)}
				return
			}
			var got sample
			err = json.Unmarshal(line, &got)
			replies <- reply{got, err}
		}()
	}
	deadline := time.After(b.timeout + time.Minute)
	for range k {
		select {
		case rep := <-replies:
			if rep.err != nil {
				return r, rep.err
			}
			r.Processes = append(r.Processes, rep.s)
		case <-deadline:
			return r, fmt.Errorf("%d %s controllers: no sample after %s", k, c, b.timeout+time.Minute)
		case <-ctx.Done():
			return r, ctx.Err()
		}
	}
	if c == cacheInformerd {
		side, err := s.sample()
		if err != nil {
			return r, err
		}
		r.Sidecar = &side
	}
	return r, nil
}

func mib(b uint64) string { return fmt.Sprintf("%.1f MiB", float64(b)/(1<<20)) }
