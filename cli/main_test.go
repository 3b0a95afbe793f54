package cli

import (
	"bufio"
	"bytes"
	"context"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/hashicorp/nomad/plugins/base"

	"github.com/nomad-device-zfs/nomad-device-zfs/plugin"
	"github.com/nomad-device-zfs/nomad-device-zfs/zfs/zfstest"
)

// TestBinaryDispatch runs the built binaries the ways they are started:
// the CLI by a person, as doctor's zfs shim, and by Nomad by mistake (the
// go-plugin cookie); the plugin by a person, handing its arguments to the
// CLI beside it.
func TestBinaryDispatch(t *testing.T) {
	bin := ctlBinary(t)
	f, _ := fakeHost(t)
	exe := zfstest.InstallExecutables(t, f)
	shim := filepath.Join(t.TempDir(), "zfs")
	must(t, os.Symlink(bin, shim))
	shimEnv := append(exe.Environ(), shimEnv+"="+exe.BinDir)
	// The plugin in plugin_dir with the CLI beside it.
	plug := filepath.Join(pluginDir(t, plugin.Name), plugin.Name)
	must(t, os.Symlink(bin, filepath.Join(filepath.Dir(plug), Name)))
	cookie := append(exe.Environ(), base.Handshake.MagicCookieKey+"="+base.Handshake.MagicCookieValue)

	cases := []struct {
		name     string
		path     string
		args     []string
		env      []string
		wantCode int
		want     string // regular expression over stdout+stderr
	}{
		{"no arguments: usage", bin, nil, nil, 1, `(?m)^Usage: nomad-device-zfs-ctl <command> \[options\]$`},
		{"-h: usage", bin, []string{"-h"}, nil, 0, `(?m)^    release +Ask the running plugin to release a slot`},
		{"unknown command", bin, []string{"destroy"}, nil, 1, `unknown command "destroy"`},
		{"command help", bin, []string{"gc", "-h"}, nil, 0, `(?m)^  -dry-run$`},
		{"bad flag", bin, []string{"status", "-bogus"}, nil, 1, `flag provided but not defined: -bogus`},
		{"version", bin, []string{"version"}, nil, 0, `^nomad-device-zfs v\d+\.\d+\.\d+\n$`},
		{"shim runs a read", shim, []string{"list", "-H", "-o", "name", "tank"}, shimEnv, 0, `^tank\n$`},
		{"shim refuses a change", shim, []string{"destroy", "-r", "tank/nomad"}, shimEnv, 1,
			`^nomad-device-zfs-ctl doctor: read-only: not running "zfs destroy -r tank/nomad"\n$`},
		{"started by Nomad: not the plugin", bin, nil, cookie, 1,
			`^nomad-device-zfs-ctl is the operator CLI of nomad-device-zfs, not the plugin: put the nomad-device-zfs binary in plugin_dir\n$`},
		{"the plugin's own version", plug, []string{"version"}, nil, 0, `^nomad-device-zfs v\d+\.\d+\.\d+\n$`},
		{"the plugin hands a command to the CLI beside it", plug, []string{"gc", "-h"}, nil, 0, `(?m)^Usage: nomad-device-zfs-ctl gc \[options\]`},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			cmd := exec.Command(tc.path, tc.args...)
			cmd.Env = tc.env
			if cmd.Env == nil {
				cmd.Env = exe.Environ()
			}
			var out bytes.Buffer
			cmd.Stdout, cmd.Stderr = &out, &out
			err := cmd.Run()
			code := 0
			if ee, ok := err.(*exec.ExitError); ok {
				code = ee.ExitCode()
			} else if err != nil {
				t.Fatal(err)
			}
			if code != tc.wantCode || !regexp.MustCompile(tc.want).MatchString(out.String()) {
				t.Fatalf("exit %d, want %d matching %s:\n%s", code, tc.wantCode, tc.want, out.String())
			}
		})
	}
	if _, err := f.Run(t.Context(), "zfs", "list", "tank/nomad"); err != nil {
		t.Fatalf("the shim let a destroy through: %v", err)
	}

	t.Run("the magic cookie makes the plugin serve", func(t *testing.T) {
		ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		defer cancel()
		cmd := exec.CommandContext(ctx, plug, "status") // arguments do not matter to Nomad's launch
		cmd.Env = append(os.Environ(), base.Handshake.MagicCookieKey+"="+base.Handshake.MagicCookieValue,
			"PLUGIN_PROTOCOL_VERSIONS=2", "PLUGIN_MIN_PORT=10000", "PLUGIN_MAX_PORT=25000")
		stdout, err := cmd.StdoutPipe()
		must(t, err)
		must(t, cmd.Start())
		defer func() { _ = cmd.Process.Kill(); _ = cmd.Wait() }()
		line, err := bufio.NewReader(stdout).ReadString('\n')
		if err != nil || !regexp.MustCompile(`^1\|2\|(unix|tcp)\|[^|]+\|grpc`).MatchString(line) {
			t.Fatalf("no go-plugin handshake on stdout: %q %v", line, err)
		}
		if strings.Contains(line, "Usage") {
			t.Fatal("printed the CLI usage")
		}
	})
}
