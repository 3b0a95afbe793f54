package main

import (
	"bytes"
	"errors"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/nomad-device-zfs/nomad-device-zfs/plugin"
)

// TestPerson: run by a person, the plugin binary prints its version, or
// execs nomad-device-zfs-ctl with its arguments (the one beside it, its
// symlinks resolved, before the one on PATH), or says where the commands
// are.
func TestPerson(t *testing.T) {
	// install puts an executable ctl in a fresh directory.
	install := func(t *testing.T) string {
		dir := t.TempDir()
		if err := os.WriteFile(filepath.Join(dir, plugin.CtlName), []byte("#!/bin/sh\n"), 0o755); err != nil {
			t.Fatal(err)
		}
		return dir
	}
	cases := []struct {
		name string
		// setup returns the plugin binary's path and PATH.
		setup    func(t *testing.T) (self, path string)
		args     []string
		wantCode int
		wantExec string // the ctl exec'd, relative to what setup made: "beside", "path", "" for none
		wantOut  string
		wantErr  []string
	}{
		{name: "version", args: []string{"version"},
			setup:   func(t *testing.T) (string, string) { return filepath.Join(t.TempDir(), plugin.Name), "" },
			wantOut: plugin.Name + " " + plugin.Version + "\n"},
		{name: "ctl beside the binary wins over PATH", args: []string{"status", "-config", "/etc/nomad.d"},
			setup: func(t *testing.T) (string, string) {
				return filepath.Join(install(t), plugin.Name), install(t)
			}, wantCode: 1, wantExec: "beside"},
		{name: "ctl on PATH", args: []string{"doctor"},
			setup: func(t *testing.T) (string, string) {
				return filepath.Join(t.TempDir(), plugin.Name), install(t)
			}, wantCode: 1, wantExec: "path"},
		{name: "a symlink on PATH to the plugin finds the ctl beside the plugin", args: []string{"gc"},
			setup: func(t *testing.T) (string, string) {
				real := filepath.Join(install(t), plugin.Name)
				if err := os.WriteFile(real, nil, 0o755); err != nil {
					t.Fatal(err)
				}
				link := filepath.Join(t.TempDir(), plugin.Name)
				if err := os.Symlink(real, link); err != nil {
					t.Fatal(err)
				}
				return link, ""
			}, wantCode: 1, wantExec: "beside"},
		{name: "no ctl anywhere", args: []string{"status"},
			setup:    func(t *testing.T) (string, string) { return filepath.Join(t.TempDir(), plugin.Name), t.TempDir() },
			wantCode: 2, wantErr: []string{"device plugin that Nomad runs from plugin_dir", plugin.CtlName, "doctor, status, release, gc, plan"}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			self, path := tc.setup(t)
			t.Setenv("PATH", path)
			var gotPath string
			var gotArgv []string
			execve := func(p string, argv, _ []string) error {
				gotPath, gotArgv = p, argv
				return errors.New("not here")
			}
			var out, errOut bytes.Buffer
			code := person(append([]string{self}, tc.args...), self, &out, &errOut, execve)
			if code != tc.wantCode {
				t.Errorf("exit %d, want %d; stderr:\n%s", code, tc.wantCode, errOut.String())
			}
			if out.String() != tc.wantOut {
				t.Errorf("stdout %q, want %q", out.String(), tc.wantOut)
			}
			for _, w := range tc.wantErr {
				if !strings.Contains(errOut.String(), w) {
					t.Errorf("stderr does not say %q:\n%s", w, errOut.String())
				}
			}
			switch tc.wantExec {
			case "":
				if gotPath != "" {
					t.Errorf("exec'd %s", gotPath)
				}
			case "beside":
				real, err := filepath.EvalSymlinks(self)
				if err != nil {
					real = self // no file there: setup made only the ctl
				}
				if want := filepath.Join(filepath.Dir(real), plugin.CtlName); gotPath != want {
					t.Errorf("exec'd %q, want %q", gotPath, want)
				}
			case "path":
				if want := filepath.Join(path, plugin.CtlName); gotPath != want {
					t.Errorf("exec'd %q, want %q", gotPath, want)
				}
			}
			if tc.wantExec != "" && !slices.Equal(gotArgv, append([]string{gotPath}, tc.args...)) {
				t.Errorf("argv %q, want the ctl and %q", gotArgv, tc.args)
			}
		})
	}
}
