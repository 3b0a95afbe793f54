package plugin

import (
	"context"
	"runtime"
	"time"

	"github.com/nomad-device-zfs/nomad-device-zfs/hooks"
	"github.com/nomad-device-zfs/nomad-device-zfs/internal/pause"
)

// collectAfter is how long after a new scan's view is published the
// collection runs: time for the fingerprint and Stats streams to send it
// and for Nomad's code to convert and send their responses.
const collectAfter = 2 * time.Second

// collectAfterScans runs one garbage collection a little after each scan's
// view is published (not after the slots a release re-reads, which publish
// over the same scan). A scan at 10,000 slots, and the Stats response that
// follows it, leave tens of megabytes of garbage, and then the plugin sits
// idle until the next scan: Go collects only as it allocates, so that
// garbage stayed resident for the whole scan_interval (seen in the memory
// benchmark's trace, NDZ_BENCH_RSSTRACE). One collection per scan costs a
// few milliseconds at 10,000 slots; with the soft memory limit
// (LimitMemory), the pages it frees go back to the system. Run only with
// LimitMemory: a test hosting the plugin would collect its own heap.
func collectAfterScans(ctx context.Context, mgr *hooks.Manager) {
	var last time.Time
	for {
		v, updated := mgr.View()
		if v != nil && !v.ScannedAt.Equal(last) {
			last = v.ScannedAt
			if pause.For(ctx, collectAfter) != nil {
				return
			}
			runtime.GC()
			continue // a newer view may have come meanwhile
		}
		select {
		case <-ctx.Done():
			return
		case <-updated:
		}
	}
}
