//go:build bench

package plugin

import (
	hclog "github.com/hashicorp/go-hclog"

	"github.com/nomad-device-zfs/nomad-device-zfs/zfs"
)

// NewWithRunner is New with every zfs and zpool command run by r instead of
// the executables. It exists only in builds with the bench tag, for the
// churn benchmark's plugin binary (bench/churnplugin), which runs the fake
// ZFS in process; the shipped binary never has it.
func NewWithRunner(logger hclog.Logger, r zfs.Runner) *Plugin {
	p := New(logger)
	p.newRunner = func(*Settings) zfs.Runner { return r }
	return p
}
