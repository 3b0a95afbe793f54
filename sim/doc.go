// Package sim is a deterministic, seeded simulation of one Nomad client
// node running this plugin, to prove the slot lifecycle rather than test
// it case by case.
//
// A World runs the real hooks.Manager (Reconcile, or a Scan taken at one
// event and its pass, ReconcileScanned, at a later one, as Run does off its
// loop; Settle, Reserve, View, OnAllocs) and the real allocwatch.Watcher (Refresh, Lookup, RunningLocally: the
// nomad/api client, its decoding and error classification) over the
// stateful zfs fake (zfstest.Fake, real files) and a simulated Nomad HTTP
// API on a unix socket, answered from the state store of
// scheduler.Cluster: Nomad's own schedulers place the allocations. Time is
// simulated (hooks.Manager.SetClock); everything runs on one goroutine, so
// a seed replays exactly.
//
// Generate draws a schedule of events from a seed (jobs, updates, stops,
// preemption, client steps, slow kills, GC, disconnects, plugin kills,
// zfs and API faults, operator edits and CLI actions); World.Run applies
// them and checks the invariants of docs/lifecycle.md after each, from
// data: every task writes a token into the slot it was given, so sharing
// (I1) and early wipes (I2) are seen in the files, not in the code's own
// state; then the node settles and I3, I5 and liveness are checked from
// ZFS. Shrink delta-debugs a failing schedule to a short one.
//
// Run it with `go test ./sim` (flags -sim.seed, -sim.keep, -sim.schedules,
// -sim.log) or `make sim SCHEDULES=N`.
package sim
