package plugin

import (
	"strconv"
	"strings"
	"testing"

	hclog "github.com/hashicorp/go-hclog"
	"github.com/hashicorp/nomad/plugins/base"

	"github.com/nomad-device-zfs/nomad-device-zfs/devicemanager"
	"github.com/nomad-device-zfs/nomad-device-zfs/model"
	"github.com/nomad-device-zfs/nomad-device-zfs/zfs"
)

// FuzzConfig feeds any agent configuration text through the agent's own
// decoding path into SetConfig. Whatever it is, the plugin does not panic,
// and what it accepts holds every rule SetConfig promises.
func FuzzConfig(f *testing.F) {
	for _, h := range accepted() {
		f.Add("config {\n" + h.body + "\n}")
	}
	for _, hc := range hostileClasses[:3] {
		for _, h := range hc.cases[:3] {
			f.Add("config {\n" + h.body + "\n}")
		}
	}
	f.Add(`config { parent = "tank/nomad"
  class "pg" { slots = 2
    from_snapshot = "tank/golden/pg@seed"
    release { policy = "snapshot" retain = "24h" retain_max = 3 }
    properties { quota = "1G" recordsize = "16K" }
  }
  nomad { address = "https://127.0.0.1:4646" token_file = "/t" }
}`)
	f.Add(`config { parent = "tank/nomad"
  class "bulk" { slots = 2 }
  class "fast" { parent = "nvme/nomad" from_snapshot = "nvme/golden/fast@seed" }
}`)
	f.Fuzz(func(t *testing.T, body string) {
		file, err := devicemanager.ParseAgentConfig(`plugin "nomad-device-zfs" {` + "\n" + body + "\n}")
		if err != nil {
			return
		}
		block := file.Plugin(Name)
		if block == nil {
			return
		}
		b, err := devicemanager.EncodeConfig(configSpec, block.Config)
		if err != nil {
			return // refused by the agent's decoder
		}
		p := New(hclog.NewNullLogger())
		p.newRunner = func(*Settings) zfs.Runner { t.Fatal("SetConfig built a zfs runner"); return nil }
		if err := p.SetConfig(&base.Config{PluginConfig: b, AgentConfig: &base.AgentConfig{}}); err != nil {
			if p.settings != nil {
				t.Fatal("a refused configuration was kept")
			}
			return
		}
		s := p.settings
		if s.Slots.ScanInterval < minScanInterval || s.ZFSTimeout < minZFSTimeout || s.ReserveTimeout < minReserveTimeout {
			t.Fatalf("accepted durations below their bounds: %+v", s)
		}
		if err := validateParent(s.Slots.Parent); err != nil {
			t.Fatalf("accepted parent %q: %v", s.Slots.Parent, err)
		}
		for _, c := range s.Slots.Classes {
			if !classNameRE.MatchString(c.Name) || c.Slots < 1 || c.Slots > maxSlots || c.Release.Retain < minRetain {
				t.Fatalf("accepted class %+v", c)
			}
			for k, v := range c.Properties {
				if err := zfs.ValidateProperty(k, v); err != nil {
					t.Fatalf("accepted property %s=%q: %v", k, v, err)
				}
			}
			if err := validateParent(c.Parent); err != nil {
				t.Fatalf("accepted class %s's parent %q: %v", c.Name, c.Parent, err)
			}
			for _, p := range s.Slots.Parents() {
				if c.FromSnapshot != "" && strings.HasPrefix(c.FromSnapshot, p+"/") {
					t.Fatalf("accepted from_snapshot %q below parent %q", c.FromSnapshot, p)
				}
				for _, o := range s.Slots.Classes {
					if ds := s.Slots.ClassDataset(o.Name); p == ds || strings.HasPrefix(p, ds+"/") {
						t.Fatalf("accepted parent %q at or below class %s's dataset", p, o.Name)
					}
				}
			}
		}
	})
}

// FuzzClassProperty: a class property is either accepted, and then zfs's
// command line for it is sound, or refused by an error naming key and value.
func FuzzClassProperty(f *testing.F) {
	for _, h := range hostileClasses[3].cases {
		k, v, _ := strings.Cut(h.name, "=")
		f.Add(k, v)
	}
	f.Add("quota", "1G")
	f.Add("mountpoint", "/x")
	f.Add("nomad-device-zfs:state", "ready")
	f.Add("pbkdf2iters", "100000") // found by CI: refused alone, without naming its value
	f.Fuzz(func(t *testing.T, k, v string) {
		rel := &ReleaseConfig{Policy: "destroy", Retain: "72h", RetainMax: 10}
		c := Config{Parent: "tank/nomad", ScanInterval: "15s", ZFSTimeout: "2m", ReserveTimeout: "1m",
			Classes: map[string]*ClassConfig{"a": {Slots: 1, Properties: map[string]string{k: v}, StickyWait: "1h", Release: rel}}}
		s, err := c.validate()
		if err != nil {
			if !strings.Contains(err.Error(), k+" = "+strconv.Quote(v)) {
				t.Fatalf("error %q does not name %s = %q", err, k, v)
			}
			return
		}
		args, err := zfs.CreateArgs("tank/nomad/a/a-1", s.Slots.Classes[0].Properties)
		if err != nil {
			t.Fatalf("accepted %s=%q, but zfs.CreateArgs refuses it: %v", k, v, err)
		}
		for _, a := range args[1:] {
			if strings.HasPrefix(a, "-") && a != "-o" {
				t.Fatalf("argv %q: %q would be read as a flag", args, a)
			}
		}
	})
}

// FuzzClassName: a class name the configuration accepts becomes dataset
// names and argv that zfs reads as names, never as flags, for every slot
// and for the retained data of a released one; a refused one is named.
func FuzzClassName(f *testing.F) {
	for _, n := range []string{"scratch", "pg-seed", "-o", "a/b", "a b", "1e", "a@b", "", strings.Repeat("c", 65), "a_b", "Z"} {
		f.Add(n, "tank/nomad")
	}
	f.Fuzz(func(t *testing.T, name, parent string) {
		rel := &ReleaseConfig{Policy: "destroy", Retain: "72h", RetainMax: 10}
		c := Config{Parent: parent, ScanInterval: "15s", ZFSTimeout: "2m", ReserveTimeout: "1m",
			Classes: map[string]*ClassConfig{name: {Slots: maxSlots, StickyWait: "1h", Release: rel}}}
		if _, err := c.validate(); err != nil {
			if !strings.Contains(err.Error(), strconv.Quote(name)) && !strings.Contains(err.Error(), strconv.Quote(parent)) {
				t.Fatalf("error %q names neither %q nor %q", err, name, parent)
			}
			return
		}
		for _, n := range []int{1, maxSlots} {
			ds := parent + "/" + name + "/" + model.SlotID(name, n)
			for _, build := range []func() ([]string, error){
				func() ([]string, error) { return zfs.CreateArgs(ds, map[string]string{"quota": "1G"}) },
				func() ([]string, error) { return zfs.DestroyArgs(ds, zfs.DestroyOptions{}) },
				func() ([]string, error) { return zfs.SnapshotArgs(ds+"@pristine", nil) },
				func() ([]string, error) {
					return zfs.RenameArgs(ds, parent+"/"+name+"/retained-1cc0a14a-c239-313f-9be4-9ee3e8cc0399")
				},
			} {
				args, err := build()
				if err != nil {
					t.Fatalf("accepted class %q under %q, but its dataset %q is refused: %v", name, parent, ds, err)
				}
				for _, a := range args[1:] {
					if strings.HasPrefix(a, "-") && a != "-o" {
						t.Fatalf("argv %q: %q would be read as a flag", args, a)
					}
				}
			}
		}
	})
}
