package plugin

import (
	"context"
	"time"

	"github.com/nomad-device-zfs/nomad-device-zfs/internal/pause"
	"github.com/nomad-device-zfs/nomad-device-zfs/model"
)

// viewSource publishes views: hooks.Manager.
type viewSource interface {
	View() (*model.View, <-chan struct{})
}

// collectAfter is how long after a new scan's view is published the
// collection runs: time for the fingerprint and Stats streams to send it
// and for Nomad's code to convert and send their responses.
const collectAfter = 2 * time.Second

// collectAfterScans runs one garbage collection, and returns the free
// pages to the system, a little after each scan's view is published (not
// after the slots a release re-reads, which publish over the same scan):
// see CollectAfterScans. A collection alone leaves the pages to Go's
// background scavenger; debug.FreeOSMemory returns them all. Once per scan
// it costs a few milliseconds at 10,000 slots, and the next scan's page
// faults.
func collectAfterScans(ctx context.Context, views viewSource, after time.Duration, collect func()) {
	var last time.Time
	for {
		v, updated := views.View()
		if v != nil && !v.ScannedAt.Equal(last) {
			last = v.ScannedAt
			if pause.For(ctx, after) != nil {
				return
			}
			collect()
			continue // a newer view may have come meanwhile
		}
		select {
		case <-ctx.Done():
			return
		case <-updated:
		}
	}
}
