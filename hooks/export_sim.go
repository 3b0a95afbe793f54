package hooks

import (
	"context"
	"time"
)

// This file is the lifecycle simulation's way into the Manager (package
// sim), and nobody else's: what the simulation replaces to run the real
// lifecycle in simulated time and in an order a seed replays exactly. The
// plugin sets none of it.

// Simulation is Config.Sim: the Manager's clock and the order of its work,
// replaced. A nil field keeps the plugin's.
type Simulation struct {
	// Now is the Manager's clock (time.Now in the plugin).
	Now func() time.Time
	// Sleep is the pause between Reserve's retries and a pull's increments
	// (a timer in the plugin).
	Sleep func(ctx context.Context, d time.Duration) error
	// Spawn starts a pull (go fn() in the plugin), so the simulation can
	// run every pull in lock step with the rest of its world. It must run
	// fn to its end, on a goroutine of its own.
	Spawn func(fn func())
	// Sequential creates or mounts one slot at a time, in plan order (four
	// at once in the plugin): a pass's zfs commands replay exactly.
	Sequential bool
}

// apply puts s into m; a nil s changes nothing.
func (s *Simulation) apply(m *Manager) {
	if s == nil {
		return
	}
	if s.Now != nil {
		m.now = s.Now
	}
	if s.Sleep != nil {
		m.sleep = s.Sleep
	}
	m.pulls.spawn = s.Spawn
	if s.Sequential {
		m.concurrency = 1
	}
}
