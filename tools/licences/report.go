package main

import (
	"cmp"
	"fmt"
	"io"
	"maps"
	"os"
	"path/filepath"
	"slices"
	"strings"
)

// Report is the check's result over every listed package.
type Report struct {
	// Modules are the modules of the checked packages, by path.
	Modules []*ModuleResult
	// Packages counts the distinct package directories checked.
	Packages int
	// Offenders fail the check, by module and folder.
	Offenders []Offender
	// Excepted are the modules an exception let pass: path -> why.
	Excepted map[string]string
}

// ModuleResult is one module and the licence files its linked packages fall
// under.
type ModuleResult struct {
	Module *Module
	// Dir is where the module's files are (its replacement's, if any).
	Dir string
	// Files maps each licence file, relative to Dir, to its verdict.
	Files map[string]Verdict
}

// Offender is one package folder whose licence fails.
type Offender struct {
	Module string // module@version
	Folder string // the package's folder, relative to the module root
	Found  string // the licence found: "LICENSE is BUSL-1.1", "no licence file"
	Why    string // empty for "no licence file"
}

func (o Offender) String() string {
	s := fmt.Sprintf("%s %s: %s", o.Module, o.Folder, o.Found)
	if o.Why != "" {
		s += " (" + o.Why + ")"
	}
	return s
}

// check judges every package but the standard library's, each directory
// once, each licence file once.
func check(pkgs []Package) (*Report, error) {
	r := &Report{Excepted: map[string]string{}}
	mods := map[string]*ModuleResult{}
	seen := map[string]bool{}
	verdicts := map[string]Verdict{}
	for _, p := range pkgs {
		if p.Standard || seen[p.Dir] {
			continue
		}
		if p.Module == nil || p.Dir == "" {
			return nil, fmt.Errorf("package %s: no module or directory (is it in GOPATH or vendor/?)", p.ImportPath)
		}
		seen[p.Dir] = true
		r.Packages++
		mr := mods[p.Module.String()]
		if mr == nil {
			dir := p.Module.Dir
			if p.Module.Replace != nil && p.Module.Replace.Dir != "" {
				dir = p.Module.Replace.Dir
			}
			mr = &ModuleResult{Module: p.Module, Dir: dir, Files: map[string]Verdict{}}
			mods[p.Module.String()] = mr
		}
		files, err := nearestLicences(p.Dir, mr.Dir)
		if err != nil {
			return nil, fmt.Errorf("package %s: %v", p.ImportPath, err)
		}
		folder, _ := filepath.Rel(mr.Dir, p.Dir)
		if len(files) == 0 {
			r.Offenders = append(r.Offenders, Offender{Module: p.Module.String(), Folder: folder, Found: "no licence file"})
			continue
		}
		var found, why []string
		for _, f := range files {
			v, ok := verdicts[f]
			if !ok {
				text, err := os.ReadFile(f)
				if err != nil {
					return nil, err
				}
				ex, excepted := exceptions[p.Module.Path]
				v = judge(text, ex.Licences)
				verdicts[f] = v
				if excepted && v.OK && !judge(text, nil).OK {
					r.Excepted[p.Module.String()] = ex.Why
				}
			}
			rel, _ := filepath.Rel(mr.Dir, f)
			mr.Files[rel] = v
			if !v.OK {
				found = append(found, rel+" is "+v.Name())
				why = append(why, v.Why)
			}
		}
		if len(found) > 0 {
			r.Offenders = append(r.Offenders, Offender{Module: p.Module.String(), Folder: folder,
				Found: strings.Join(found, ", "), Why: strings.Join(why, "; ")})
		}
	}
	for _, k := range slices.Sorted(maps.Keys(mods)) {
		r.Modules = append(r.Modules, mods[k])
	}
	slices.SortFunc(r.Offenders, func(a, b Offender) int {
		return cmp.Or(strings.Compare(a.Module, b.Module), strings.Compare(a.Folder, b.Folder))
	})
	return r, nil
}

// Licences is each module's licence names (a module whose packages fall
// under two licence files counts under both), for the summary.
func (r *Report) Licences() map[string]int {
	n := map[string]int{}
	for _, m := range r.Modules {
		names := map[string]bool{}
		for _, v := range m.Files {
			names[v.Name()] = true
		}
		if len(names) == 0 {
			names["no licence file"] = true
		}
		for k := range names {
			n[k]++
		}
	}
	return n
}

// print writes one line per offender, the exceptions used, with -v every
// licence file's verdict, and the summary.
func (r *Report) print(w io.Writer, verbose bool) {
	for _, o := range r.Offenders {
		fmt.Fprintf(w, "FAIL %s\n", o)
	}
	for _, m := range slices.Sorted(maps.Keys(r.Excepted)) {
		fmt.Fprintf(w, "excepted %s: %s\n", m, r.Excepted[m])
	}
	for _, m := range r.Modules {
		if !verbose {
			break
		}
		for _, rel := range slices.Sorted(maps.Keys(m.Files)) {
			v := m.Files[rel]
			fmt.Fprintf(w, "%s %s: %s, %.0f%% of the text\n", m.Module, filepath.ToSlash(rel), v.Name(), v.Coverage)
		}
	}
	n := r.Licences()
	var seen []string
	for _, k := range slices.Sorted(maps.Keys(n)) {
		seen = append(seen, fmt.Sprintf("%s %d", k, n[k]))
	}
	fmt.Fprintf(w, "licences: %d modules, %d packages checked; modules by licence: %s; %d failed\n",
		len(r.Modules), r.Packages, strings.Join(seen, ", "), len(r.Offenders))
}

// writeNotice writes THIRD_PARTY_LICENSES: for each module but the main one,
// its path@version, licence names and the text of each licence file its
// linked packages fall under.
func writeNotice(path string, r *Report) error {
	f, err := os.Create(path)
	if err != nil {
		return err
	}
	fmt.Fprintln(f, "Third-party licences of the modules linked into nomad-device-zfs and nomad-device-zfs-ctl,")
	fmt.Fprintln(f, "written by tools/licences. Each module's licence files are those of the folders its linked packages are in.")
	for _, m := range r.Modules {
		if m.Module.Main {
			continue
		}
		for _, rel := range slices.Sorted(maps.Keys(m.Files)) {
			text, err := os.ReadFile(filepath.Join(m.Dir, rel))
			if err != nil {
				f.Close()
				return err
			}
			fmt.Fprintf(f, "\n%s\n%s\nLicence: %s (%s)\n%s\n\n%s\n", strings.Repeat("=", 78),
				m.Module, m.Files[rel].Name(), filepath.ToSlash(rel), strings.Repeat("-", 78), strings.TrimRight(string(text), "\n"))
		}
	}
	return f.Close()
}
