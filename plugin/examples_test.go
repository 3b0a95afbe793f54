package plugin

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	hclog "github.com/hashicorp/go-hclog"
	"github.com/hashicorp/nomad/plugins/base"

	"github.com/nomad-device-zfs/nomad-device-zfs/devicemanager"
	"github.com/nomad-device-zfs/nomad-device-zfs/internal/nomadtest"
	"github.com/nomad-device-zfs/nomad-device-zfs/transfer/transfertest"
)

// The TLS files the examples' transfer blocks name.
const (
	exampleCA   = "/etc/nomad.d/tls/nomad-agent-ca.pem"
	exampleCert = "/etc/nomad.d/tls/global-client-nomad.pem"
	exampleKey  = "/etc/nomad.d/tls/global-client-nomad-key.pem"
)

// TestExampleAgentConfigsAreValid decodes every agent configuration in
// examples/ through the agent's path and the plugin's SetConfig. The TLS
// files an example's transfer block names are a node's own: they are
// replaced by files made as an operator makes them (SetConfig reads them).
func TestExampleAgentConfigsAreValid(t *testing.T) {
	files, err := filepath.Glob("../examples/agent*.hcl")
	if err != nil || len(files) == 0 {
		t.Fatalf("no example agent configs: %v", err)
	}
	var tls *strings.Replacer
	for _, f := range files {
		t.Run(filepath.Base(f), func(t *testing.T) {
			src, err := os.ReadFile(f)
			if err != nil {
				t.Fatal(err)
			}
			text := string(src)
			if strings.Contains(text, "transfer {") {
				if tls == nil {
					pki := transfertest.NewPKI(t, nomadtest.Binary(t))
					cert, key := pki.Cert(t, "-client")
					tls = strings.NewReplacer(exampleCA, pki.CAFile, exampleCert, cert, exampleKey, key)
				}
				text = tls.Replace(text)
			}
			af, err := devicemanager.ParseAgentConfig(text)
			if err != nil {
				t.Fatal(err)
			}
			block := af.Plugin(Name)
			if block == nil {
				t.Fatalf("no plugin %q block", Name)
			}
			b, err := devicemanager.EncodeConfig(configSpec, block.Config)
			if err != nil {
				t.Fatal(err)
			}
			if err := New(hclog.NewNullLogger()).SetConfig(&base.Config{PluginConfig: b}); err != nil {
				t.Fatal(err)
			}
		})
	}
}
