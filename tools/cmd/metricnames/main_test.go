// Tests of the metric-name listing: names come from selectors only, never from functions,
// keywords, label names or durations, and what cannot be checked fails.
package main

import (
	"bytes"
	"reflect"
	"strings"
	"testing"
)

func TestNamesComeFromSelectorsOnly(t *testing.T) {
	for expr, want := range map[string][]string{
		`informerd_scope_state{state="Synced"} == 0`:                         {"informerd_scope_state"},
		`increase(informerd_scope_relists_total{reason="expired"}[15m]) > 3`: {"informerd_scope_relists_total"},
		`informerd_memory_allocated_bytes / informerd_limit_max_memory_bytes > 0.9`: {
			"informerd_limit_max_memory_bytes", "informerd_memory_allocated_bytes"},
		`histogram_quantile(0.99, sum by (le, method) (rate(informerd_rpc_handling_seconds_bucket[5m])))`: {
			"informerd_rpc_handling_seconds_bucket"},
		`sum without (instance) (rate(a_total[5m] offset 1h)) and on (job) b unless ignoring (x) {__name__="c"}`: {
			"a_total", "b", "c"},
		`vector(1)`: {},
	} {
		got, err := metricNames(expr)
		if err != nil {
			t.Fatalf("%s: %v", expr, err)
		}
		if !reflect.DeepEqual(got, want) {
			t.Errorf("%s: got %v, want %v", expr, got, want)
		}
	}
}

func TestWhatCannotBeCheckedFails(t *testing.T) {
	for expr, want := range map[string]string{
		`rate(informerd_x_total[5m]`:     "does not parse",
		`{__name__=~"informerd_.*"}`:     "names no metric",
		`sum(rate(x[$__rate_interval]))`: "does not parse",
	} {
		if _, err := metricNames(expr); err == nil || !strings.Contains(err.Error(), want) {
			t.Errorf("%s: got error %v, want one saying %q", expr, err, want)
		}
	}
}

func TestRunAnswersInOrder(t *testing.T) {
	var out bytes.Buffer
	if err := run(strings.NewReader(`["up", "rate(b_total[1m])"]`), &out); err != nil {
		t.Fatal(err)
	}
	if got := strings.TrimSpace(out.String()); got != `[["up"],["b_total"]]` {
		t.Errorf("got %s", got)
	}
}
