package devicemanager

import (
	"context"
	"fmt"

	hclog "github.com/hashicorp/go-hclog"
	"github.com/hashicorp/nomad/helper/pluginutils/loader"
	"github.com/hashicorp/nomad/nomad/structs"
	"github.com/hashicorp/nomad/nomad/structs/config"
	"github.com/hashicorp/nomad/plugins/base"
	"github.com/hashicorp/nomad/plugins/device"
)

// Config says which plugin to host and how, the way an agent's file does.
type Config struct {
	// PluginDir holds the plugin binary, named like its plugin block.
	PluginDir string
	// Plugins are the agent file's plugin blocks.
	Plugins []*config.PluginConfig
	// Name is the device plugin to host, e.g. "nomad-device-zfs".
	Name string
	// Logger receives the plugin's log lines, re-logged as the agent does.
	Logger hclog.Logger
}

// Host runs a device plugin binary exactly as a Nomad client does: Nomad's
// own plugin loader scans PluginDir, launches only binaries that have a
// plugin block, asks PluginInfo and ConfigSchema, validates the block's
// configuration with SetConfig on a throw-away process, then dispenses the
// long-lived instance, which gets SetConfig again and then Fingerprint,
// Stats and Reserve.
type Host struct {
	inst   loader.PluginInstance
	Device device.DevicePlugin
}

// Launch starts the plugin. An error is what the agent would refuse to
// start with (bad configuration, a binary whose name matches no block, an
// unsupported API version).
func Launch(cfg *Config) (*Host, error) {
	logger := cfg.Logger
	if logger == nil {
		logger = hclog.NewNullLogger()
	}
	block := FindPlugin(cfg.Plugins, cfg.Name)
	if block == nil {
		return nil, fmt.Errorf("no plugin %q block: Nomad loads a plugin binary only when a plugin block names it", cfg.Name)
	}
	l, err := loader.NewPluginLoader(&loader.PluginLoaderConfig{
		Logger:            logger,
		PluginDir:         cfg.PluginDir,
		Configs:           cfg.Plugins,
		SupportedVersions: loader.AgentSupportedApiVersions,
	})
	if err != nil {
		return nil, fmt.Errorf("failed to create plugin loader: %w", err)
	}
	if !inCatalog(l, cfg.Name) {
		return nil, fmt.Errorf("no device plugin named %q in %s: the binary must be %s/%s and report that name",
			cfg.Name, cfg.PluginDir, cfg.PluginDir, cfg.Name)
	}
	inst, err := l.Dispense(cfg.Name, base.PluginTypeDevice, nil, logger)
	if err != nil {
		return nil, fmt.Errorf("dispensing %s: %w", cfg.Name, err)
	}
	dev, ok := inst.Plugin().(device.DevicePlugin)
	if !ok {
		inst.Kill()
		return nil, fmt.Errorf("%s is not a device plugin", cfg.Name)
	}
	// The long-lived instance is configured like the client's device
	// manager does it: the block's config through the plugin's own schema.
	spec, err := dev.ConfigSchema()
	if err == nil {
		var b []byte
		if b, err = EncodeConfig(spec, block.Config); err == nil {
			err = dev.SetConfig(&base.Config{PluginConfig: b, AgentConfig: &base.AgentConfig{}})
		}
	}
	if err != nil {
		inst.Kill()
		return nil, fmt.Errorf("configuring %s: %w", cfg.Name, err)
	}
	return &Host{inst: inst, Device: dev}, nil
}

// Close kills the plugin process.
func (h *Host) Close() { h.inst.Kill() }

// Pid is the plugin process's ID, 0 if unknown.
func (h *Host) Pid() int {
	if rc, ok := h.inst.ReattachConfig(); ok && rc != nil {
		return rc.Pid
	}
	return 0
}

// FirstFingerprint waits for the plugin's first fingerprint and converts it
// to the device resources the servers would hold for the node.
func (h *Host) FirstFingerprint(ctx context.Context) ([]*structs.NodeDeviceResource, error) {
	ch, err := h.Device.Fingerprint(ctx)
	if err != nil {
		return nil, err
	}
	select {
	case <-ctx.Done():
		return nil, fmt.Errorf("no fingerprint: %w", ctx.Err())
	case resp, ok := <-ch:
		if !ok {
			return nil, fmt.Errorf("the fingerprint stream closed: Nomad would disable the plugin")
		}
		if resp.Error != nil {
			return nil, fmt.Errorf("fingerprint error (Nomad would disable the plugin until the agent restarts): %w", resp.Error)
		}
		return NodeDevices(resp.Devices)
	}
}

// NodeDevices converts fingerprinted groups into node device resources, as
// the client's device manager does (client/devicemanager/utils.go), after
// the same validation.
func NodeDevices(groups []*device.DeviceGroup) ([]*structs.NodeDeviceResource, error) {
	out := make([]*structs.NodeDeviceResource, 0, len(groups))
	for _, g := range groups {
		if err := g.Validate(); err != nil {
			return nil, fmt.Errorf("device group %s/%s/%s is invalid (Nomad would disable the plugin): %w", g.Vendor, g.Type, g.Name, err)
		}
		r := &structs.NodeDeviceResource{Vendor: g.Vendor, Type: g.Type, Name: g.Name, Attributes: g.Attributes}
		for _, d := range g.Devices {
			nd := &structs.NodeDevice{ID: d.ID, Healthy: d.Healthy, HealthDescription: d.HealthDesc}
			if d.HwLocality != nil {
				nd.Locality = &structs.NodeDeviceLocality{PciBusID: d.HwLocality.PciBusID}
			}
			r.Instances = append(r.Instances, nd)
		}
		out = append(out, r)
	}
	return out, nil
}

func inCatalog(l *loader.PluginLoader, name string) bool {
	for _, info := range l.Catalog()[base.PluginTypeDevice] {
		if info.Name == name {
			return true
		}
	}
	return false
}
