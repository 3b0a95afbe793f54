package plugin

import (
	"context"
	"fmt"
	"os"
	"runtime/debug"
	"strings"
	"sync"
	"time"

	hclog "github.com/hashicorp/go-hclog"
	"github.com/hashicorp/nomad/plugins/base"
	"github.com/hashicorp/nomad/plugins/device"
	"github.com/hashicorp/nomad/plugins/shared/hclspec"

	"github.com/nomad-device-zfs/nomad-device-zfs/hooks"
	"github.com/nomad-device-zfs/nomad-device-zfs/metrics"
	"github.com/nomad-device-zfs/nomad-device-zfs/model"
	"github.com/nomad-device-zfs/nomad-device-zfs/zfs"
	"github.com/nomad-device-zfs/nomad-device-zfs/zfs/zfsexec"
)

const (
	// Name is the plugin's name. Nomad loads a plugin binary only when its
	// file name matches a `plugin "<name>"` block, and then knows it by this
	// name: keep the binary, the block and this identical.
	Name = "nomad-device-zfs"
	// CtlName is the operator CLI's binary (cmd/nomad-device-zfs-ctl): the
	// plugin's binary hands a person's commands to it.
	CtlName = Name + "-ctl"
	// Vendor and DeviceType make the device names zfs/dataset/<class>; the
	// model reads them back from Nomad's allocations.
	Vendor     = model.Vendor
	DeviceType = model.DeviceType
)

// ReadOnlyEnv, set in the plugin's environment, says it runs for the
// operator CLI's doctor, with zfs and zpool through a read-only shim (the
// variable holds the PATH behind it): it then sends and receives no data
// to or from other nodes, and serves nothing.
const ReadOnlyEnv = "NOMAD_DEVICE_ZFS_READONLY_PATH"

// Version is the plugin's version, set at build time.
var Version = "v0.1.0"

// Plugin is the Nomad device plugin. Nomad starts the binary several times:
// short-lived processes only ask for PluginInfo and ConfigSchema or check a
// config with SetConfig; the long-lived one then calls Fingerprint, Stats and
// Reserve. So SetConfig only validates, and the slot manager starts lazily
// from the first Fingerprint.
type Plugin struct {
	logger hclog.Logger
	// newRunner builds the zfs runner; tests swap it for a fake.
	newRunner func(s *Settings) zfs.Runner
	// noWatcher runs without the allocation watcher (unit tests of the
	// gRPC boundary, which have no Nomad API): slots are never released.
	noWatcher bool

	// mu guards settings, mgr and metrics.
	mu       sync.Mutex
	settings *Settings
	mgr      *hooks.Manager
	// metrics is the Prometheus endpoint's registry, nil when it is off
	// (every report to a nil one is a no-op).
	metrics *metrics.Metrics
	// runCtx outlives any one Fingerprint stream: the manager keeps slots
	// ready for the life of the process.
	runCtx    context.Context
	runCancel context.CancelFunc
	// now is the clock reserve_timeout counts on.
	now func() time.Time
}

var _ device.DevicePlugin = (*Plugin)(nil)

// New returns the plugin. Nothing touches the host until Fingerprint.
func New(logger hclog.Logger) *Plugin {
	ctx, cancel := context.WithCancel(context.Background())
	return &Plugin{
		logger: logger.Named(Name),
		newRunner: func(s *Settings) zfs.Runner {
			return &zfsexec.Runner{Logger: logger.Named("zfs"), Timeout: s.ZFSTimeout}
		},
		runCtx:    ctx,
		runCancel: cancel,
		now:       time.Now,
	}
}

// Host is what runs the plugin's slot manager when the plugin does not:
// a simulation drives the Manager (its passes, or Run) and the allocation
// watcher in simulated time, and calls the plugin's Reserve over them.
type Host struct {
	// Manager is the slot manager, built and driven by the host.
	Manager *hooks.Manager
	// Now is the clock Reserve's reserve_timeout counts on: its deadline
	// is Now() plus the timeout, so the host's time ends it.
	Now func() time.Time
}

// NewHosted returns a plugin configured with s whose slot manager is h's.
// It starts no goroutine: the host runs the Manager and the watcher.
// Shutdown ends what the plugin's methods wait on.
func NewHosted(logger hclog.Logger, s *Settings, h Host) *Plugin {
	p := New(logger)
	p.settings, p.mgr, p.now = s, h.Manager, h.Now
	return p
}

// PluginInfo identifies the plugin to Nomad.
func (p *Plugin) PluginInfo() (*base.PluginInfoResponse, error) {
	return &base.PluginInfoResponse{
		Type:              base.PluginTypeDevice,
		PluginApiVersions: []string{device.ApiVersion010},
		PluginVersion:     Version,
		Name:              Name,
	}, nil
}

// ConfigSchema returns the HCL schema of the plugin's config block.
func (p *Plugin) ConfigSchema() (*hclspec.Spec, error) { return configSpec, nil }

// SetConfig decodes and validates the configuration. It has no side effects:
// Nomad calls it on throw-away processes too. A config that is valid but
// names a pool that is not imported yet is accepted; the slots then report
// why they are unhealthy, so the agent still starts.
func (p *Plugin) SetConfig(c *base.Config) error {
	var cfg Config
	if len(c.PluginConfig) != 0 {
		if err := base.MsgPackDecode(c.PluginConfig, &cfg); err != nil {
			return fmt.Errorf("decoding nomad-device-zfs config: %w", err)
		}
	}
	s, err := cfg.validate()
	if err == nil {
		// The agent's environment is this process's: the watcher's too.
		if terr := checkTransport(s.Nomad.Config); terr != nil {
			err = fmt.Errorf("invalid nomad-device-zfs config: %w", terr)
		}
	}
	if err != nil {
		p.logger.Error("rejecting configuration", "error", err)
		return err
	}
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.mgr != nil {
		return fmt.Errorf("configuration cannot change after fingerprinting has started")
	}
	p.settings = s
	return nil
}

// manager returns the slot manager, starting it on first use.
func (p *Plugin) manager() (*hooks.Manager, *Settings, error) {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.settings == nil {
		return nil, nil, fmt.Errorf("nomad-device-zfs is not configured: SetConfig was not called")
	}
	if p.mgr == nil {
		if p.settings.MetricsAddress != "" {
			p.metrics = metrics.New(&p.settings.Slots, Version)
		}
		client := zfs.NewClient(p.metrics.Commands(p.newRunner(p.settings)))
		var allocs hooks.Allocs
		var watcher *lazyWatcher
		if !p.noWatcher {
			watcher = &lazyWatcher{}
			allocs = watcher
		}
		cfg := hooks.Config{Slots: &p.settings.Slots, ZFS: client, Allocs: allocs, Logger: p.logger}
		if p.metrics != nil {
			cfg.Observer = p.metrics
		}
		var xfer *transport
		if p.settings.Transfer != nil && watcher != nil && os.Getenv(ReadOnlyEnv) == "" {
			var err error
			if xfer, err = p.newTransport(p.settings, client); err != nil {
				p.logger.Error(transferFailed, "error", err)
			} else {
				cfg.Fetcher = xfer.client
				// The replica loop and a Reserve's takeover of a replica
				// run only for a class with a replicate block.
				cfg.Cluster = watcher
			}
		}
		mgr, err := hooks.NewManager(cfg)
		if err != nil {
			return nil, nil, err
		}
		p.mgr = mgr
		if xfer != nil {
			if err := xfer.serve(p.runCtx, p.mgr); err != nil {
				p.logger.Error(transferFailed, "error", err)
			}
		}
		if p.metrics != nil {
			p.metrics.Watch(p.mgr, watcher.latest)
			if CollectAfterScans {
				p.metrics.AfterScrape(debug.FreeOSMemory)
			}
			go func() { _ = p.metrics.Serve(p.runCtx, p.settings.MetricsAddress, p.logger.Named("metrics")) }()
		}
		go func() { _ = p.mgr.Run(p.runCtx) }()
		if watcher != nil {
			go watcher.run(p.runCtx, p.settings.Nomad, p.logger.Named("allocwatch"), p.mgr.OnAllocs, p.metrics)
		}
		if CollectAfterScans {
			go collectAfterScans(p.runCtx, p.mgr, collectAfter, debug.FreeOSMemory)
		}
		p.logger.Info("managing slots", "parents", strings.Join(p.settings.Slots.Parents(), ","), "classes", len(p.settings.Slots.Classes))
	}
	return p.mgr, p.settings, nil
}

// Shutdown stops the slot manager; used by tests and the CLI host.
func (p *Plugin) Shutdown() { p.runCancel() }
