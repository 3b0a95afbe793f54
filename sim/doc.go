// Package sim is a deterministic, seeded simulation of one Nomad client
// node running this plugin, to prove the slot lifecycle rather than test
// it case by case.
//
// A World runs what the plugin runs: the real hooks.Manager (Reconcile, or
// a Scan taken at one event and its pass, ReconcileScanned, at a later
// one, as Run does off its loop: hooks.Steps; Settle on the watcher's news), the real
// allocwatch.Watcher's Run (its blocking loop and index rules, on a
// goroutine in lock step with the world: watch.go) with Refresh, Lookup
// and RunningLocally, and the device plugin's Reserve (plugin.NewHosted:
// its reserve_timeout on the plugin's clock), over the stateful zfs fake
// (zfstest.Fake, real files) and a simulated Nomad HTTP API on a unix
// socket, answered from the state store of scheduler.Cluster, blocking
// queries included: Nomad's own schedulers place the allocations. Time is
// simulated; one goroutine runs at a time, so a seed replays exactly.
//
// Generate draws a schedule of events from a seed (jobs, updates, stops
// and purges that the servers forget while their tasks still run,
// preemption, client steps, slow kills, GC, disconnects and reconnects,
// plugin kills, zfs and API faults, strangers below the plugin's data,
// the servers' state rebuilt or restored, operator edits and CLI
// actions); World.Run applies them and checks the invariants of
// docs/lifecycle.md after each, from data: every task writes a token into
// the slot it was given, so sharing (I1), early wipes (I2) and a sticky
// replacement's hand-over (I6) are seen in the files, not in the code's
// own state; retained data is followed by its GUID (kept until its
// expiry, gone a pass after), foreign data by name and GUID (I5). Then the
// node settles and I3 (nothing leaked, nothing nobody owns), I5 and
// liveness are checked from ZFS; while it settles, a slot held by a holder
// that has ended on the node must be ready within readyWithin (a release
// needs no news of other allocations). The Manager's clocks for what no
// event reports (hooks.Steps.Recheck) run as Run's timer would, in
// simulated time. Shrink delta-debugs a failing schedule to
// a short one.
//
// XWorld (x*.go) is two such nodes whose sticky data follows its
// allocation from one to the other, with transfer faults (streams cut,
// senders killed, lying, hostile and stalling senders, forged requests),
// checked against X1-X10 (docs/lifecycle.md): TestTwoNodes. In a third of
// its worlds the class keeps replicas (issue 30): a third node, each
// Manager's replica loop over the same transport, nodes lost for good,
// groups with stop_after_client_disconnect whose replacements take their
// replicas over, and XR1-XR8 (xreplica.go, xloss.go, xrcheck.go,
// xtakeover.go).
//
// Run it with `go test ./sim` (flags -sim.seed, -sim.keep, -sim.schedules,
// -sim.log) or `make sim SCHEDULES=N`.
package sim
