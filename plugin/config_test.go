package plugin

import (
	"reflect"
	"strings"
	"testing"
	"time"

	hclog "github.com/hashicorp/go-hclog"
	"github.com/hashicorp/nomad/plugins/base"

	"github.com/nomad-device-zfs/nomad-device-zfs/devicemanager"
	"github.com/nomad-device-zfs/nomad-device-zfs/model"
)

// setConfigFromAgentHCL runs a plugin block through the agent's own path:
// HCL1 agent file → plugin config map → hclspec decode → msgpack → SetConfig.
func setConfigFromAgentHCL(t *testing.T, p *Plugin, body string) error {
	t.Helper()
	f, err := devicemanager.ParseAgentConfig(`plugin "nomad-device-zfs" {` + "\n" + body + "\n}")
	if err != nil {
		t.Fatalf("agent config does not parse: %v", err)
	}
	block := f.Plugin(Name)
	if block == nil {
		t.Fatal("no plugin block")
	}
	b, err := devicemanager.EncodeConfig(configSpec, block.Config)
	if err != nil {
		return err
	}
	return p.SetConfig(&base.Config{PluginConfig: b, AgentConfig: &base.AgentConfig{}})
}

func TestConfigDecodes(t *testing.T) {
	p := New(hclog.NewNullLogger())
	err := setConfigFromAgentHCL(t, p, `
  config {
    parent = "tank/nomad"
    scan_interval = "5s"
    class "scratch" {
      slots      = 4
      properties = { quota = "1G", compression = "lz4" }
      mount      = "/data"
    }
    class "fast" {
      parent = "nvme/nomad"
      from_snapshot = "nvme/golden/fast@seed"
    }
    class "pg-seed" {
      from_snapshot = "tank/golden/pg@seed"
      sticky        = true
      sticky_wait   = "30m"
      release {
        policy     = "rollback"
        on_failure = "snapshot"
        retain     = "24h"
      }
    }
    nomad {
      address    = "https://127.0.0.1:4646"
      token_file = "/etc/nomad.d/ndz.token"
    }
  }`)
	if err != nil {
		t.Fatal(err)
	}
	got := p.settings.Slots
	want := model.Config{
		Parent:       "tank/nomad",
		ScanInterval: 5 * time.Second,
		Classes: []model.Class{
			{Name: "fast", Parent: "nvme/nomad", Slots: 1, MountPath: "/zfs/fast", FromSnapshot: "nvme/golden/fast@seed", StickyWait: time.Hour,
				Release: model.Release{Policy: model.PolicyDestroy, Retain: 72 * time.Hour, RetainMax: 10}},
			{Name: "pg-seed", Parent: "tank/nomad", Slots: 1, MountPath: "/zfs/pg-seed", FromSnapshot: "tank/golden/pg@seed", Sticky: true, StickyWait: 30 * time.Minute,
				Release: model.Release{Policy: model.PolicyRollback, OnFailure: model.PolicySnapshot, Retain: 24 * time.Hour, RetainMax: 10}},
			{Name: "scratch", Parent: "tank/nomad", Slots: 4, MountPath: "/data", Properties: map[string]string{"quota": "1G", "compression": "lz4"}, StickyWait: time.Hour,
				Release: model.Release{Policy: model.PolicyDestroy, Retain: 72 * time.Hour, RetainMax: 10}},
		},
	}
	if !reflect.DeepEqual(got, want) {
		t.Fatalf("got  %+v\nwant %+v", got, want)
	}
	if p.settings.ZFSTimeout != 2*time.Minute || p.settings.ReserveTimeout != time.Minute {
		t.Errorf("defaults: zfs_timeout %v, reserve_timeout %v", p.settings.ZFSTimeout, p.settings.ReserveTimeout)
	}
	if n := p.settings.Nomad; n.Address != "https://127.0.0.1:4646" || n.TokenFile != "/etc/nomad.d/ndz.token" {
		t.Errorf("nomad block: %+v", n)
	}
}

func TestConfigNeedBytesFromReservation(t *testing.T) {
	p := New(hclog.NewNullLogger())
	err := setConfigFromAgentHCL(t, p, `config {
    parent = "tank/nomad"
    class "db" { properties = { refreservation = "2G", reservation = "1G" } }
  }`)
	if err != nil {
		t.Fatal(err)
	}
	if got := p.settings.Slots.Classes[0].NeedBytes; got != 2<<30 {
		t.Fatalf("NeedBytes = %d, want 2 GiB", got)
	}
}

// TestConfigRejects covers the bad input an operator can write. Every error
// names the key and the value, and SetConfig touches nothing (no runner is
// even built before Fingerprint).
func TestConfigRejects(t *testing.T) {
	cases := []struct {
		name string
		body string
		want []string // all must appear in the error
	}{
		{"empty block", `config {}`, []string{`"parent"`, "required"}},
		{"no config block", ``, []string{`"parent"`, "required"}},
		{"empty parent", `config { parent = "" 
 class "a" {} }`, []string{"parent", "required"}},
		{"absolute path as parent", `config { parent = "/tank/nomad" 
 class "a" {} }`, []string{`parent = "/tank/nomad"`, "not a path"}},
		{"relative parent", `config { parent = "./nomad" 
 class "a" {} }`, []string{`parent = "./nomad"`, "relative"}},
		{"parent with snapshot", `config { parent = "tank/nomad@s" 
 class "a" {} }`, []string{`parent = "tank/nomad@s"`, "snapshot"}},
		{"parent component like a flag", `config { parent = "tank/-r" 
 class "a" {} }`, []string{`parent = "tank/-r"`, `"-r"`}},
		{"parent with space", `config { parent = "tank/my data" 
 class "a" {} }`, []string{`parent = "tank/my data"`}},
		{"unknown top-level key", `config { parent = "tank/nomad" 
 pool = "tank" 
 class "a" {} }`, []string{`"pool"`, "No argument"}},
		{"unknown class key", `config { parent = "tank/nomad" 
 class "a" { size = "1G" } }`, []string{`"size"`, "No argument"}},
		{"no class", `config { parent = "tank/nomad" }`, []string{"no class block"}},
		{"zero slots", `config { parent = "tank/nomad" 
 class "a" { slots = 0 } }`, []string{`class "a"`, "slots = 0"}},
		{"negative slots", `config { parent = "tank/nomad" 
 class "a" { slots = -2 } }`, []string{`class "a"`, "slots = -2"}},
		{"too many slots", `config { parent = "tank/nomad" 
 class "a" { slots = 5000 } }`, []string{"slots = 5000"}},
		{"invalid compression", `config { parent = "tank/nomad" 
 class "a" { properties = { compression = "bogus" } } }`, []string{`class "a"`, `compression = "bogus"`}},
		{"invalid quota", `config { parent = "tank/nomad" 
 class "a" { properties = { quota = "12QB" } } }`, []string{`quota = "12QB"`}},
		{"unknown property", `config { parent = "tank/nomad" 
 class "a" { properties = { bogusprop = "1" } } }`, []string{`bogusprop = "1"`, "invalid property"}},
		{"reserved mountpoint", `config { parent = "tank/nomad" 
 class "a" { properties = { mountpoint = "/x" } } }`, []string{`mountpoint = "/x"`, "set by the plugin"}},
		{"plugin's own property", `config { parent = "tank/nomad" 
 class "a" { properties = { "nomad-device-zfs:state" = "ready" } } }`, []string{`nomad-device-zfs:state = "ready"`}},
		{"class with slash", `config { parent = "tank/nomad" 
 class "a/b" {} }`, []string{`class "a/b"`, "invalid name"}},
		{"class with comma", `config { parent = "tank/nomad" 
 class "a,b" {} }`, []string{`class "a,b"`, "invalid name"}},
		{"class with space", `config { parent = "tank/nomad" 
 class "a b" {} }`, []string{`class "a b"`, "invalid name"}},
		{"class with leading dash", `config { parent = "tank/nomad" 
 class "-o" {} }`, []string{`class "-o"`, "invalid name"}},
		{"class starting with digit", `config { parent = "tank/nomad" 
 class "1e" {} }`, []string{`class "1e"`, "invalid name"}},
		{"classes colliding in env", `config { parent = "tank/nomad" 
 class "a-b" {} 
 class "a_b" {} }`, []string{`class "a_b"`, "collide"}},
		{"relative mount", `config { parent = "tank/nomad" 
 class "a" { mount = "data" } }`, []string{`mount = "data"`}},
		{"mount with a newline", `config { parent = "tank/nomad" 
 class "a" { mount = "/da\nta" } }`, []string{`class "a"`, `mount = "/da\nta"`, "newline"}},
		{"mount with a tab", `config { parent = "tank/nomad" 
 class "a" { mount = "/da\tta" } }`, []string{`class "a"`, `mount = "/da\tta"`, "control character"}},
		{"mount with a comma", `config { parent = "tank/nomad" 
 class "a" { mount = "/da,ta" } }`, []string{`class "a"`, `mount = "/da,ta"`, "comma"}},
		{"shared mount", `config { parent = "tank/nomad" 
 class "a" { mount = "/d" } 
 class "b" { mount = "/d" } }`, []string{`mount = "/d"`, `class "a"`}},
		{"unknown release policy", `config { parent = "tank/nomad" 
 class "a" { release { policy = "shred" } } }`, []string{`class "a"`, `policy = "shred"`, "destroy, rollback or snapshot"}},
		{"unknown on_failure policy", `config { parent = "tank/nomad" 
 class "a" { release { on_failure = "keep" } } }`, []string{`on_failure = "keep"`}},
		{"negative retain_max", `config { parent = "tank/nomad" 
 class "a" { release { retain_max = -1 } } }`, []string{`retain_max = -1`}},
		{"bad retain", `config { parent = "tank/nomad" 
 class "a" { release { retain = "3 days" } } }`, []string{`retain = "3 days"`}},
		{"sticky_wait too short", `config { parent = "tank/nomad"
 class "a" { sticky = true
 sticky_wait = "10s" } }`, []string{`sticky_wait = "10s"`, "at least 1m"}},
		{"migrate without sticky", `config { parent = "tank/nomad"
 class "a" { migrate {} } }`, []string{`class "a"`, "migrate: needs sticky = true", "migrate needs the plugin's transfer block"}},
		{"migrate on_timeout unknown", `config { parent = "tank/nomad"
 class "a" { sticky = true
 migrate { on_timeout = "wait" } } }`, []string{`on_timeout = "wait"`, `"fail"`, `"start_empty"`}},
		{"migrate timeout not a duration", `config { parent = "tank/nomad"
 class "a" { sticky = true
 migrate { timeout = "soon" } } }`, []string{`timeout = "soon"`}},
		{"sticky not a bool", `config { parent = "tank/nomad"
 class "a" { sticky = "yes please" } }`, []string{`sticky`}},
		{"from_snapshot not a snapshot", `config { parent = "tank/nomad" 
 class "a" { from_snapshot = "tank/golden" } }`, []string{`from_snapshot = "tank/golden"`, "not a snapshot name"}},
		{"from_snapshot below the parent", `config { parent = "tank/nomad" 
 class "a" { from_snapshot = "tank/nomad/golden@s" } }`, []string{`class "a": from_snapshot = "tank/nomad/golden@s"`, `below parent "tank/nomad"`}},
		{"from_snapshot in another pool than the class's parent", `config { parent = "tank/nomad" 
 class "a" { 
 parent = "nvme/nomad" 
 from_snapshot = "tank/golden@s" } }`, []string{`class "a": from_snapshot = "tank/golden@s"`, `pool "tank"`, `"nvme/nomad" in pool "nvme"`}},
		{"from_snapshot below another class's parent", `config { parent = "tank/nomad" 
 class "a" { from_snapshot = "tank/fast/golden@s" } 
 class "b" { parent = "tank/fast" } }`, []string{`class "a": from_snapshot = "tank/fast/golden@s"`, `below parent "tank/fast"`}},
		{"class parent a path", `config { parent = "tank/nomad" 
 class "a" { parent = "/nvme/nomad" } }`, []string{`class "a": parent = "/nvme/nomad"`, "not a path"}},
		{"class parent with snapshot", `config { parent = "tank/nomad" 
 class "a" { parent = "nvme@s" } }`, []string{`class "a": parent = "nvme@s"`, "snapshot"}},
		{"class parent like a flag", `config { parent = "tank/nomad" 
 class "a" { parent = "-nvme" } }`, []string{`class "a": parent = "-nvme"`}},
		{"class parent not a string", `config { parent = "tank/nomad" 
 class "a" { parent = ["nvme"] } }`, []string{`parent`}},
		{"class parent is another class's dataset", `config { parent = "tank/nomad" 
 class "a" {} 
 class "b" { parent = "tank/nomad/a" } }`, []string{`class "b": parent = "tank/nomad/a"`, `class "a"'s dataset`}},
		{"class parent below another class's dataset", `config { parent = "tank/nomad" 
 class "a" { parent = "nvme/x" } 
 class "b" { parent = "nvme/x/a/y" } }`, []string{`class "b": parent = "nvme/x/a/y"`, `below class "a"'s dataset nvme/x/a`}},
		{"block parent below a class's dataset", `config { parent = "tank/x/big/inner" 
 class "big" { parent = "tank/x" } }`, []string{`parent = "tank/x/big/inner"`, `below class "big"'s dataset tank/x/big`}},
		{"token and token_file", `config { parent = "tank/nomad" 
 nomad { 
 token = "x" 
 token_file = "/t" 
 } 
 class "a" {} }`, []string{"token and token_file", `"/t"`}},
		{"unknown nomad key", `config { parent = "tank/nomad" 
 nomad { addr = "x" } 
 class "a" {} }`, []string{`"addr"`}},
		{"bad scan interval", `config { parent = "tank/nomad" 
 scan_interval = "often" 
 class "a" {} }`, []string{`scan_interval = "often"`}},
		{"negative timeout", `config { parent = "tank/nomad" 
 zfs_timeout = "-1s" 
 class "a" {} }`, []string{`zfs_timeout = "-1s"`, "positive"}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			p := New(hclog.NewNullLogger())
			built := false
			p.newRunner = nil // SetConfig must not need one
			err := setConfigFromAgentHCL(t, p, tc.body)
			if err == nil {
				t.Fatalf("accepted: %+v", p.settings)
			}
			for _, w := range tc.want {
				if !strings.Contains(err.Error(), w) {
					t.Errorf("error %q does not name %s", err, w)
				}
			}
			if p.settings != nil || p.mgr != nil || built {
				t.Error("a rejected config left state behind")
			}
		})
	}
}

// TestConfigClassesDoNotShareDecodedValues: the msgpack decoder reuses one
// value for every entry of the class map; each class must still get its own
// release policy and its own properties (found by the e2e suite: every
// class got the release policy of the class sorted last).
func TestConfigClassesDoNotShareDecodedValues(t *testing.T) {
	p := New(hclog.NewNullLogger())
	err := setConfigFromAgentHCL(t, p, `config {
    parent = "tank/nomad"
    class "keep" {
      properties { quota = "1G" }
      release { policy = "snapshot" }
    }
    class "wipe" {
      properties { compression = "lz4" }
      release { policy = "rollback" }
    }
    class "zplain" {}
  }`)
	if err != nil {
		t.Fatal(err)
	}
	got := map[string]model.Class{}
	for _, c := range p.settings.Slots.Classes {
		got[c.Name] = c
	}
	want := map[string]struct {
		policy model.Policy
		props  map[string]string
	}{
		"keep":   {model.PolicySnapshot, map[string]string{"quota": "1G"}},
		"zplain": {model.PolicyDestroy, nil},
		"wipe":   {model.PolicyRollback, map[string]string{"compression": "lz4"}},
	}
	for name, w := range want {
		c := got[name]
		if c.Release.Policy != w.policy {
			t.Errorf("class %s: release policy %q, want %q", name, c.Release.Policy, w.policy)
		}
		if len(c.Properties) != len(w.props) {
			t.Errorf("class %s: properties %v, want %v", name, c.Properties, w.props)
		}
		for k, v := range w.props {
			if c.Properties[k] != v {
				t.Errorf("class %s: properties %v, want %v", name, c.Properties, w.props)
			}
		}
	}
}

// TestConfigPlaintextTokenFromEnvironment: the agent's NOMAD_ADDR and
// NOMAD_TOKEN count as the watcher will use them; a block address over
// them decides. Not parallel: it sets the environment.
func TestConfigPlaintextTokenFromEnvironment(t *testing.T) {
	t.Setenv("NOMAD_ADDR", "http://10.1.2.3:4646")
	t.Setenv("NOMAD_TOKEN", "secret")
	cases := []struct {
		name, nomad string
		wantErr     string
	}{
		{name: "environment only", wantErr: `nomad.address = "http://10.1.2.3:4646"`},
		{name: "block address https", nomad: `nomad { address = "https://10.1.2.3:4646" }`},
		{name: "block address loopback", nomad: `nomad { address = "http://127.0.0.1:4646" }`},
		{name: "allowed", nomad: `nomad { allow_plaintext_token = true }`},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			p := New(hclog.NewNullLogger())
			err := setConfigFromAgentHCL(t, p, "config {\nparent = \"tank/nomad\"\n"+tc.nomad+"\nclass \"a\" {}\n}")

			switch {
			case tc.wantErr == "" && err != nil:
				t.Fatalf("refused: %v", err)
			case tc.wantErr != "" && (err == nil || !strings.Contains(err.Error(), tc.wantErr)):
				t.Fatalf("error %v, want one naming %s", err, tc.wantErr)
			}
		})
	}
	// The operator CLI resolves the same block in its own shell, whose
	// NOMAD_* are not the agent's: Resolve does not count them.
	rel := &ReleaseConfig{Policy: "destroy", Retain: "72h", RetainMax: 10}
	c := Config{Parent: "tank/nomad", ScanInterval: "15s", ZFSTimeout: "2m", ReserveTimeout: "1m",
		Classes: map[string]*ClassConfig{"a": {Slots: 1, StickyWait: "1h", Release: rel}}}
	if _, err := c.Resolve(); err != nil {
		t.Errorf("Resolve counted the shell's environment: %v", err)
	}
}

// TestConfigClassParents: the layouts of several parents an operator may
// write are accepted, each class below its own parent (the block's when it
// names none), each parent scanned once.
func TestConfigClassParents(t *testing.T) {
	cases := []struct {
		name    string
		classes string
		// want is each class's parent, by class; parents Config.Parents.
		want    map[string]string
		parents []string
	}{
		{name: "one parent", classes: `class "a" {}`,
			want: map[string]string{"a": "tank/nomad"}, parents: []string{"tank/nomad"}},
		{name: "a class on another pool", classes: `class "bulk" {} 
 class "fast" { parent = "nvme/nomad" }`,
			want: map[string]string{"bulk": "tank/nomad", "fast": "nvme/nomad"}, parents: []string{"tank/nomad", "nvme/nomad"}},
		{name: "two classes share a parent", classes: `class "a" { parent = "nvme/nomad" } 
 class "b" { parent = "nvme/nomad" }`,
			want: map[string]string{"a": "nvme/nomad", "b": "nvme/nomad"}, parents: []string{"tank/nomad", "nvme/nomad"}},
		{name: "the block's parent named", classes: `class "a" { parent = "tank/nomad" }`,
			want: map[string]string{"a": "tank/nomad"}, parents: []string{"tank/nomad"}},
		{name: "a parent below the block's, beside its classes", classes: `class "a" {} 
 class "b" { parent = "tank/nomad/big" }`,
			want: map[string]string{"a": "tank/nomad", "b": "tank/nomad/big"}, parents: []string{"tank/nomad", "tank/nomad/big"}},
		{name: "a parent above the block's", classes: `class "a" {} 
 class "b" { parent = "tank" }`,
			want: map[string]string{"a": "tank/nomad", "b": "tank"}, parents: []string{"tank/nomad", "tank"}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			p := New(hclog.NewNullLogger())
			if err := setConfigFromAgentHCL(t, p, "config {\nparent = \"tank/nomad\"\n"+tc.classes+"\n}"); err != nil {
				t.Fatal(err)
			}
			cfg := &p.settings.Slots
			got := map[string]string{}
			for _, c := range cfg.Classes {
				got[c.Name] = c.Parent
				if ds := cfg.ClassDataset(c.Name); ds != c.Parent+"/"+c.Name {
					t.Errorf("class %s: dataset %s", c.Name, ds)
				}
			}
			if !reflect.DeepEqual(got, tc.want) {
				t.Errorf("parents %v, want %v", got, tc.want)
			}
			if ps := cfg.Parents(); !reflect.DeepEqual(ps, tc.parents) {
				t.Errorf("Parents() = %v, want %v", ps, tc.parents)
			}
		})
	}
}
