package model

import (
	"go/ast"
	"go/parser"
	"go/token"
	"os"
	"path/filepath"
	"regexp"
	"sort"
	"strconv"
	"strings"
	"testing"
)

// The texts an operator reads when something is wrong — a slot's health
// (nomad node status -verbose, status, doctor, plan), a parent's or a
// class's problem, a refused task start — are each listed in
// docs/troubleshooting.md with what they mean and what to do.
// TestTroubleshootingListsEveryText reads them from the source, so a new
// text fails it until the page has it.

const troubleshootingDoc = "../docs/troubleshooting.md"

// textSources are the files the texts are built in, relative to model/.
var textSources = []string{
	"build.go",            // a parent's and a class's problem
	"view.go",             // Health: a slot's reason
	"ownership.go",        // strangersAdvice: what is foreign, and what to do
	"ensure.go",           // a slot that cannot be created: out of space
	"reserve.go",          // DecideReserve: why a Reserve is refused or waits
	"sticky.go",           // DecideInherit: why a replacement waits, starts empty or fails
	"../hooks/create.go",  // a failed create's reason
	"../hooks/reserve.go", // the errors Reserve returns to Nomad
	"../hooks/sticky.go",  // the error of a replacement whose data did not come
}

// notShown are texts the sources build that no operator sees, and why.
var notShown = map[string]string{
	"deciding on a fresh answer from Nomad": "ReserveRefresh's reason: Reserve refreshes its answer, nothing is logged or returned",
	// ParkedKeep's reasons: data kept parked is neither logged nor shown
	// with a reason (status shows when it waits until).
	"waiting for Nomad to reschedule " + wild:                            "ParkedKeep",
	"waiting for node " + wild + ", where " + wild + " runs, to copy it": "ParkedKeep",
	"waiting for " + wild + " to start":                                  "ParkedKeep",
	"waiting for the replacement Nomad does not name for " + wild +
		" (stopped as lost with its node; stop_after_client_disconnect) to copy or claim it, within sticky_wait": "ParkedKeep",
}

// wild stands for what a text takes from its arguments.
const wild = "\x00"

// textCollector walks the sources' syntax for the texts.
type textCollector struct {
	consts map[string]string // string constants and errors.New variables: name → text (wild-marked)
	texts  map[string]string // text (wild-marked) → where
	fset   *token.FileSet
}

// lit is the text of expression e, with wild for what is not a constant.
func (c *textCollector) lit(e ast.Expr) string {
	switch e := e.(type) {
	case *ast.BasicLit:
		if e.Kind == token.STRING {
			if s, err := strconv.Unquote(e.Value); err == nil {
				return s
			}
		}
	case *ast.ParenExpr:
		return c.lit(e.X)
	case *ast.BinaryExpr:
		if e.Op == token.ADD {
			return c.lit(e.X) + c.lit(e.Y)
		}
	case *ast.Ident:
		if s, ok := c.consts[e.Name]; ok {
			return s
		}
	case *ast.SelectorExpr:
		if s, ok := c.consts[e.Sel.Name]; ok {
			return s
		}
	case *ast.CallExpr:
		if isCall(e, "fmt", "Sprintf") || isCall(e, "fmt", "Errorf") {
			return c.format(e)
		}
	}
	return wild
}

// verb is a fmt verb.
var verb = regexp.MustCompile(`%[-+# 0-9.]*[a-zA-Z%]`)

// format is the text of a fmt.Sprintf or fmt.Errorf call: its format with
// each verb replaced by its argument's text.
func (c *textCollector) format(call *ast.CallExpr) string {
	if len(call.Args) == 0 {
		return wild
	}
	f := c.lit(call.Args[0])
	if f == wild {
		return wild
	}
	arg := 1
	return verb.ReplaceAllStringFunc(f, func(v string) string {
		if v == "%%" {
			return "%"
		}
		defer func() { arg++ }()
		if arg < len(call.Args) {
			return c.lit(call.Args[arg])
		}
		return wild
	})
}

func isCall(call *ast.CallExpr, pkg, fn string) bool {
	sel, ok := call.Fun.(*ast.SelectorExpr)
	if !ok || sel.Sel.Name != fn {
		return false
	}
	id, ok := sel.X.(*ast.Ident)
	return ok && id.Name == pkg
}

func isMethodCall(call *ast.CallExpr, method string) bool {
	sel, ok := call.Fun.(*ast.SelectorExpr)
	return ok && sel.Sel.Name == method && len(call.Args) > 0
}

func isIdentCall(call *ast.CallExpr, fn string) bool {
	id, ok := call.Fun.(*ast.Ident)
	return ok && id.Name == fn
}

// add records text at pos, unless it is all arguments.
func (c *textCollector) add(text string, pos token.Pos) {
	if len(strings.TrimSpace(strings.ReplaceAll(text, wild, ""))) < 4 {
		return
	}
	if _, ok := c.texts[text]; !ok {
		c.texts[text] = c.fset.Position(pos).String()
	}
}

// collectTexts parses the sources and returns every text, wild-marked, with
// where it is built.
func collectTexts(t *testing.T) map[string]string {
	t.Helper()
	c := &textCollector{consts: map[string]string{}, texts: map[string]string{}, fset: token.NewFileSet()}
	var files []*ast.File
	for _, name := range textSources {
		f, err := parser.ParseFile(c.fset, name, nil, 0)
		if err != nil {
			t.Fatal(err)
		}
		files = append(files, f)
	}
	// Constants and error variables first: texts are built from them (the
	// property names of props.go, hooks' Err* variables).
	modelFiles, err := filepath.Glob("*.go")
	if err != nil {
		t.Fatal(err)
	}
	var constFiles []*ast.File
	for _, name := range modelFiles {
		if strings.HasSuffix(name, "_test.go") {
			continue
		}
		f, err := parser.ParseFile(c.fset, name, nil, 0)
		if err != nil {
			t.Fatal(err)
		}
		constFiles = append(constFiles, f)
	}
	for _, f := range append(constFiles, files...) {
		for _, d := range f.Decls {
			g, ok := d.(*ast.GenDecl)
			if !ok || (g.Tok != token.CONST && g.Tok != token.VAR) {
				continue
			}
			for _, spec := range g.Specs {
				vs := spec.(*ast.ValueSpec)
				for i, v := range vs.Values {
					if call, ok := v.(*ast.CallExpr); ok && isCall(call, "errors", "New") {
						c.consts[vs.Names[i].Name] = c.lit(call.Args[0])
					} else if s := c.lit(v); s != wild && g.Tok == token.CONST {
						c.consts[vs.Names[i].Name] = s
					}
				}
			}
		}
	}
	for fi, f := range files {
		hooks := strings.HasPrefix(textSources[fi], "../hooks/")
		for _, d := range f.Decls {
			fn, ok := d.(*ast.FuncDecl)
			if !ok || fn.Body == nil {
				continue
			}
			ast.Inspect(fn.Body, func(n ast.Node) bool {
				switch n := n.(type) {
				case *ast.AssignStmt:
					// pv.Problem = ..., reason = ..., blocked[ds] = ...
					if len(n.Lhs) != len(n.Rhs) {
						return true
					}
					for i, l := range n.Lhs {
						switch l := l.(type) {
						case *ast.SelectorExpr:
							if l.Sel.Name == "Problem" || l.Sel.Name == "Reason" {
								c.add(c.lit(n.Rhs[i]), n.Pos())
							}
						case *ast.Ident:
							if l.Name == "reason" {
								c.add(c.lit(n.Rhs[i]), n.Pos())
							}
						case *ast.IndexExpr:
							c.add(c.lit(n.Rhs[i]), n.Pos())
						}
					}
				case *ast.KeyValueExpr:
					// ReserveDecision{Reason: ...}, InheritDecision{Reason: ...}, ParentView{Problem: ...}
					if k, ok := n.Key.(*ast.Ident); ok && (k.Name == "Problem" || k.Name == "Reason") {
						c.add(c.lit(n.Value), n.Pos())
					}
				case *ast.ReturnStmt:
					// Health's reason; the texts strangersAdvice, stoppingOnly and
					// awaitsClaim return.
					switch fn.Name.Name {
					case "Health":
						if len(n.Results) == 2 {
							c.add(c.lit(n.Results[1]), n.Pos())
						}
					case "strangersAdvice", "stoppingOnly", "awaitsClaim":
						c.add(c.lit(n.Results[0]), n.Pos())
					}
				case *ast.CallExpr:
					switch {
					case fn.Name.Name == "strangersAdvice" && isCall(n, "fmt", "Sprintf"):
						// The advice, a text of its own inside the whole.
						c.add(c.lit(n), n.Pos())
					case isMethodCall(n, "waitForCopy"):
						// Why a replacement waits for its data from another
						// node, and the start of what happens past the timeout.
						c.add(c.lit(n.Args[0]), n.Pos())
					case fn.Name.Name == "PlanParked" && isIdentCall(n, "release"):
						// Why parked data goes by the release policy: logged
						// with "releasing parked data".
						c.add(c.format(n), n.Pos())
					case textSources[fi] == "ownership.go" && isCall(n, "fmt", "Errorf"):
						// A release or a prune refused over something foreign.
						c.add(c.lit(n), n.Pos())
					case hooks && isCall(n, "fmt", "Errorf") && (textSources[fi] == "../hooks/reserve.go" || mentionsReserveErr(n)):
						// What Reserve returns, and so Nomad shows.
						c.add(c.lit(n), n.Pos())
					}
				}
				return true
			})
		}
	}
	return c.texts
}

// mentionsReserveErr reports whether a fmt.Errorf call wraps one of the
// errors Reserve returns to Nomad.
func mentionsReserveErr(call *ast.CallExpr) bool {
	for _, a := range call.Args[1:] {
		if id, ok := a.(*ast.Ident); ok && (id.Name == "ErrNotReady" || id.Name == "ErrRefused" || id.Name == "ErrUnknownSlot") {
			return true
		}
	}
	return false
}

// placeholder is what the page writes for what a text takes from its
// arguments: one placeholder such as <pool> (quoted or not), or a quoted
// value such as "fail". Nothing else, so that a general entry (slot not
// ready: <slot> (<dataset>): <why>) does not stand for a more particular
// text (... gave up waiting: <error>), which is listed on its own.
const placeholder = `(?:"?<[^<>]+>"?|"[^"<>]*")`

// textPattern matches a whole listed text: the text's own words, and a
// placeholder for each of its arguments.
func textPattern(text string) *regexp.Regexp {
	parts := strings.Split(text, wild)
	for i := range parts {
		parts[i] = regexp.QuoteMeta(parts[i])
	}
	return regexp.MustCompile("^" + strings.Join(parts, placeholder) + "$")
}

// docSpans are the code spans of a markdown page outside code blocks.
func docSpans(text string) []string {
	var out []string
	fence := false
	for _, line := range strings.Split(text, "\n") {
		if strings.HasPrefix(strings.TrimSpace(line), "```") {
			fence = !fence
			continue
		}
		if fence {
			continue
		}
		for _, m := range regexp.MustCompile("`([^`]+)`").FindAllStringSubmatch(line, -1) {
			out = append(out, m[1])
		}
	}
	return out
}

// TestTroubleshootingListsEveryText: every health text, problem and Reserve
// refusal the sources can build is a code span of docs/troubleshooting.md,
// with placeholders (<pool>) for what it takes from its arguments.
// TROUBLESHOOTING_LIST=1 logs every text found, with where it is built.
func TestTroubleshootingListsEveryText(t *testing.T) {
	src, err := os.ReadFile(troubleshootingDoc)
	if err != nil {
		t.Fatal(err)
	}
	spans := docSpans(string(src))
	texts := collectTexts(t)
	if len(texts) < 30 {
		t.Fatalf("found only %d texts in the sources: has the way they are built changed?", len(texts))
	}
	sorted := make([]string, 0, len(texts))
	for text := range texts {
		sorted = append(sorted, text)
	}
	sort.Strings(sorted)
	for _, text := range sorted {
		if os.Getenv("TROUBLESHOOTING_LIST") != "" {
			t.Logf("%s\t%s", texts[text], strings.ReplaceAll(text, wild, "<…>"))
		}
		if _, ok := notShown[text]; ok {
			continue
		}
		re, found := textPattern(text), false
		for _, s := range spans {
			if re.MatchString(s) {
				found = true
				break
			}
		}
		if !found {
			t.Errorf("%s does not list the text built at %s:\n\t%s", troubleshootingDoc, texts[text], strings.ReplaceAll(text, wild, "<…>"))
		}
	}
	for text := range notShown {
		if _, ok := texts[text]; !ok {
			t.Errorf("notShown lists %q, which the sources no longer build", text)
		}
	}
}
