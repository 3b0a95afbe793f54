package main

import (
	"fmt"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strings"

	"github.com/google/licensecheck"
)

// allowed are the licences a linked package may carry: open-source licences
// whose terms fit a binary shipped under MPL-2.0.
var allowed = map[string]bool{
	"MPL-2.0":      true,
	"Apache-2.0":   true,
	"BSD-2-Clause": true,
	"BSD-3-Clause": true,
	"MIT":          true,
	"ISC":          true,
}

// minCoverage is the share (percent of the file's words) that allowed
// licence texts must cover for a licence file to pass. Real files carry a
// copyright line, a title or a short note beside the licence (the common
// MIT and BSD files score 90-100); a file that scores less has terms of its
// own that nobody has read, such as a licence's parameters or a "not for
// production use" clause.
const minCoverage = 80

// Exception lets one module's licence files name licences beyond the
// allow-list, after a person has read them.
type Exception struct {
	// Licences are the licence IDs allowed for this module only.
	Licences []string
	// Why is the reason, printed with every package it lets pass.
	Why string
}

// exceptions are keyed by module path. An exception widens the allow-list by
// the named IDs for that module only (the coverage rule still holds), so a
// later version with another licence still fails.
var exceptions = map[string]Exception{
	// textseg's LICENSE is its own MIT text, then Apache-2.0 for the table
	// generators and the Unicode data licence for the grapheme break data
	// the tables are built from. Unicode-DFS-2016 is OSI-approved and
	// permissive (keep the notice), and THIRD_PARTY_LICENSES ships it.
	"github.com/apparentlymart/go-textseg/v15": {
		Licences: []string{"Unicode-DFS-2016"},
		Why:      "Unicode-DFS-2016 for the Unicode data textseg's tables come from: OSI-approved, permissive",
	},
}

// licenceName matches the names of licence files: LICENSE, LICENCE, COPYING,
// in any case, with an optional suffix (LICENSE.md, LICENSE-MIT, COPYING.txt).
var licenceName = regexp.MustCompile(`(?i)^(licen[cs]e|copying)([-_.].*)?$`)

// buslScanner knows the Business Source License only: licensecheck v0.3.1's
// built-in set does not have it, and without it a BUSL file reads as
// "unrecognised", which fails too but names nothing. It is a scanner of its
// own because a scanner built from the whole built-in set plus one licence
// compiles for seconds (20 s under -race), where the built-in one comes
// precompiled.
var buslScanner = newBUSLScanner()

// buslLRE is the first paragraph of the BUSL 1.1 terms, the same in every
// licensor's copy (the Parameters block above it differs).
const buslLRE = `
Business Source License 1.1
((Terms))??
The Licensor hereby grants you the right to copy, modify, create derivative
works, redistribute, and make non-production use of the Licensed Work.
`

func newBUSLScanner() *licensecheck.Scanner {
	s, err := licensecheck.NewScanner([]licensecheck.License{{ID: "BUSL-1.1", LRE: buslLRE}})
	if err != nil {
		panic(fmt.Sprintf("licensecheck scanner: %v", err))
	}
	return s
}

// Verdict is what one licence file was judged to be.
type Verdict struct {
	// IDs are the licences licensecheck found, in file order, each once
	// ("MIT", "BUSL-1.1"); empty when it recognised nothing.
	IDs []string
	// Coverage is the percent of the file's words the matches cover.
	Coverage float64
	// OK is whether the file passes; Why says why not.
	OK  bool
	Why string
}

// Name is the licence as the report and THIRD_PARTY_LICENSES spell it, e.g.
// "MIT" or "MIT + Apache-2.0" (both texts are in the file; which applies to
// what, the file says) or "unrecognised".
func (v Verdict) Name() string {
	if len(v.IDs) == 0 {
		return "unrecognised"
	}
	return strings.Join(v.IDs, " + ")
}

// judge decides one licence file's text: see the package doc for the rule.
// also are licence IDs allowed beyond the allow-list (an exception's).
func judge(text []byte, also []string) Verdict {
	cov := licensecheck.Scan(text)
	if busl := buslScanner.Scan(text); len(busl.Match) > 0 {
		// The BUSL match is a paragraph, so it adds next to nothing to
		// the coverage: it is there to name the licence.
		cov.Match = append(cov.Match, busl.Match...)
	}
	v := Verdict{Coverage: cov.Percent}
	var bad []string
	for _, m := range cov.Match {
		if m.IsURL || slices.Contains(v.IDs, m.ID) {
			continue
		}
		v.IDs = append(v.IDs, m.ID)
		if !allowed[m.ID] && !slices.Contains(also, m.ID) {
			bad = append(bad, m.ID)
		}
	}
	switch {
	case len(v.IDs) == 0:
		v.Why = fmt.Sprintf("no known licence (%.0f%% of the text matched)", cov.Percent)
	case len(bad) > 0:
		v.Why = strings.Join(bad, ", ") + " is not on the allow-list"
	case cov.Percent < minCoverage:
		v.Why = fmt.Sprintf("%s covers only %.0f%% of the text (want %d%%)", v.Name(), cov.Percent, minCoverage)
	default:
		v.OK = true
	}
	return v
}

// nearestLicences returns the licence files of the nearest folder that has
// any, from dir up to and including root (a module's directory), as paths;
// nil when there are none. dir must be root or below it.
func nearestLicences(dir, root string) ([]string, error) {
	dir, root = filepath.Clean(dir), filepath.Clean(root)
	if rel, err := filepath.Rel(root, dir); err != nil || rel == ".." || strings.HasPrefix(rel, ".."+string(filepath.Separator)) {
		return nil, fmt.Errorf("%s is not inside module directory %s", dir, root)
	}
	for {
		entries, err := os.ReadDir(dir)
		if err != nil {
			return nil, err
		}
		var found []string
		for _, e := range entries {
			if e.Type().IsRegular() && licenceName.MatchString(e.Name()) && !strings.HasSuffix(e.Name(), ".go") {
				found = append(found, filepath.Join(dir, e.Name()))
			}
		}
		if len(found) > 0 {
			return found, nil
		}
		if dir == root {
			return nil, nil
		}
		dir = filepath.Dir(dir)
	}
}
