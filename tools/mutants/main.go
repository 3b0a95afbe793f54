// Command mutants measures the safety net: it plants realistic bugs in the
// lifecycle's code, one at a time, in a scratch copy of the checkout, and
// reports which of the project's own checks catch each: the tests of the
// package it is in, the unit tests of the lifecycle's other packages, and
// the seeded simulation. A bug nothing catches names a missing event,
// invariant or test. `make mutants` runs it; docs/lifecycle.md lists the
// bugs and what caught them.
//
// Each bug (list.go) is one edit: a piece of code that must appear exactly
// once in its file, and what it becomes. A bug whose code is no longer
// there is reported stale, not skipped: the list follows the code.
//
//	go run ./tools/mutants [-only name,...] [-schedules 2000] [-first] [-keep]
package main

import (
	"bufio"
	"bytes"
	"context"
	"errors"
	"flag"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"time"
)

var (
	flagOnly      = flag.String("only", "", "comma-separated bug names to plant (default: all)")
	flagSchedules = flag.Int("schedules", 2000, "simulation schedules per bug")
	flagFirst     = flag.Bool("first", false, "stop at the first check that catches a bug (faster; the table then shows one catch each)")
	flagKeep      = flag.Bool("keep", false, "keep the scratch copy (its path is printed)")
)

// check is one of the project's checks, run in the scratch copy.
type check struct {
	name string
	// args are go test's, after "go test -count=1"; pkg is replaced by
	// the bug's package.
	args []string
	env  []string
}

func checks(schedules int) []check {
	return []check{
		{name: "package tests", args: []string{"-race", "pkg"}},
		{name: "lifecycle unit tests", args: []string{"-short", "./model", "./hooks", "./allocwatch", "./plugin", "./cli"}},
		{name: "simulation", args: []string{"-timeout", "60m", "-run", "^(TestSimulation|TestRegressions|TestSeedRegressions)$", "./sim", "-sim.shrink=20"},
			env: []string{fmt.Sprintf("SIM_SCHEDULES=%d", schedules)}},
		{name: "two-node simulation", args: []string{"-timeout", "60m", "-run", "^(TestTwoNodes|TestTwoNodeRegressions)$", "./sim", "-sim.shrink=20"},
			env: []string{fmt.Sprintf("SIM_SCHEDULES=%d", max(schedules/10, 100))}},
	}
}

// result is what happened to one bug.
type result struct {
	bug    bug
	stale  string            // why it could not be planted
	caught map[string]string // check name → what failed
	ran    map[string]bool   // the checks run (-first stops early)
}

func main() {
	flag.Parse()
	bugs := list()
	if *flagOnly != "" {
		want := strings.Split(*flagOnly, ",")
		bugs = slices.DeleteFunc(bugs, func(b bug) bool { return !slices.Contains(want, b.name) })
	}
	if len(bugs) == 0 {
		fatalf("no bug named %q (see tools/mutants/list.go)", *flagOnly)
	}
	root, err := gitRoot()
	if err != nil {
		fatalf("%v", err)
	}
	scratch, cleanup, err := scratchCopy(root)
	if err != nil {
		fatalf("%v", err)
	}
	if *flagKeep {
		fmt.Fprintf(os.Stderr, "scratch copy: %s\n", scratch)
	} else {
		defer cleanup()
	}
	env := nomadEnv(root)
	var results []result
	for i, b := range bugs {
		start := time.Now()
		fmt.Fprintf(os.Stderr, "[%d/%d] %s (%s) ...", i+1, len(bugs), b.name, b.file)
		r := plant(scratch, b, env)
		results = append(results, r)
		fmt.Fprintf(os.Stderr, " %s (%s)\n", summary(r), time.Since(start).Round(time.Second))
	}
	fmt.Print(table(results))
	for _, r := range results {
		if r.stale != "" || len(r.caught) == 0 {
			os.Exit(1)
		}
	}
}

// plant makes bug b in the scratch copy, runs the checks, and puts the
// file back.
func plant(dir string, b bug, env []string) result {
	r := result{bug: b, caught: map[string]string{}, ran: map[string]bool{}}
	path := filepath.Join(dir, b.file)
	orig, err := os.ReadFile(path)
	if err != nil {
		r.stale = err.Error()
		return r
	}
	if n := bytes.Count(orig, []byte(b.find)); n != 1 {
		r.stale = fmt.Sprintf("its code is in %s %d times, not once", b.file, n)
		return r
	}
	if err := os.WriteFile(path, bytes.Replace(orig, []byte(b.find), []byte(b.replace), 1), 0o644); err != nil {
		r.stale = err.Error()
		return r
	}
	defer func() { _ = os.WriteFile(path, orig, 0o644) }()
	if out, err := run(dir, env, "go", "build", "./..."); err != nil {
		r.stale = "does not build: " + firstLine(out)
		return r
	}
	pkg := "./" + filepath.Dir(b.file)
	for _, c := range checks(*flagSchedules) {
		args := []string{"test", "-count=1"}
		for _, a := range c.args {
			if a == "pkg" {
				a = pkg
			}
			args = append(args, a)
		}
		out, err := run(dir, append(env, c.env...), "go", args...)
		r.ran[c.name] = true
		if err != nil {
			r.caught[c.name] = failure(out)
			if *flagFirst {
				break
			}
		}
	}
	return r
}

func run(dir string, env []string, name string, args ...string) ([]byte, error) {
	ctx, cancel := context.WithTimeout(context.Background(), 90*time.Minute)
	defer cancel()
	cmd := exec.CommandContext(ctx, name, args...)
	cmd.Dir = dir
	cmd.Env = append(os.Environ(), env...)
	return cmd.CombinedOutput()
}

// failure names what failed in go test's output: the first failing test
// (and, for the simulation, the invariant its first line names).
var (
	failLine = regexp.MustCompile(`(?m)^\s*--- FAIL: (\S+)`)
	seedLine = regexp.MustCompile(`(?m)seed \d+: (I\d|liveness|[^\n]{0,60})`)
)

func failure(out []byte) string {
	var what []string
	for _, m := range failLine.FindAllSubmatch(out, -1) {
		name := string(m[1])
		if !slices.ContainsFunc(what, func(w string) bool { return strings.HasPrefix(name, w+"/") }) {
			what = append(what, name)
		}
	}
	if len(what) > 2 {
		what = append(what[:2], fmt.Sprintf("+%d", len(what)-2))
	}
	s := strings.Join(what, ", ")
	if m := seedLine.FindSubmatch(out); m != nil {
		s += " (" + strings.TrimSpace(string(m[0])) + ")"
	}
	if s == "" {
		s = firstLine(out)
	}
	return s
}

func firstLine(out []byte) string {
	sc := bufio.NewScanner(bytes.NewReader(out))
	for sc.Scan() {
		if l := strings.TrimSpace(sc.Text()); l != "" && !strings.HasPrefix(l, "#") {
			return l
		}
	}
	return "failed"
}

func summary(r result) string {
	switch {
	case r.stale != "":
		return "STALE: " + r.stale
	case len(r.caught) == 0:
		return "SURVIVED"
	}
	var by []string
	for _, c := range checks(0) {
		if _, ok := r.caught[c.name]; ok {
			by = append(by, c.name)
		}
	}
	return "caught by " + strings.Join(by, ", ")
}

// table is the report, as the markdown table docs/lifecycle.md keeps.
func table(results []result) string {
	var b strings.Builder
	b.WriteString("| bug | where | package tests | lifecycle unit tests | simulation | two-node simulation |\n|---|---|---|---|---|---|\n")
	for _, r := range results {
		cells := []string{r.bug.name + ": " + r.bug.why, "`" + r.bug.file + "`"}
		for _, c := range checks(0) {
			switch got, ok := r.caught[c.name]; {
			case r.stale != "":
				cells = append(cells, "stale")
			case ok:
				cells = append(cells, "caught: "+strings.ReplaceAll(got, "|", "/"))
			case !r.ran[c.name]:
				cells = append(cells, "not run")
			default:
				cells = append(cells, "—")
			}
		}
		b.WriteString("| " + strings.Join(cells, " | ") + " |\n")
	}
	return b.String()
}

func gitRoot() (string, error) {
	out, err := exec.Command("git", "rev-parse", "--show-toplevel").Output()
	if err != nil {
		return "", errors.New("not in a git checkout")
	}
	return strings.TrimSpace(string(out)), nil
}

// scratchCopy checks out HEAD in a worktree of its own, so the bugs never
// touch the checkout: they are planted in what is committed.
func scratchCopy(root string) (string, func(), error) {
	dir, err := os.MkdirTemp("", "ndz-mutants-")
	if err != nil {
		return "", nil, err
	}
	if out, err := exec.Command("git", "-C", root, "worktree", "add", "--detach", dir, "HEAD").CombinedOutput(); err != nil {
		return "", nil, fmt.Errorf("git worktree add: %s", out)
	}
	return dir, func() {
		_ = exec.Command("git", "-C", root, "worktree", "remove", "--force", dir).Run()
	}, nil
}

// nomadEnv points the tests that start a real Nomad agent at the cached
// binary, when there is one (tools/nomad-bin.sh).
func nomadEnv(root string) []string {
	out, err := exec.Command(filepath.Join(root, "tools", "nomad-bin.sh")).Output()
	if err != nil {
		return nil
	}
	return []string{"NOMAD_BINARY=" + strings.TrimSpace(string(out))}
}

func fatalf(format string, args ...any) {
	fmt.Fprintf(os.Stderr, "mutants: "+format+"\n", args...)
	os.Exit(2)
}
