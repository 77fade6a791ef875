package main

import (
	"bytes"
	"strings"
	"testing"
)

func TestReasonIsTheErrorAnExpectationNames(t *testing.T) {
	msg := "Unexpected error:\n    <*errors.errorString | 0xc000123>: \n    crcache: no such option\n    {\n        s: \"crcache: no such option\",\n    }\noccurred"
	if got := reasonOf(msg, "cache_test.go:1"); got != "crcache: no such option" {
		t.Errorf("reasonOf = %q", got)
	}
}

func TestReasonWithoutAnErrorSaysWhere(t *testing.T) {
	got := reasonOf("Timed out after 1.001s.\nExpected\n    <*v1.Pod | 0xc0001>: {", "cache_test.go:1991")
	want := "Timed out after 1s. Expected <*v1.Pod | 0x>: { (cache_test.go:1991)"
	if got != want {
		t.Errorf("reasonOf = %q, want %q", got, want)
	}
}

func TestPlainTestsAreCountedBySubtestAndTestSourceByItsReport(t *testing.T) {
	run := strings.Join([]string{
		`{"Action":"run","Test":"TestSource"}`,
		`{"Action":"fail","Test":"TestSource"}`,
		`{"Action":"run","Test":"TestA"}`,
		`{"Action":"run","Test":"TestA/one"}`,
		`{"Action":"output","Test":"TestA/one","Output":"    cache_test.go:12: \n"}`,
		`{"Action":"output","Test":"TestA/one","Output":"        Expected\n"}`,
		`{"Action":"output","Test":"TestA/one","Output":"            <bool>: false\n"}`,
		`{"Action":"output","Test":"TestA/one","Output":"        to be true\n"}`,
		`{"Action":"fail","Test":"TestA/one"}`,
		`{"Action":"fail","Test":"TestA"}`,
		`{"Action":"run","Test":"TestB"}`,
		`{"Action":"pass","Test":"TestB"}`,
	}, "\n")
	specs, err := readPlainTests(strings.NewReader(run), &bytes.Buffer{})
	if err != nil {
		t.Fatal(err)
	}
	if len(specs) != 2 || specs[0].name != "TestA/one" || specs[0].state != "failed" || specs[1].state != "passed" {
		t.Fatalf("specs = %+v", specs)
	}
	if want := "Expected <bool>: false to be true (cache_test.go:12)"; specs[0].reason != want {
		t.Errorf("reason = %q, want %q", specs[0].reason, want)
	}
	var out bytes.Buffer
	if summarize(&out, specs) {
		t.Error("summarize: true with a failed spec")
	}
	if !strings.Contains(out.String(), "crcache suite: 2 specs, 1 passed, 1 failed") {
		t.Errorf("summary:\n%s", out.String())
	}
}

func TestOnlyUnlistedOutcomesFailTheRun(t *testing.T) {
	specs := []spec{
		{name: "a", state: "failed"},
		{name: "b", state: "passed"},
		{name: "c", state: "failed"},
		{name: "d", state: "passed"},
		{name: "e", state: "failed"},
		{name: "X reads at once", state: "failed"},
	}
	expected := map[string]expectation{"a": mustFail, "b": mustFail, "c": mayFail, "d": mayFail, "gone": mustFail, "* reads at once": mayFail}
	got := unexplained(specs, expected)
	want := []string{
		"b: passes, but is listed as failing by design; remove it from the list",
		"e: failed, and not listed",
		"gone: listed, but no such spec ran",
	}
	if strings.Join(got, "\n") != strings.Join(want, "\n") {
		t.Errorf("unexplained:\n%s\nwant:\n%s", strings.Join(got, "\n"), strings.Join(want, "\n"))
	}
}
