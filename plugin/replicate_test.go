package plugin

import (
	"strings"
	"testing"
	"time"

	hclog "github.com/hashicorp/go-hclog"

	"github.com/nomad-device-zfs/nomad-device-zfs/model"
)

// TestConfigReplicateRefused: a replicate block is read through the
// agent's own decode path, each bad value named, and refused in any case
// until replicas are built; the classes without one are untouched
// (TestConfigRejects and the rest).
func TestConfigReplicateRefused(t *testing.T) {
	const notBuilt = `class "pg": replicate: not built yet`
	class := func(body string) string {
		return `config { parent = "tank/nomad"
 class "pg" { sticky = true
 migrate {}
 ` + body + ` } }`
	}
	cases := []struct {
		name string
		body string
		want []string // all must appear in the error
	}{
		{"defaults: refused, not built", class(`replicate {}`), []string{notBuilt}},
		{"every key right: refused, not built", class(`replicate {
 copies = 2
 every = "30s"
 spread = "node.datacenter" }`), []string{notBuilt}},
		{"without migrate", `config { parent = "tank/nomad"
 class "pg" { sticky = true
 replicate {} } }`, []string{`class "pg": replicate: needs a migrate block`, notBuilt}},
		{"without sticky", `config { parent = "tank/nomad"
 class "pg" { replicate {} } }`, []string{`class "pg": replicate: needs a migrate block`}},
		{"zero copies", class(`replicate { copies = 0 }`), []string{`replicate: copies = 0: must be between 1 and 5`, notBuilt}},
		{"too many copies", class(`replicate { copies = 6 }`), []string{`copies = 6`}},
		{"a fraction of a copy", class(`replicate { copies = 1.5 }`), []string{`copies = 1.5`}},
		{"every not a duration", class(`replicate { every = "often" }`), []string{`replicate: every = "often": not a duration`}},
		{"every too short", class(`replicate { every = "1s" }`), []string{`every = "1s": must be at least 10s`}},
		{"spread of a job's attribute", class(`replicate { spread = "job.name" }`),
			[]string{`replicate: spread = "job.name": must be one of node.datacenter, node.class, node.pool`}},
		{"spread of a meta key (one request per node)", class(`replicate { spread = "meta.rack" }`), []string{`spread = "meta.rack"`}},
		{"spread of an unknown node field", class(`replicate { spread = "node.cpu" }`), []string{`spread = "node.cpu"`}},
		{"spread interpolated (the agent's own variables)", class(`replicate { spread = "$${node.datacenter}" }`),
			[]string{`spread = "${node.datacenter}"`}},
		{"an unknown key", class(`replicate { bandwidth = "1G" }`), []string{`"bandwidth"`}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			p := New(hclog.NewNullLogger())
			p.newRunner = nil
			err := setConfigFromAgentHCL(t, p, tc.body)
			if err == nil {
				t.Fatalf("accepted: %+v", p.settings)
			}
			for _, w := range tc.want {
				if !strings.Contains(err.Error(), w) {
					t.Errorf("error %q does not name %s", err, w)
				}
			}
			if p.settings != nil || p.mgr != nil {
				t.Error("a rejected config left state behind")
			}
		})
	}
}

// TestReplicateValidateMaps: what a right block maps to, for the day it is
// accepted (the refusal is its last problem).
func TestReplicateValidateMaps(t *testing.T) {
	cases := []struct {
		name string
		in   ReplicateConfig
		want model.Replicate
	}{
		{"the defaults", ReplicateConfig{Copies: 1, Every: "1m"}, model.Replicate{Copies: 1, Every: time.Minute}},
		{"spread over a datacenter", ReplicateConfig{Copies: 2, Every: "10s", Spread: "node.datacenter"},
			model.Replicate{Copies: 2, Every: 10 * time.Second, Spread: "node.datacenter"}},
		{"spread over node pools", ReplicateConfig{Copies: 5, Every: "1h", Spread: "node.pool"},
			model.Replicate{Copies: 5, Every: time.Hour, Spread: "node.pool"}},
		{"spread over node classes", ReplicateConfig{Copies: 1, Every: "1m", Spread: "node.class"},
			model.Replicate{Copies: 1, Every: time.Minute, Spread: "node.class"}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			got, errs := tc.in.validate(true)
			if got != tc.want {
				t.Errorf("got %+v, want %+v", got, tc.want)
			}
			if len(errs) != 1 || !strings.HasPrefix(errs[0], "not built yet") {
				t.Errorf("problems %q, want only the refusal", errs)
			}
		})
	}
}
