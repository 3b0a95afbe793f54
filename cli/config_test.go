package cli

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/nomad-device-zfs/nomad-device-zfs/internal/nomadtest"
	"github.com/nomad-device-zfs/nomad-device-zfs/model"
	"github.com/nomad-device-zfs/nomad-device-zfs/transfer/transfertest"
)

func TestLoadAgentConfig(t *testing.T) {
	dir := t.TempDir()
	write := func(name, src string) string {
		p := filepath.Join(dir, name)
		must(t, os.WriteFile(p, []byte(src), 0o644))
		return p
	}
	write("10-agent.hcl", `data_dir = "/opt/nomad/data"`)
	write("20-plugin.hcl", `plugin "nomad-device-zfs" {
  config {
    parent = "tank/a"
    class "scratch" {}
  }
}`)
	// Later files win, plugin blocks merge by name, as in the agent.
	write("30-override.hcl", `plugin "nomad-device-zfs" {
  config {
    parent = "tank/b"
    class "scratch" { slots = 3 }
  }
}`)
	write("40-other.json", `{"plugin": {"raw_exec": {"config": {"enabled": true}}}}`)
	write("notes.txt", `plugin_dir = "/nowhere"`)
	write("50-edit.hcl~", `plugin_dir = "/nowhere"`)
	must(t, os.Mkdir(filepath.Join(dir, "sub.hcl"), 0o755))

	ac, err := loadAgentConfig([]string{dir})
	must(t, err)
	if len(ac.Files) != 4 || !strings.HasSuffix(ac.Files[3], "40-other.json") {
		t.Fatalf("files %q", ac.Files)
	}
	if got := ac.pluginDir(); got != "/opt/nomad/data/plugins" {
		t.Fatalf("plugin_dir %q, want data_dir/plugins", got)
	}
	_, st, err := loadSettings([]string{dir})
	must(t, err)
	want := model.Class{Name: "scratch", Slots: 3, MountPath: "/zfs/scratch",
		Release: model.Release{Policy: model.PolicyDestroy, Retain: 72 * time.Hour, RetainMax: 10}}
	if st.Slots.Parent != "tank/b" || len(st.Slots.Classes) != 1 || st.Slots.Classes[0].Name != want.Name ||
		st.Slots.Classes[0].Slots != want.Slots || st.Slots.Classes[0].MountPath != want.MountPath || st.Slots.Classes[0].Release != want.Release {
		t.Fatalf("settings %+v", st.Slots)
	}
	if st.ZFSTimeout != 2*time.Minute || st.Slots.ScanInterval != 15*time.Second {
		t.Fatalf("defaults: zfs_timeout %s, scan_interval %s", st.ZFSTimeout, st.Slots.ScanInterval)
	}
}

func TestLoadSettingsRefuses(t *testing.T) {
	cases := []struct {
		name, src, want string
	}{
		{"no block", `plugin "raw_exec" {}`, `no plugin "nomad-device-zfs" block in`},
		{"invalid config", `plugin "nomad-device-zfs" { config { parent = "/tank" class "a" {} } }`, `parent = "/tank": a dataset name, not a path`},
		{"unknown key", `plugin "nomad-device-zfs" { config { parent = "tank/a" pool = "x" class "a" {} } }`, `"pool"`},
		{"not HCL", `plugin "nomad-device-zfs" {`, `agent.hcl`},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			p := filepath.Join(t.TempDir(), "agent.hcl")
			must(t, os.WriteFile(p, []byte(tc.src), 0o644))
			if _, _, err := loadSettings([]string{p}); err == nil || !strings.Contains(err.Error(), tc.want) {
				t.Fatalf("error %v, want %q", err, tc.want)
			}
		})
	}
	t.Run("no files", func(t *testing.T) {
		if _, err := loadAgentConfig([]string{t.TempDir()}); err == nil || !strings.Contains(err.Error(), "no agent configuration files") {
			t.Fatalf("error %v", err)
		}
	})
}

// TestSettingsOfTheExamples: every example configuration maps onto
// settings the CLI can work with.
func TestSettingsOfTheExamples(t *testing.T) {
	files, err := filepath.Glob("../examples/agent*.hcl")
	if err != nil || len(files) == 0 {
		t.Fatalf("no examples: %v", err)
	}
	var tls *strings.Replacer
	for _, f := range files {
		t.Run(filepath.Base(f), func(t *testing.T) {
			src, err := os.ReadFile(f)
			must(t, err)
			if strings.Contains(string(src), "transfer {") {
				// The TLS files are a node's own: made here as an
				// operator makes them (the settings read them).
				if tls == nil {
					pki := transfertest.NewPKI(t, nomadtest.Binary(t))
					cert, key := pki.Cert(t, "-client")
					tls = strings.NewReplacer("/etc/nomad.d/tls/nomad-agent-ca.pem", pki.CAFile,
						"/etc/nomad.d/tls/global-client-nomad.pem", cert, "/etc/nomad.d/tls/global-client-nomad-key.pem", key)
				}
				f = filepath.Join(t.TempDir(), filepath.Base(f))
				must(t, os.WriteFile(f, []byte(tls.Replace(string(src))), 0o644))
			}
			_, st, err := loadSettings([]string{f})
			must(t, err)
			if st.Slots.Parent == "" || len(st.Slots.Classes) == 0 {
				t.Fatalf("settings %+v", st.Slots)
			}
			for _, c := range st.Slots.Classes {
				if c.Slots < 1 || !strings.HasPrefix(c.MountPath, "/") || c.Release.Policy == "" || c.Release.Retain <= 0 {
					t.Errorf("class %+v", c)
				}
			}
		})
	}
}

// TestPolicyExampleHasDoctorsRules: the lines doctor tells an operator to
// add are the example policy's.
func TestPolicyExampleHasDoctorsRules(t *testing.T) {
	src := readFile(t, policyExample)
	for _, rule := range []string{nodeReadRule, readJobRule, agentReadRule} {
		if !strings.Contains(src, rule) {
			t.Errorf("%s lacks %s", policyExample, rule)
		}
	}
}
