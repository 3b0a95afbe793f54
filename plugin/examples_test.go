package plugin

import (
	"path/filepath"
	"testing"

	hclog "github.com/hashicorp/go-hclog"
	"github.com/hashicorp/nomad/plugins/base"

	"github.com/nomad-device-zfs/nomad-device-zfs/devicemanager"
)

// TestExampleAgentConfigsAreValid decodes every agent configuration in
// examples/ through the agent's path and the plugin's SetConfig.
func TestExampleAgentConfigsAreValid(t *testing.T) {
	files, err := filepath.Glob("../examples/agent*.hcl")
	if err != nil || len(files) == 0 {
		t.Fatalf("no example agent configs: %v", err)
	}
	for _, f := range files {
		t.Run(filepath.Base(f), func(t *testing.T) {
			af, err := devicemanager.ParseAgentFile(f)
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
