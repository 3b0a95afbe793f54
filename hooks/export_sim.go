package hooks

import (
	"context"
	"time"

	"github.com/nomad-device-zfs/nomad-device-zfs/model"
)

// This file is the lifecycle simulation's way into the Manager (package
// sim), and nobody else's: what the simulation replaces to run the real
// lifecycle in simulated time and in an order a seed replays exactly
// (Simulation), and the steps of Run's loop it runs as events instead of
// calling Run (Steps). The plugin uses none of it: it builds a Manager
// without Config.Sim and calls Run. It is exported because package sim is
// not a test of this package (an export_test.go would not reach it); it
// is kept off the Manager's own methods so that those are the product's
// API alone.

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

// Steps are the steps of m's Run loop, one at a time, for the simulation:
// Run takes its periodic scan off its loop and acts on it later, and looks
// again at waiting slots on their clocks; the simulation does each as an
// event of its own, in simulated time, with other events between.
type Steps struct{ m *Manager }

// StepsOf returns m's steps.
func StepsOf(m *Manager) Steps { return Steps{m: m} }

// Scan is Run's periodic scan: the parents' pools and everything below
// each parent.
func (s Steps) Scan(ctx context.Context) model.Scan { return s.m.scan(ctx, nil) }

// ReconcileScanned is Run's pass on scan, taken by Scan at an earlier
// event: the slots re-read since it began in its rows' place.
func (s Steps) ReconcileScanned(ctx context.Context, scan model.Scan) {
	s.m.reconcileScanned(ctx, scan)
}

// NextRecheck is when Run's loop would look again at a waiting slot; false
// when none waits.
func (s Steps) NextRecheck() (time.Time, bool) { return s.m.nextRecheck() }

// Recheck is Run's look at the waiting slots whose clock is due.
func (s Steps) Recheck(ctx context.Context) { s.m.recheck(ctx) }

// Replicas is the replica loop Run starts on a goroutine of its own
// (runReplicas), for the simulation to run on one of its lock-step
// goroutines; it returns at once when this Manager keeps no replicas.
func (s Steps) Replicas(ctx context.Context) {
	if s.m.keepsReplicas() {
		s.m.runReplicas(ctx)
	}
}
