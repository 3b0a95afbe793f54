package cli

import (
	"fmt"
	"os"
	"path/filepath"
	"sort"
	"strings"
	"time"

	hclog "github.com/hashicorp/go-hclog"
	"github.com/hashicorp/nomad/nomad/structs/config"
	"github.com/hashicorp/nomad/plugins/base"

	"github.com/nomad-device-zfs/nomad-device-zfs/allocwatch"
	"github.com/nomad-device-zfs/nomad-device-zfs/devicemanager"
	"github.com/nomad-device-zfs/nomad-device-zfs/model"
	"github.com/nomad-device-zfs/nomad-device-zfs/plugin"
)

// defaultConfigPath is where packaged Nomad agents keep their configuration
// (the systemd unit runs `nomad agent -config /etc/nomad.d`).
const defaultConfigPath = "/etc/nomad.d"

// agentConfig is what the CLI needs from the agent's configuration files,
// merged as the agent merges them.
type agentConfig struct {
	// Files are the files read, in the order the agent reads them.
	Files     []string
	PluginDir string
	DataDir   string
	Plugins   []*config.PluginConfig
}

// loadAgentConfig reads the -config paths like `nomad agent -config`: a
// file, or a directory whose *.hcl and *.json files are read in name order;
// later values win, plugin blocks merge by name.
func loadAgentConfig(paths []string) (*agentConfig, error) {
	if len(paths) == 0 {
		paths = []string{defaultConfigPath}
	}
	ac := &agentConfig{}
	for _, p := range paths {
		files, err := configFiles(p)
		if err != nil {
			return nil, err
		}
		for _, f := range files {
			af, err := devicemanager.ParseAgentFile(f)
			if err != nil {
				return nil, err
			}
			ac.Files = append(ac.Files, f)
			if af.PluginDir != "" {
				ac.PluginDir = af.PluginDir
			}
			if af.DataDir != "" {
				ac.DataDir = af.DataDir
			}
			if len(af.Plugins) > 0 {
				ac.Plugins = config.PluginConfigSetMerge(ac.Plugins, af.Plugins)
			}
		}
	}
	if len(ac.Files) == 0 {
		return nil, fmt.Errorf("no agent configuration files (*.hcl, *.json) in %s", strings.Join(paths, ", "))
	}
	return ac, nil
}

// configFiles expands one -config path as the agent does (LoadConfigDir).
func configFiles(path string) ([]string, error) {
	fi, err := os.Stat(path)
	if err != nil {
		return nil, err
	}
	if !fi.IsDir() {
		return []string{path}, nil
	}
	entries, err := os.ReadDir(path)
	if err != nil {
		return nil, err
	}
	var files []string
	for _, e := range entries {
		name := e.Name()
		if e.IsDir() || !(strings.HasSuffix(name, ".hcl") || strings.HasSuffix(name, ".json")) || isTemporaryFile(name) {
			continue
		}
		files = append(files, filepath.Join(path, name))
	}
	sort.Strings(files)
	return files, nil
}

// isTemporaryFile matches editors' temporary files, which the agent skips.
func isTemporaryFile(name string) bool {
	return strings.HasSuffix(name, "~") || strings.HasPrefix(name, ".#") ||
		(strings.HasPrefix(name, "#") && strings.HasSuffix(name, "#"))
}

// pluginDir is the agent's plugin_dir: set, or <data_dir>/plugins.
func (ac *agentConfig) pluginDir() string {
	switch {
	case ac.PluginDir != "":
		return ac.PluginDir
	case ac.DataDir != "":
		return filepath.Join(ac.DataDir, "plugins")
	}
	return ""
}

// block returns the plugin's block, or nil.
func (ac *agentConfig) block() *config.PluginConfig {
	return devicemanager.FindPlugin(ac.Plugins, plugin.Name)
}

func (ac *agentConfig) files() string { return strings.Join(ac.Files, ", ") }

// settings is the plugin's validated configuration in the types the CLI
// works with.
type settings struct {
	Slots      model.Config
	Nomad      allocwatch.Config
	ZFSTimeout time.Duration
}

// decodeBlock validates a plugin block exactly as the agent does (the
// plugin's own schema, then its SetConfig, whose error text is the agent's)
// and maps it onto the hooks and allocwatch configurations.
func decodeBlock(block *config.PluginConfig) (*settings, error) {
	p := plugin.New(hclog.NewNullLogger())
	defer p.Shutdown()
	spec, err := p.ConfigSchema()
	if err != nil {
		return nil, err
	}
	b, err := devicemanager.EncodeConfig(spec, block.Config)
	if err != nil {
		return nil, err
	}
	if err := p.SetConfig(&base.Config{PluginConfig: b}); err != nil {
		return nil, err
	}
	var c plugin.Config
	if err := base.MsgPackDecode(b, &c); err != nil {
		return nil, err
	}
	return settingsFrom(&c)
}

// settingsFrom maps a configuration that SetConfig accepted, with the
// plugin's own mapping.
func settingsFrom(c *plugin.Config) (*settings, error) {
	r, err := c.Resolve()
	if err != nil {
		return nil, err
	}
	return &settings{Slots: r.Slots, Nomad: r.Nomad, ZFSTimeout: r.ZFSTimeout}, nil
}

// loadSettings reads the agent configuration and the plugin's block, for
// the commands that need a valid one.
func loadSettings(paths []string) (*agentConfig, *settings, error) {
	ac, err := loadAgentConfig(paths)
	if err != nil {
		return nil, nil, err
	}
	block := ac.block()
	if block == nil {
		return nil, nil, fmt.Errorf("no plugin %q block in %s", plugin.Name, ac.files())
	}
	s, err := decodeBlock(block)
	if err != nil {
		return nil, nil, fmt.Errorf("plugin %q in %s: %w", plugin.Name, ac.files(), err)
	}
	return ac, s, nil
}
