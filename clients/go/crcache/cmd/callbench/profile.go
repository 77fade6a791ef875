package main

// Where this process's CPU went during one kind of call: each sample of the kind's CPU profile
// is put in the first category (in the order below) that one of its stack's functions belongs
// to, so that the allocations and GC assists a JSON decode causes count as the decode's, and
// protobuf decoding inside gRPC's receive path counts as protobuf, not as gRPC.

import (
	"sort"
	"strings"

	"github.com/google/pprof/profile"
)

// category is a named set of functions, matched by substrings of their full names ("^": a
// prefix).
type category struct {
	name  string
	match []string
}

var categories = []category{
	{"GC background marking", []string{"runtime.gcBgMarkWorker"}},
	{"JSON decode into unstructured", []string{"unstructured.(*Unstructured).UnmarshalJSON", "unstructured.unstructuredJSONScheme",
		"unstructured.(*unstructuredJSONScheme)"}},
	{"JSON decode into typed", []string{"^encoding/json.", "sigs.k8s.io/json.", "github.com/go-json-experiment/json", "github.com/json-iterator/"}},
	{"protobuf decode", []string{"proto.UnmarshalOptions", "(*codecV2).Unmarshal"}},
	{"protobuf encode", []string{"proto.MarshalOptions", "(*codecV2).Marshal"}},
	{"deep copies", []string{").DeepCopy"}},
	{"gRPC and HTTP/2 (their goroutines and socket I/O)", []string{"google.golang.org/grpc", "golang.org/x/net/http2"}},
	{"crcache's own work", []string{"informerd.io/clients/go/crcache."}},
	{"controller-runtime's client", []string{"sigs.k8s.io/controller-runtime/"}},
	{"the informerd client's own work", []string{"informerd.io/clients/go."}},
	{"the benchmark's loop", []string{"^main."}},
	{"Go runtime: scheduler, GC, idle", []string{"^runtime."}},
}

const otherCategory = "other"

// share is a category's (or a function's) part of the kind's CPU samples.
type share struct {
	Name  string  `json:"name"`
	Share float64 `json:"share"` // of the samples, 0..1
}

// breakdown sorts a profile's samples into the categories (in the categories' order, those
// with no sample left out) and lists the top functions by their own (flat) CPU.
func breakdown(p *profile.Profile, top int) (cats []share, funcs []share) {
	valueIdx := len(p.SampleType) - 1 // cpu nanoseconds
	byCat := map[string]int64{}
	flat := map[string]int64{}
	var total int64
	for _, s := range p.Sample {
		v := s.Value[valueIdx]
		total += v
		byCat[classify(s)] += v
		if len(s.Location) > 0 && len(s.Location[0].Line) > 0 {
			flat[s.Location[0].Line[0].Function.Name] += v
		}
	}
	if total == 0 {
		return nil, nil
	}
	for _, c := range append(categories, category{name: otherCategory}) {
		if v := byCat[c.name]; v > 0 {
			cats = append(cats, share{c.name, float64(v) / float64(total)})
		}
	}
	for name, v := range flat {
		funcs = append(funcs, share{shortName(name), float64(v) / float64(total)})
	}
	sort.Slice(funcs, func(i, j int) bool {
		if funcs[i].Share != funcs[j].Share {
			return funcs[i].Share > funcs[j].Share
		}
		return funcs[i].Name < funcs[j].Name
	})
	if len(funcs) > top {
		funcs = funcs[:top]
	}
	return cats, funcs
}

// classify is the first category any function of the sample's stack belongs to.
func classify(s *profile.Sample) string {
	var names []string
	for _, loc := range s.Location {
		for _, l := range loc.Line {
			names = append(names, l.Function.Name)
		}
	}
	for _, c := range categories {
		for _, n := range names {
			for _, m := range c.match {
				if matches(n, m) {
					return c.name
				}
			}
		}
	}
	return otherCategory
}

// matches reports whether a function's name holds m, or, for m starting with "^", starts with
// the rest of m.
func matches(name, m string) bool {
	if rest, ok := strings.CutPrefix(m, "^"); ok {
		return strings.HasPrefix(name, rest)
	}
	return strings.Contains(name, m)
}

// shortName drops a function's import path up to its package: "json.(*decodeState).object".
func shortName(name string) string {
	if i := strings.LastIndexByte(name, '/'); i >= 0 {
		return name[i+1:]
	}
	return name
}
