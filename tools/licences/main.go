package main

import (
	"flag"
	"fmt"
	"io"
	"os"
	"strings"
)

// listFlag collects the repeated -list arguments.
type listFlag []string

func (l *listFlag) String() string     { return strings.Join(*l, "; ") }
func (l *listFlag) Set(s string) error { *l = append(*l, s); return nil }

func main() {
	os.Exit(run(os.Args[1:], os.Stdout, os.Stderr))
}

// run is main without the exit: 0 when every package passes, 1 on an
// offender, 2 when the check could not be run.
func run(args []string, stdout, stderr io.Writer) int {
	fs := flag.NewFlagSet("licences", flag.ContinueOnError)
	fs.SetOutput(stderr)
	var lists listFlag
	fs.Var(&lists, "list", "`ARGS` of one go list run (repeatable); leading NAME=value words set its environment")
	dir := fs.String("dir", ".", "the module `directory` go list runs in")
	goCmd := fs.String("go", "go", "the go `command`")
	verbose := fs.Bool("v", false, "list every licence file with its verdict and coverage")
	notice := fs.String("notice", "", "write the linked modules' licences to `FILE` (THIRD_PARTY_LICENSES)")
	if err := fs.Parse(args); err != nil {
		return 2
	}
	if len(lists) == 0 || fs.NArg() > 0 {
		fmt.Fprintln(stderr, "licences: want one or more -list and no other arguments")
		fs.Usage()
		return 2
	}
	var pkgs []Package
	for _, l := range lists {
		got, err := goList(*goCmd, *dir, l)
		if err != nil {
			fmt.Fprintf(stderr, "licences: %v\n", err)
			return 2
		}
		pkgs = append(pkgs, got...)
	}
	r, err := check(pkgs)
	if err != nil {
		fmt.Fprintf(stderr, "licences: %v\n", err)
		return 2
	}
	r.print(stdout, *verbose)
	if *notice != "" {
		if err := writeNotice(*notice, r); err != nil {
			fmt.Fprintf(stderr, "licences: %v\n", err)
			return 2
		}
	}
	if len(r.Offenders) > 0 {
		return 1
	}
	return 0
}
