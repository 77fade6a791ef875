// Which calls take which option: the kinds each option must implement (checked when this file
// compiles), and, type-checking a caller's code, that every other kind refuses it at compile
// time with an error naming the option, so that no option is silently ignored by a call.
package informerd_test

import (
	"fmt"
	"go/ast"
	"go/importer"
	"go/parser"
	"go/token"
	"go/types"
	"io"
	"os"
	"os/exec"
	"slices"
	"strings"
	"testing"

	informerd "informerd.io/clients/go"
)

// The calls each option is meant for. A change here that the constructors do not follow (or
// the reverse) fails to compile.
var (
	_ informerd.GetOption       = informerd.WithCluster("")
	_ informerd.ListOption      = informerd.WithCluster("")
	_ informerd.WatchOption     = informerd.WithCluster("")
	_ informerd.InformerOption  = informerd.WithCluster("")
	_ informerd.WorkQueueOption = informerd.WithCluster("")
	_ informerd.StatusOption    = informerd.WithCluster("")
	_ informerd.EnsureOption    = informerd.WithCluster("")

	_ informerd.ListOption      = informerd.InNamespace("")
	_ informerd.WatchOption     = informerd.InNamespace("")
	_ informerd.InformerOption  = informerd.InNamespace("")
	_ informerd.WorkQueueOption = informerd.InNamespace("")

	_ informerd.ListOption      = informerd.WithLabelSelector("")
	_ informerd.WatchOption     = informerd.WithLabelSelector("")
	_ informerd.InformerOption  = informerd.WithLabelSelector("")
	_ informerd.WorkQueueOption = informerd.WithLabelSelector("")

	_ informerd.ListOption      = informerd.WithFieldSelector("")
	_ informerd.WatchOption     = informerd.WithFieldSelector("")
	_ informerd.InformerOption  = informerd.WithFieldSelector("")
	_ informerd.WorkQueueOption = informerd.WithFieldSelector("")

	_ informerd.ListOption      = informerd.WithIndex("", "")
	_ informerd.WatchOption     = informerd.WithIndex("", "")
	_ informerd.InformerOption  = informerd.WithIndex("", "")
	_ informerd.WorkQueueOption = informerd.WithIndex("", "")

	_ informerd.GetOption      = informerd.WithFields()
	_ informerd.ListOption     = informerd.WithFields()
	_ informerd.WatchOption    = informerd.WithFields()
	_ informerd.InformerOption = informerd.WithFields()

	_ informerd.GetOption  = informerd.MinResourceVersion("")
	_ informerd.ListOption = informerd.MinResourceVersion("")

	_ informerd.GetOption       = informerd.WaitForSync()
	_ informerd.ListOption      = informerd.WaitForSync()
	_ informerd.WatchOption     = informerd.WaitForSync()
	_ informerd.WorkQueueOption = informerd.WaitForSync()

	_ informerd.ListOption = informerd.WithChunkSize(0)
	_ informerd.ListOption = informerd.WithLimit(0)

	_ informerd.WatchOption     = informerd.Since(informerd.ResumeToken{})
	_ informerd.WorkQueueOption = informerd.Since(informerd.ResumeToken{})

	_ informerd.WatchOption = informerd.SendInitialState()

	_ informerd.WatchOption     = informerd.WithPredicates()
	_ informerd.InformerOption  = informerd.WithPredicates()
	_ informerd.WorkQueueOption = informerd.WithPredicates()

	_ informerd.WatchOption     = informerd.WithPredicateCEL("")
	_ informerd.InformerOption  = informerd.WithPredicateCEL("")
	_ informerd.WorkQueueOption = informerd.WithPredicateCEL("")

	_ informerd.WatchOption    = informerd.WithBookmarkInterval(0)
	_ informerd.InformerOption = informerd.WithBookmarkInterval(0)

	_ informerd.WatchOption    = informerd.WithPrevious()
	_ informerd.InformerOption = informerd.WithPrevious()
)

// optionKinds is the table the var block above states, as the type-check below needs it:
// constructor call, the type it returns, and the kinds (interface names less "Option") it takes.
var optionKinds = []struct {
	expr, typ string
	kinds     []string
}{
	{`informerd.WithCluster("east")`, "ClusterOption", []string{"Get", "List", "Watch", "Informer", "WorkQueue", "Status", "Ensure"}},
	{`informerd.InNamespace("web")`, "SelectionOption", []string{"List", "Watch", "Informer", "WorkQueue"}},
	{`informerd.WithLabelSelector("a=b")`, "SelectionOption", []string{"List", "Watch", "Informer", "WorkQueue"}},
	{`informerd.WithFieldSelector("a=b")`, "SelectionOption", []string{"List", "Watch", "Informer", "WorkQueue"}},
	{`informerd.WithIndex("node", "n1")`, "SelectionOption", []string{"List", "Watch", "Informer", "WorkQueue"}},
	{`informerd.WithFields("status")`, "FieldsOption", []string{"Get", "List", "Watch", "Informer"}},
	{`informerd.MinResourceVersion("7")`, "ResourceVersionOption", []string{"Get", "List"}},
	{`informerd.WaitForSync()`, "WaitForSyncOption", []string{"Get", "List", "Watch", "WorkQueue"}},
	{`informerd.WithChunkSize(10)`, "ChunkSizeOption", []string{"List"}},
	{`informerd.WithLimit(10)`, "LimitOption", []string{"List"}},
	{`informerd.Since(informerd.ResumeToken{})`, "SinceOption", []string{"Watch", "WorkQueue"}},
	{`informerd.SendInitialState()`, "InitialStateOption", []string{"Watch"}},
	{`informerd.WithPredicates(informerd.LabelsChanged)`, "PredicateOption", []string{"Watch", "Informer", "WorkQueue"}},
	{`informerd.WithPredicateCEL("true")`, "PredicateOption", []string{"Watch", "Informer", "WorkQueue"}},
	{`informerd.WithBookmarkInterval(0)`, "DeliveryOption", []string{"Watch", "Informer"}},
	{`informerd.WithPrevious()`, "DeliveryOption", []string{"Watch", "Informer"}},
}

// Each kind of call, as a caller writes it with one option OPT.
var callKinds = map[string]string{
	"Get":       `c.Get(ctx, "pods", "web", "web-0", OPT)`,
	"List":      `c.List(ctx, "pods", OPT)`,
	"Watch":     `c.Watch(ctx, "pods", OPT)`,
	"Informer":  `informerd.NewInformer[struct{}](c, "pods", informerd.HandlerFuncs[struct{}]{}, OPT)`,
	"WorkQueue": `informerd.NewWorkQueue(ctx, c, "pods", informerd.WorkQueueConfig{}, OPT)`,
	"Status":    `c.Status(ctx, "", OPT)`,
	"Ensure":    `c.EnsureWith(ctx, "v1", "ConfigMap", nil, OPT)`,
}

// Passing an option to a call it means nothing to (Since to a Get, WaitForSync to an Informer,
// ...) does not compile, and the compiler's message names the option's type and the method
// the call's kind needs; every intended pairing compiles.
func TestInapplicableOptionsDoNotCompile(t *testing.T) {
	var src strings.Builder
	src.WriteString("package probe\n\nimport (\n\t\"context\"\n\n\tinformerd \"informerd.io/clients/go\"\n)\n\n" +
		"func probe(ctx context.Context, c *informerd.Client) {\n")
	type want struct{ call, typ, kind string }
	lines := map[int]want{} // source line -> the call made there, where an error is wanted
	line := 10
	for _, o := range optionKinds {
		for kind, call := range callKinds {
			src.WriteString("\t" + strings.Replace(call, "OPT", o.expr, 1) + "\n")
			if !slices.Contains(o.kinds, kind) {
				lines[line] = want{call: kind + " with " + o.expr, typ: o.typ, kind: kind}
			}
			line++
		}
	}
	src.WriteString("}\n")

	errs := typeCheck(t, src.String())
	got := map[int]string{}
	for _, err := range errs {
		got[err.Fset.Position(err.Pos).Line] += err.Msg + "; "
	}
	for l, w := range lines {
		msg, ok := got[l]
		if !ok {
			t.Errorf("%s compiles: the call would ignore the option", w.call)
			continue
		}
		if !strings.Contains(msg, "informerd."+w.typ) || !strings.Contains(msg, "ApplyTo"+w.kind) {
			t.Errorf("%s is refused with %q, which does not name %s and ApplyTo%s", w.call, msg, w.typ, w.kind)
		}
	}
	for l, msg := range got {
		if _, ok := lines[l]; !ok {
			t.Errorf("line %d of the probe, an option its call takes, does not compile: %s", l, msg)
		}
	}
	if len(lines) == 0 || len(lines) == len(optionKinds)*len(callKinds) {
		t.Fatalf("the probe has %d refused pairings of %d: the table is wrong", len(lines), len(optionKinds)*len(callKinds))
	}
}

// typeCheck type-checks one file that imports the client, against the client as compiled
// (export data from `go list -export`), and returns its errors.
func typeCheck(t *testing.T, src string) []types.Error {
	t.Helper()
	out, err := exec.Command("go", "list", "-export", "-deps",
		"-f", "{{if .Export}}{{.ImportPath}}={{.Export}}{{end}}", "context", "informerd.io/clients/go").Output()
	if err != nil {
		t.Fatalf("go list -export of the client (the go command must be on PATH): %v", err)
	}
	exports := map[string]string{}
	for _, l := range strings.Fields(string(out)) {
		path, file, _ := strings.Cut(l, "=")
		exports[path] = file
	}
	fset := token.NewFileSet()
	file, err := parser.ParseFile(fset, "probe.go", src, 0)
	if err != nil {
		t.Fatalf("the probe does not parse: %v\n%s", err, src)
	}
	var errs []types.Error
	conf := types.Config{
		Importer: importer.ForCompiler(fset, "gc", func(path string) (io.ReadCloser, error) {
			if f, ok := exports[path]; ok {
				return os.Open(f)
			}
			return nil, fmt.Errorf("no export data for %s in go list's output", path)
		}),
		Error: func(err error) { errs = append(errs, err.(types.Error)) },
	}
	_, _ = conf.Check("probe", fset, []*ast.File{file}, nil)
	for _, e := range errs {
		if strings.Contains(e.Msg, "could not import") {
			t.Fatalf("the probe cannot import the client: %s", e.Msg)
		}
	}
	return errs
}
