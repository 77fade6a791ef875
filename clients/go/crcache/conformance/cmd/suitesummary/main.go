// Command suitesummary reads the conformance suite's run (`go test -json` on stdin) and its
// Ginkgo JSON report, passes the run's output through (to stdout and --log), and ends with the
// failing specs grouped by reason and one line:
//
//	crcache suite: N specs, P passed, F failed
//
// A spec is each Ginkgo It (TestSource) and each plain test without subtests, or subtest
// (TestReaderWaitsForCacheSync's two, TestIndexFieldDoesNotBlock). Its reason is the error a
// failed expectation reports, or, for an expectation without one, its first lines and the
// line of the vendored file that made it. The exit status is 1 when a spec failed or did not
// run, or when the run produced no report (the harness failed: its output says why).
package main

import (
	"bufio"
	"encoding/json"
	"flag"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"regexp"
	"sort"
	"strings"

	"github.com/onsi/ginkgo/v2/types"
)

// event is one line of `go test -json` (cmd/test2json).
type event struct {
	Action string
	Test   string
	Output string
}

// spec is one spec's outcome; reason is empty when it passed. where is the line of the
// vendored file that failed; it is part of the reason when the message alone does not say what
// failed (an expectation on a bool), and shown beside each spec's name otherwise.
type spec struct {
	name, state, reason, where string
	// suiteNode: BeforeSuite, AfterSuite or a report node, not a spec; a failure there is
	// listed with the specs' and fails the run, but is not counted as a spec.
	suiteNode bool
}

func main() {
	reportPath := flag.String("ginkgo-report", "", "the Ginkgo JSON report the run wrote (-ginkgo.json-report)")
	logPath := flag.String("log", "", "a file to copy the run's output to")
	expectedPath := flag.String("expected", "", "the specs known not to pass (see expected.go); then only the others fail the run")
	flag.Parse()

	out := io.Writer(os.Stdout)
	if *logPath != "" {
		f, err := os.Create(*logPath)
		if err != nil {
			fatal(err)
		}
		defer f.Close()
		out = io.MultiWriter(os.Stdout, f)
	}
	plain, err := readPlainTests(os.Stdin, out)
	if err != nil {
		fatal(err)
	}
	var specs []spec
	if *reportPath != "" {
		ginkgo, err := readGinkgoReport(*reportPath)
		if err != nil {
			fmt.Fprintf(out, "crcache suite: no Ginkgo report (%v): the suite did not run to its end; see the output above\n", err)
			os.Exit(1)
		}
		specs = append(specs, ginkgo...)
	}
	specs = append(specs, plain...)
	ok := summarize(out, specs)
	if *expectedPath != "" {
		expected, err := readExpected(*expectedPath)
		if err != nil {
			fatal(err)
		}
		wrong := unexplained(specs, expected)
		for _, w := range wrong {
			fmt.Fprintln(out, suiteName()+": "+w)
		}
		if len(wrong) == 0 {
			fmt.Fprintf(out, "%s: every spec that did not pass is listed in %s\n", suiteName(), *expectedPath)
		}
		ok = len(wrong) == 0 && !suiteFailedIn(specs)
	}
	if !ok {
		os.Exit(1)
	}
}

// suiteFailedIn reports whether a suite node (BeforeSuite, AfterSuite) failed.
func suiteFailedIn(specs []spec) bool {
	for _, s := range specs {
		if s.suiteNode {
			return true
		}
	}
	return false
}

func fatal(err error) {
	fmt.Fprintln(os.Stderr, "suitesummary:", err)
	os.Exit(2)
}

// readPlainTests copies the run's output to out and returns the outcome of each plain test
// (TestSource, the Ginkgo suite, is counted from its report).
func readPlainTests(r io.Reader, out io.Writer) ([]spec, error) {
	outputs := map[string][]string{}
	results := map[string]string{}
	parents := map[string]bool{}
	var order []string
	sc := bufio.NewScanner(r)
	sc.Buffer(make([]byte, 1<<20), 1<<24)
	for sc.Scan() {
		var ev event
		if err := json.Unmarshal(sc.Bytes(), &ev); err != nil || ev.Action == "" {
			// Not test2json (the build failed, or the go command says something): as it is.
			fmt.Fprintln(out, sc.Text())
			continue
		}
		if ev.Action == "output" {
			fmt.Fprint(out, ev.Output)
		}
		if ev.Test == "" || ev.Test == "TestSource" || strings.HasPrefix(ev.Test, "TestSource/") {
			continue
		}
		if i := strings.LastIndex(ev.Test, "/"); i > 0 {
			parents[ev.Test[:i]] = true
		}
		switch ev.Action {
		case "run":
			order = append(order, ev.Test)
		case "output":
			outputs[ev.Test] = append(outputs[ev.Test], ev.Output)
		case "pass", "fail", "skip":
			results[ev.Test] = ev.Action
		}
	}
	if err := sc.Err(); err != nil {
		return nil, err
	}
	var specs []spec
	for _, name := range order {
		if parents[name] {
			continue
		}
		s := spec{name: name, state: results[name]}
		switch s.state {
		case "pass":
			s.state = "passed"
		case "":
			s.state, s.reason = "did not finish", "the test binary ended before this test did"
		default:
			s.state = "failed"
			message, where := plainFailure(outputs[name])
			s.reason, s.where = reasonOf(message, where), where
		}
		specs = append(specs, s)
	}
	return specs, nil
}

var testFileLine = regexp.MustCompile(`^\s*(\S+_test\.go:\d+): ?(.*)$`)

// plainFailure is a failed test's first report (t.Error, t.Fatal, a failed gomega
// assertion) and the line that made it.
func plainFailure(lines []string) (message, where string) {
	text := strings.Split(strings.Join(lines, ""), "\n")
	for i, l := range text {
		m := testFileLine.FindStringSubmatch(l)
		if m == nil {
			continue
		}
		var msg []string
		if strings.TrimSpace(m[2]) != "" {
			msg = append(msg, strings.TrimSpace(m[2]))
		}
		for _, more := range text[i+1:] {
			if testFileLine.MatchString(more) || strings.HasPrefix(strings.TrimSpace(more), "---") {
				break
			}
			msg = append(msg, strings.TrimSpace(more))
		}
		return strings.Join(msg, "\n"), m[1]
	}
	return "failed without a message", ""
}

func readGinkgoReport(path string) ([]spec, error) {
	b, err := os.ReadFile(path)
	if err != nil {
		return nil, err
	}
	var reports []types.Report
	if err := json.Unmarshal(b, &reports); err != nil {
		return nil, fmt.Errorf("%s: %w", path, err)
	}
	var specs []spec
	for _, r := range reports {
		for _, sr := range r.SpecReports {
			if sr.LeafNodeType != types.NodeTypeIt {
				// BeforeSuite, AfterSuite and the report nodes: a failure there is every spec's.
				if sr.State.Is(types.SpecStateFailureStates) {
					reason, where := ginkgoReason(sr)
					specs = append(specs, spec{name: "[" + sr.LeafNodeType.String() + "]", state: "failed",
						reason: reason, where: where, suiteNode: true})
				}
				continue
			}
			s := spec{name: sr.FullText(), state: sr.State.String()}
			switch {
			case sr.State == types.SpecStatePassed:
			case sr.State.Is(types.SpecStateFailureStates):
				s.state = "failed"
				s.reason, s.where = ginkgoReason(sr)
			default: // skipped, pending: not run
				s.reason = "not run (" + sr.State.String() + ")"
			}
			specs = append(specs, s)
		}
	}
	return specs, nil
}

var (
	pointer = regexp.MustCompile(`0x[0-9a-f]+`)
	// Eventually's "Timed out after 1.001s.": the same reason as after 1.000s.
	timedOut = regexp.MustCompile(`^Timed out after (\d+)\.\d+s\.`)
	// A failed Expect(err) names the error on the line after its type: "<*T | 0x...>: ".
	errorHeader = regexp.MustCompile(`^(Unexpected error:|Expected success, but got an error:)$`)
)

// ginkgoReason is the error an expectation reports, or its first lines and where it is.
func ginkgoReason(sr types.SpecReport) (reason, where string) {
	f := sr.Failure
	where = fmt.Sprintf("%s:%d", filepath.Base(f.Location.FileName), f.Location.LineNumber)
	if f.FailureNodeType != types.NodeTypeIt && f.FailureNodeType != types.NodeTypeInvalid {
		where += ", in " + f.FailureNodeType.String()
	}
	return reasonOf(f.Message, where), where
}

// reasonOf is the error a failed expectation names, or else the message's first lines and
// where it failed.
func reasonOf(message, where string) string {
	lines := strings.Split(strings.TrimSpace(message), "\n")
	if len(lines) > 2 && errorHeader.MatchString(strings.TrimSpace(lines[0])) {
		for _, l := range lines[2:] {
			if l = strings.TrimSpace(l); l != "" {
				return l
			}
		}
	}
	lines[0] = timedOut.ReplaceAllString(lines[0], "Timed out after ${1}s.")
	if len(lines) > 4 {
		lines = lines[:4]
	}
	return oneLine(pointer.ReplaceAllString(strings.Join(lines, "\n"), "0x")) + " (" + where + ")"
}

// suiteName says which cache ran: crcache, or controller-runtime's own in the harness's
// baseline (CRCACHE_SUITE_BASELINE).
func suiteName() string {
	if os.Getenv("CRCACHE_SUITE_BASELINE") != "" {
		return "crcache suite (baseline: controller-runtime's own cache)"
	}
	return "crcache suite"
}

func oneLine(s string) string {
	s = strings.Join(strings.Fields(s), " ")
	if len(s) > 240 {
		s = s[:240] + "..."
	}
	return s
}

// summarize prints the failing specs by reason and the summary line; true when all passed.
func summarize(out io.Writer, specs []spec) bool {
	byReason := map[string][]spec{}
	passed, failed, notRun, count, suiteFailed := 0, 0, 0, 0, false
	for _, s := range specs {
		if s.suiteNode {
			suiteFailed = true
			byReason[s.reason] = append(byReason[s.reason], s)
			continue
		}
		count++
		switch {
		case s.state == "passed":
			passed++
		case s.state == "failed":
			failed++
			byReason[s.reason] = append(byReason[s.reason], s)
		default:
			notRun++
			byReason[s.reason] = append(byReason[s.reason], s)
		}
	}
	reasons := make([]string, 0, len(byReason))
	for r := range byReason {
		reasons = append(reasons, r)
	}
	sort.Slice(reasons, func(i, j int) bool {
		if a, b := len(byReason[reasons[i]]), len(byReason[reasons[j]]); a != b {
			return a > b
		}
		return reasons[i] < reasons[j]
	})
	if len(reasons) > 0 {
		fmt.Fprintln(out, "\n"+suiteName()+": specs that did not pass, by reason")
	}
	for _, r := range reasons {
		fmt.Fprintf(out, "\n[%d] %s\n", len(byReason[r]), r)
		for _, s := range byReason[r] {
			if s.where != "" && !strings.HasSuffix(r, "("+s.where+")") {
				fmt.Fprintf(out, "    - %s (%s)\n", s.name, s.where)
			} else {
				fmt.Fprintf(out, "    - %s\n", s.name)
			}
		}
	}
	line := fmt.Sprintf("%s: %d specs, %d passed, %d failed", suiteName(), count, passed, failed)
	if notRun > 0 {
		line += fmt.Sprintf(", %d not run", notRun)
	}
	fmt.Fprintln(out, "\n"+line)
	return failed == 0 && notRun == 0 && !suiteFailed
}
