package devicemanager

import (
	"fmt"
	"os"
	"strings"

	"github.com/hashicorp/hcl"
	"github.com/hashicorp/nomad/helper/pluginutils/hclspecutils"
	"github.com/hashicorp/nomad/helper/pluginutils/hclutils"
	"github.com/hashicorp/nomad/nomad/structs/config"
	"github.com/hashicorp/nomad/plugins/shared/hclspec"
	"github.com/zclconf/go-cty/cty/msgpack"
)

// AgentFile is the part of a Nomad agent configuration file that concerns
// plugins, decoded with HCL1 exactly as the agent decodes its own file
// (command/agent/config_parse.go: hcl.Decode into a struct with these tags).
type AgentFile struct {
	PluginDir string                 `hcl:"plugin_dir"`
	DataDir   string                 `hcl:"data_dir"`
	Plugins   []*config.PluginConfig `hcl:"plugin"`
}

// ParseAgentFile reads an agent configuration file (HCL or JSON).
func ParseAgentFile(path string) (*AgentFile, error) {
	src, err := os.ReadFile(path)
	if err != nil {
		return nil, err
	}
	f, err := ParseAgentConfig(string(src))
	if err != nil {
		return nil, fmt.Errorf("%s: %w", path, err)
	}
	return f, nil
}

// ParseAgentConfig decodes agent configuration source.
func ParseAgentConfig(src string) (*AgentFile, error) {
	var f AgentFile
	if err := hcl.Decode(&f, src); err != nil {
		return nil, err
	}
	return &f, nil
}

// Plugin returns the `plugin "<name>"` block, or nil.
func (f *AgentFile) Plugin(name string) *config.PluginConfig { return FindPlugin(f.Plugins, name) }

// FindPlugin returns the `plugin "<name>"` block among blocks, or nil. The
// agent pairs a block with the binary of the same file name; this is the one
// place the plugin, the host and the CLI find it.
func FindPlugin(blocks []*config.PluginConfig, name string) *config.PluginConfig {
	for _, p := range blocks {
		if p.Name == name {
			return p
		}
	}
	return nil
}

// EncodeConfig turns a plugin block's `config` map into the bytes the plugin's
// SetConfig receives, the way the agent does it
// (helper/pluginutils/loader/init.go, validatePluginConfig): convert the
// plugin's hclspec, decode the map against it (defaults applied, unknown keys
// and missing required ones refused), then msgpack-encode the value.
func EncodeConfig(spec *hclspec.Spec, cfg map[string]interface{}) ([]byte, error) {
	dec, diags := hclspecutils.Convert(spec)
	if diags.HasErrors() {
		return nil, fmt.Errorf("failed converting config schema: %s", diags.Error())
	}
	if cfg == nil {
		cfg = map[string]interface{}{}
	}
	val, diags, errs := hclutils.ParseHclInterface(cfg, dec, nil)
	if diags.HasErrors() {
		msgs := make([]string, 0, len(errs))
		for _, e := range errs {
			msgs = append(msgs, e.Error())
		}
		return nil, fmt.Errorf("failed to parse config: %s", strings.Join(msgs, "; "))
	}
	b, err := msgpack.Marshal(val, val.Type())
	if err != nil {
		return nil, fmt.Errorf("failed to msgpack encode config: %w", err)
	}
	return b, nil
}
