package hooks

import (
	"errors"
	"time"

	hclog "github.com/hashicorp/go-hclog"

	"github.com/nomad-device-zfs/nomad-device-zfs/internal/pause"
	"github.com/nomad-device-zfs/nomad-device-zfs/model"
	"github.com/nomad-device-zfs/nomad-device-zfs/transfer"
)

// Config is everything a Manager is built from. NewManager reads it once;
// nothing of it changes afterwards.
type Config struct {
	// Slots is the plugin block's slot configuration (parents, classes,
	// scan interval), checked when the plugin's configuration was
	// decoded; the Manager keeps the pointer. Required.
	Slots *model.Config
	// ZFS is the zfs seam every read and change goes through: a
	// *zfs.Client, over the real zfs or the fake. Required.
	ZFS ZFS
	// Allocs is the allocation watcher. nil: no watcher, and no lifecycle:
	// slots are created and offered, never released (the CLI's tests, a
	// plugin built without one).
	Allocs Allocs
	// Logger is the plugin's; the Manager logs as its "slots". nil: none.
	Logger hclog.Logger
	// Observer hears of each release and scan (the metrics endpoint).
	// nil: no one.
	Observer Observer
	// Fetcher is the transport's receiving side (a *transfer.Client), which
	// pulls copies of other nodes' data. nil: no copy is pulled, and a
	// class with migrate set starts its replacements empty after its
	// timeout, as when the peer cannot be reached.
	Fetcher transfer.Fetcher
	// Cluster is what a replica node reads of Nomad beyond its own node
	// (replica_pull.go), and a Reserve of a lost allocation's replacement
	// for a takeover (takeover.go). nil, or no Fetcher: this node keeps no
	// replicas; nil: no Reserve takes one over.
	Cluster Cluster
	// Sim is the lifecycle simulation's clock and order (export_sim.go);
	// nil in the plugin, which runs on the real clock.
	Sim *Simulation
}

// validate says what a Manager cannot be built without.
func (c *Config) validate() error {
	switch {
	case c.Slots == nil:
		return errors.New("hooks: Config.Slots is required")
	case c.ZFS == nil:
		return errors.New("hooks: Config.ZFS is required")
	}
	return nil
}

// NewManager returns a Manager built from c; nothing runs until Run.
func NewManager(c Config) (*Manager, error) {
	if err := c.validate(); err != nil {
		return nil, err
	}
	logger := c.Logger
	if logger == nil {
		logger = hclog.NewNullLogger()
	}
	var observer Observer = nopObserver{}
	if c.Observer != nil {
		observer = c.Observer
	}
	m := &Manager{
		cfg:         c.Slots,
		zfs:         c.ZFS,
		allocs:      c.Allocs,
		logger:      logger.Named("slots"),
		observer:    observer,
		fetcher:     c.Fetcher,
		cluster:     c.Cluster,
		now:         time.Now,
		sleep:       pause.For,
		wake:        make(chan struct{}, 1),
		updated:     make(chan struct{}),
		ended:       map[string]model.Alloc{},
		remote:      map[string]model.Alloc{},
		overrides:   map[string]*override{},
		lastProblem: map[string]string{},
		concurrency: createConcurrency,
	}
	c.Sim.apply(m)
	return m, nil
}
