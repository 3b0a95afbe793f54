package main

import (
	"bytes"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

func readFixture(t *testing.T, path string) []byte {
	t.Helper()
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	return b
}

func TestJudge(t *testing.T) {
	mit := readFixture(t, "testdata/mit/LICENSE")
	// Terms of its own after a known text: 100 words nobody has read.
	extra := append(append([]byte{}, mit...), []byte("\nAdditional terms: "+strings.Repeat("you may not use this software in production ", 14))...)
	cases := []struct {
		name     string
		text     []byte
		also     []string
		wantOK   bool
		wantName string
	}{
		{name: "BUSL text (Nomad v1.11.3 root)", text: readFixture(t, "testdata/nomadlike/LICENSE"), wantName: "BUSL-1.1"},
		{name: "MPL text (the project's own LICENSE)", text: readFixture(t, "../../LICENSE"), wantOK: true, wantName: "MPL-2.0"},
		{name: "MPL text with a copyright header (Nomad v1.11.3 plugins/)", text: readFixture(t, "testdata/nomadlike/plugins/LICENSE"), wantOK: true, wantName: "MPL-2.0"},
		{name: "MIT", text: mit, wantOK: true, wantName: "MIT"},
		{name: "MIT followed by terms of its own", text: extra, wantName: "MIT"},
		{name: "no known licence", text: []byte("Copyright 2024 Someone. All rights reserved.\n"), wantName: "unrecognised"},
		{name: "an exception does not lift the coverage rule", text: readFixture(t, "testdata/nomadlike/LICENSE"), also: []string{"BUSL-1.1"}, wantName: "BUSL-1.1"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			v := judge(tc.text, tc.also)
			if v.OK != tc.wantOK || v.Name() != tc.wantName {
				t.Errorf("judge = OK %v, %q (%s, %.0f%%); want OK %v, %q", v.OK, v.Name(), v.Why, v.Coverage, tc.wantOK, tc.wantName)
			}
			if !v.OK && v.Why == "" {
				t.Error("a failing verdict says no why")
			}
		})
	}
}

func TestNearestLicences(t *testing.T) {
	cases := []struct {
		name string
		root string
		dir  string
		want string // the licence file, relative to testdata; "" for none
	}{
		{name: "nested folder overrides the root", root: "nomadlike", dir: "nomadlike/plugins/device", want: "nomadlike/plugins/LICENSE"},
		{name: "folder's own licence", root: "nomadlike", dir: "nomadlike/plugins", want: "nomadlike/plugins/LICENSE"},
		{name: "root licence when no nearer one", root: "nomadlike", dir: "nomadlike/helper", want: "nomadlike/LICENSE"},
		{name: "no licence file", root: "bare", dir: "bare/pkg"},
		{name: "the walk stops at the module root", root: "nomadlike/helper", dir: "nomadlike/helper"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			got, err := nearestLicences(filepath.Join("testdata", tc.dir), filepath.Join("testdata", tc.root))
			if err != nil {
				t.Fatal(err)
			}
			var want []string
			if tc.want != "" {
				want = []string{filepath.Join("testdata", tc.want)}
			}
			if strings.Join(got, ",") != strings.Join(want, ",") {
				t.Errorf("nearestLicences = %q, want %q", got, want)
			}
		})
	}
	if _, err := nearestLicences("testdata/bare/pkg", "testdata/nomadlike"); err == nil {
		t.Error("a directory outside the module root: no error")
	}
}

// TestCheck runs the whole judgement on packages laid out as Nomad v1.11.3's
// are: the MPL plugins/ folder passes, the BUSL root and a folder with no
// licence fail, each named by module@version and folder.
func TestCheck(t *testing.T) {
	abs := func(p string) string {
		a, err := filepath.Abs(filepath.Join("testdata", p))
		if err != nil {
			t.Fatal(err)
		}
		return a
	}
	nomad := &Module{Path: "github.com/hashicorp/nomad", Version: "v1.11.3", Dir: abs("nomadlike")}
	bare := &Module{Path: "example.com/bare", Version: "v0.1.0", Dir: abs("bare")}
	pkgs := []Package{
		{ImportPath: "fmt", Dir: "/usr/local/go/src/fmt", Standard: true},
		{ImportPath: "github.com/hashicorp/nomad/plugins/device", Dir: abs("nomadlike/plugins/device"), Module: nomad},
		{ImportPath: "github.com/hashicorp/nomad/helper", Dir: abs("nomadlike/helper"), Module: nomad},
		{ImportPath: "github.com/hashicorp/nomad/helper [github.com/hashicorp/nomad/helper.test]", Dir: abs("nomadlike/helper"), Module: nomad},
		{ImportPath: "example.com/bare/pkg", Dir: abs("bare/pkg"), Module: bare},
	}
	r, err := check(pkgs)
	if err != nil {
		t.Fatal(err)
	}
	var out bytes.Buffer
	r.print(&out, false)
	want := "FAIL example.com/bare@v0.1.0 pkg: no licence file\n" +
		"FAIL github.com/hashicorp/nomad@v1.11.3 helper: LICENSE is BUSL-1.1 (BUSL-1.1 is not on the allow-list)\n" +
		"licences: 2 modules, 3 packages checked; modules by licence: BUSL-1.1 1, MPL-2.0 1, no licence file 1; 2 failed\n"
	if out.String() != want {
		t.Errorf("report:\n%s\nwant:\n%s", out.String(), want)
	}
}

// TestRunOnItself runs go list for real, on the tool's own packages.
func TestRunOnItself(t *testing.T) {
	var stdout, stderr bytes.Buffer
	code := run([]string{"-dir", "../..", "-list", "-deps -test ./tools/licences"}, &stdout, &stderr)
	if code != 0 || !strings.Contains(stdout.String(), "; 0 failed") {
		t.Errorf("exit %d\nstdout:\n%s\nstderr:\n%s", code, stdout.String(), stderr.String())
	}
}

// TestWriteNotice: THIRD_PARTY_LICENSES names each module but the main one,
// its licence and the licence file's text, one block per licence file used.
func TestWriteNotice(t *testing.T) {
	abs, err := filepath.Abs("testdata")
	if err != nil {
		t.Fatal(err)
	}
	nomad := &Module{Path: "github.com/hashicorp/nomad", Version: "v1.6.2", Dir: filepath.Join(abs, "nomadlike")}
	self := &Module{Path: "example.com/self", Main: true, Dir: filepath.Join(abs, "mit")}
	r, err := check([]Package{
		{ImportPath: "github.com/hashicorp/nomad/plugins/device", Dir: filepath.Join(abs, "nomadlike/plugins/device"), Module: nomad},
		{ImportPath: "example.com/self", Dir: filepath.Join(abs, "mit"), Module: self},
	})
	if err != nil {
		t.Fatal(err)
	}
	path := filepath.Join(t.TempDir(), "THIRD_PARTY_LICENSES")
	if err := writeNotice(path, r); err != nil {
		t.Fatal(err)
	}
	got := string(readFixture(t, path))
	for _, want := range []string{
		"\ngithub.com/hashicorp/nomad@v1.6.2\nLicence: MPL-2.0 (plugins/LICENSE)\n",
		"Mozilla Public License, version 2.0",
	} {
		if !strings.Contains(got, want) {
			t.Errorf("THIRD_PARTY_LICENSES lacks %q", want)
		}
	}
	if strings.Contains(got, "example.com/self") || strings.Count(got, "\nLicence: ") != 1 {
		t.Errorf("THIRD_PARTY_LICENSES has the main module or more than one licence block:\n%.600s", got)
	}
}
