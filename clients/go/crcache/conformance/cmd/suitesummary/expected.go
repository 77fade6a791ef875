package main

// The specs crcache's README lists as not passing, read from a file of lines
//
//	fails: SPEC NAME        (by design: it must fail; if it passes, the list is out of date)
//	may fail: SPEC NAME     (a race the spec runs into on some runs)
//
// A name written `* END` stands for every spec whose name ends with END (one spec's body run in
// several containers and shapes).
// so that a run fails only for a spec nobody has explained, or for a list that no longer
// tells the truth. '#' starts a comment line.

import (
	"bufio"
	"fmt"
	"os"
	"strings"
)

// expectation is how a listed spec may end.
type expectation int

const (
	mustFail expectation = iota + 1
	mayFail
)

func readExpected(path string) (map[string]expectation, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	out := map[string]expectation{}
	sc := bufio.NewScanner(f)
	for n := 1; sc.Scan(); n++ {
		line := strings.TrimSpace(sc.Text())
		switch {
		case line == "" || strings.HasPrefix(line, "#"):
		case strings.HasPrefix(line, "fails: "):
			out[strings.TrimPrefix(line, "fails: ")] = mustFail
		case strings.HasPrefix(line, "may fail: "):
			out[strings.TrimPrefix(line, "may fail: ")] = mayFail
		default:
			return nil, fmt.Errorf("%s:%d: write `fails: SPEC NAME` or `may fail: SPEC NAME`, not %q", path, n, line)
		}
	}
	return out, sc.Err()
}

// unexplained are the specs whose outcome the list does not account for: failed and not
// listed, or listed as failing by design and passed (or not run at all).
func unexplained(specs []spec, expected map[string]expectation) []string {
	var out []string
	seen := map[string]bool{}
	for _, s := range specs {
		if s.suiteNode {
			continue
		}
		seen[s.name] = true
		switch e := expectationOf(expected, s.name); {
		case s.state == "passed" && e == mustFail:
			out = append(out, s.name+": passes, but is listed as failing by design; remove it from the list")
		case s.state != "passed" && e == 0:
			out = append(out, s.name+": "+s.state+", and not listed")
		}
	}
	for name, e := range expected {
		if e == mustFail && !strings.HasPrefix(name, "* ") && !seen[name] {
			out = append(out, name+": listed, but no such spec ran")
		}
	}
	return out
}

// expectationOf is how the list expects spec name to end: by its name, or by a `* END` entry.
func expectationOf(expected map[string]expectation, name string) expectation {
	if e, ok := expected[name]; ok {
		return e
	}
	for pattern, e := range expected {
		if end, ok := strings.CutPrefix(pattern, "* "); ok && strings.HasSuffix(name, end) {
			return e
		}
	}
	return 0
}
