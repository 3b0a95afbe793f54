package plugin

import (
	"fmt"
	"strings"
	"testing"

	hclog "github.com/hashicorp/go-hclog"

	"github.com/nomad-device-zfs/nomad-device-zfs/internal/nomadtest"
	"github.com/nomad-device-zfs/nomad-device-zfs/transfer"
	"github.com/nomad-device-zfs/nomad-device-zfs/transfer/transfertest"
)

// TestConfigTransfer: the transfer block through the agent's own decode
// path, with certificates made as an operator makes them. Its files are
// checked when the configuration is set: a missing or wrong one is an
// error naming the key and its value.
func TestConfigTransfer(t *testing.T) {
	pki := transfertest.NewPKI(t, nomadtest.Binary(t))
	cert, key := pki.Cert(t, "-client")
	cli, cliKey := pki.Cert(t, "-cli")
	block := func(extra string, files ...string) string {
		return fmt.Sprintf(`config {
    parent = "tank/nomad"
    class "pg" { sticky = true }
    transfer {
      ca_file   = %q
      cert_file = %q
      key_file  = %q
      %s
    }
  }`, files[0], files[1], files[2], extra)
	}
	cases := []struct {
		name    string
		body    string
		want    *transfer.Config
		wantErr []string
	}{
		{name: "absent: no transfers", body: `config {
    parent = "tank/nomad"
    class "pg" {}
  }`},
		{name: "defaults", body: block("", pki.CAFile, cert, key),
			want: &transfer.Config{Address: "0.0.0.0:4680", CAFile: pki.CAFile, CertFile: cert, KeyFile: key, Region: "global"}},
		{name: "address and region", body: block(`address = "10.0.0.5:4700"`+"\n"+`region = "global"`, pki.CAFile, cert, key),
			want: &transfer.Config{Address: "10.0.0.5:4700", CAFile: pki.CAFile, CertFile: cert, KeyFile: key, Region: "global"}},
		{name: "a missing file", body: block("", "/etc/nomad.d/tls/nope.pem", cert, key),
			wantErr: []string{`transfer.ca_file = "/etc/nomad.d/tls/nope.pem"`, "no such file or directory"}},
		{name: "the CLI's certificate", body: block("", pki.CAFile, cli, cliKey),
			wantErr: []string{`transfer.cert_file = "` + cli + `"`, "cli.global.nomad"}},
		{name: "a key that is not the certificate's", body: block("", pki.CAFile, cert, cliKey),
			wantErr: []string{`transfer.cert_file = "` + cert + `", key_file = "` + cliKey + `"`}},
		{name: "a bad address", body: block(`address = "4680"`, pki.CAFile, cert, key),
			wantErr: []string{`transfer.address = "4680"`, "host:port"}},
		{name: "no ca_file", body: `config {
    parent = "tank/nomad"
    class "pg" {}
    transfer {
      cert_file = "a.pem"
      key_file  = "a-key.pem"
    }
  }`, wantErr: []string{`"ca_file"`, "required"}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			p := New(hclog.NewNullLogger())
			err := setConfigFromAgentHCL(t, p, tc.body)
			if len(tc.wantErr) > 0 {
				if err == nil {
					t.Fatal("accepted")
				}
				for _, w := range tc.wantErr {
					if !strings.Contains(err.Error(), w) {
						t.Errorf("error %q does not say %q", err, w)
					}
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			got := p.settings.Transfer
			if (got == nil) != (tc.want == nil) || got != nil && *got != *tc.want {
				t.Fatalf("transfer settings %+v, want %+v", got, tc.want)
			}
		})
	}
}
