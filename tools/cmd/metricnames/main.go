// Command metricnames lists the metric names PromQL expressions select, with the Prometheus
// project's own parser (the release promtool is built from, which go.mod pins), so that
// tests/monitoring.rs can check that every metric the alerting rules and the Grafana dashboard
// name is one informerd exposes.
//
// Decision: the real parser rather than a hand-written scan of identifiers: function names,
// keywords (by, without, on, ignoring, bool, offset), label names and durations are told apart
// from metric names exactly as Prometheus tells them apart, and an expression that does not
// parse is reported instead of half-read. promtool itself has no command that lists them.
//
// Usage: a JSON array of expressions on stdin; on stdout, a JSON array holding, for each
// expression, the sorted metric names it selects. An expression that does not parse, or a
// selector without a metric name, fails the command with the expression and what to fix.
package main

import (
	"encoding/json"
	"fmt"
	"io"
	"os"
	"sort"

	"github.com/prometheus/common/model"
	"github.com/prometheus/prometheus/model/labels"
	"github.com/prometheus/prometheus/promql/parser"
)

func main() {
	if err := run(os.Stdin, os.Stdout); err != nil {
		fmt.Fprintln(os.Stderr, "metricnames:", err)
		os.Exit(1)
	}
}

func run(in io.Reader, out io.Writer) error {
	var exprs []string
	if err := json.NewDecoder(in).Decode(&exprs); err != nil {
		return fmt.Errorf("stdin must be a JSON array of PromQL expressions: %w", err)
	}
	result := make([][]string, 0, len(exprs))
	for _, expr := range exprs {
		names, err := metricNames(expr)
		if err != nil {
			return err
		}
		result = append(result, names)
	}
	return json.NewEncoder(out).Encode(result)
}

// metricNames returns the sorted, distinct metric names the selectors of expr name.
func metricNames(expr string) ([]string, error) {
	p := parser.NewParser(parser.Options{})
	ast, err := p.ParseExpr(expr)
	if err != nil {
		return nil, fmt.Errorf("%q does not parse as PromQL: %w", expr, err)
	}
	seen := map[string]bool{}
	var unnamed error
	parser.Inspect(ast, func(node parser.Node, _ []parser.Node) error {
		selector, ok := node.(*parser.VectorSelector)
		if !ok {
			return nil
		}
		name := selectorName(selector)
		if name == "" && unnamed == nil {
			unnamed = fmt.Errorf("%q: the selector %s names no metric: write the metric's name "+
				"before its labels, so that it can be checked", expr, selector)
		}
		if name != "" {
			seen[name] = true
		}
		return nil
	})
	if unnamed != nil {
		return nil, unnamed
	}
	names := make([]string, 0, len(seen))
	for name := range seen {
		names = append(names, name)
	}
	sort.Strings(names)
	return names, nil
}

// selectorName is the metric name a selector names: `name{...}`, or `{__name__="name"}`.
func selectorName(s *parser.VectorSelector) string {
	if s.Name != "" {
		return s.Name
	}
	for _, m := range s.LabelMatchers {
		if m.Name == model.MetricNameLabel && m.Type == labels.MatchEqual {
			return m.Value
		}
	}
	return ""
}
