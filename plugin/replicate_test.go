package plugin

import (
	"fmt"
	"strings"
	"testing"
	"time"

	hclog "github.com/hashicorp/go-hclog"

	"github.com/nomad-device-zfs/nomad-device-zfs/internal/nomadtest"
	"github.com/nomad-device-zfs/nomad-device-zfs/model"
	"github.com/nomad-device-zfs/nomad-device-zfs/transfer/transfertest"
)

// TestConfigReplicate: a replicate block through the agent's own decode
// path: a right one accepted and mapped onto the class the replica loop
// and the takeover read (Settings.Slots), each bad value refused naming
// it; the classes without one are untouched (TestConfigRejects and the
// rest).
func TestConfigReplicate(t *testing.T) {
	pki := transfertest.NewPKI(t, nomadtest.Binary(t))
	cert, key := pki.Cert(t, "-client")
	transferBlock := fmt.Sprintf(`transfer {
 ca_file = %q
 cert_file = %q
 key_file = %q }`, pki.CAFile, cert, key)
	class := func(body string) string {
		return `config { parent = "tank/nomad"
 ` + transferBlock + `
 class "pg" { sticky = true
 migrate {}
 ` + body + ` } }`
	}
	cases := []struct {
		name    string
		body    string
		want    model.Replicate // when accepted
		wantErr []string        // all must appear in the error; none: accepted
	}{
		{name: "defaults", body: class(`replicate {}`), want: model.Replicate{Copies: 1, Every: time.Minute}},
		{name: "every key", body: class(`replicate {
 copies = 2
 every = "30s"
 spread = "node.datacenter" }`), want: model.Replicate{Copies: 2, Every: 30 * time.Second, Spread: "node.datacenter"}},
		{name: "the bounds", body: class(`replicate {
 copies = 5
 every = "10s"
 spread = "node.pool" }`), want: model.Replicate{Copies: 5, Every: 10 * time.Second, Spread: "node.pool"}},
		{name: "without migrate", body: `config { parent = "tank/nomad"
 ` + transferBlock + `
 class "pg" { sticky = true
 replicate {} } }`, wantErr: []string{`class "pg": replicate: needs a migrate block`}},
		{name: "without sticky", body: `config { parent = "tank/nomad"
 class "pg" { replicate {} } }`, wantErr: []string{`class "pg": replicate: needs a migrate block`}},
		{name: "without the transfer block", body: `config { parent = "tank/nomad"
 class "pg" { sticky = true
 migrate {}
 replicate {} } }`, wantErr: []string{`class "pg": migrate needs the plugin's transfer block`}},
		{name: "zero copies", body: class(`replicate { copies = 0 }`), wantErr: []string{`replicate: copies = 0: must be between 1 and 5`}},
		{name: "too many copies", body: class(`replicate { copies = 6 }`), wantErr: []string{`copies = 6`}},
		{name: "a fraction of a copy", body: class(`replicate { copies = 1.5 }`), wantErr: []string{`copies = 1.5`}},
		{name: "every not a duration", body: class(`replicate { every = "often" }`),
			wantErr: []string{`replicate: every = "often": not a duration`}},
		{name: "every too short", body: class(`replicate { every = "1s" }`), wantErr: []string{`every = "1s": must be at least 10s`}},
		{name: "spread of a job's attribute", body: class(`replicate { spread = "job.name" }`),
			wantErr: []string{`replicate: spread = "job.name": must be one of node.datacenter, node.class, node.pool`}},
		{name: "spread of a meta key (one request per node)", body: class(`replicate { spread = "meta.rack" }`),
			wantErr: []string{`spread = "meta.rack"`}},
		{name: "spread of an unknown node field", body: class(`replicate { spread = "node.cpu" }`), wantErr: []string{`spread = "node.cpu"`}},
		{name: "spread interpolated (the agent's own variables)", body: class(`replicate { spread = "$${node.datacenter}" }`),
			wantErr: []string{`spread = "${node.datacenter}"`}},
		{name: "an unknown key", body: class(`replicate { bandwidth = "1G" }`), wantErr: []string{`"bandwidth"`}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			p := New(hclog.NewNullLogger())
			p.newRunner = nil
			err := setConfigFromAgentHCL(t, p, tc.body)
			if len(tc.wantErr) == 0 {
				if err != nil {
					t.Fatalf("refused: %v", err)
				}
				if got := p.settings.Slots.Class("pg").Replicate; got != tc.want {
					t.Errorf("the class keeps %+v, want %+v", got, tc.want)
				}
				return
			}
			if err == nil {
				t.Fatalf("accepted: %+v", p.settings)
			}
			for _, w := range tc.wantErr {
				if !strings.Contains(err.Error(), w) {
					t.Errorf("error %q does not name %s", err, w)
				}
			}
			if strings.Contains(err.Error(), "not built") {
				t.Errorf("error %q still calls replicas not built", err)
			}
			if p.settings != nil || p.mgr != nil {
				t.Error("a rejected config left state behind")
			}
		})
	}
}

// TestReplicateValidateMaps: what a right block maps to, with no problem.
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
			if len(errs) != 0 {
				t.Errorf("problems %q, want none", errs)
			}
		})
	}
}
