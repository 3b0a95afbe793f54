// Package model is the slot model: every rule of the slot lifecycle, in one
// place, as pure functions of what was read. It runs no process, takes no
// context, reads no clock it is not given, and links no process, network
// or Nomad package (scripts/check-imports.sh holds it to that).
//
//   - config.go: the configuration types (Config, Class) and slot naming.
//   - alloc.go: what the lifecycle knows of Nomad's allocations (Alloc,
//     Device, Snapshot), as the watcher converts them.
//   - slot.go, props.go: a slot's state in ZFS user properties — how it is
//     read back (SlotFromListing) and every property set the lifecycle writes
//     (its state machine's edges).
//   - info.go: what a view keeps of a scanned row.
//   - ownership.go: what is the plugin's, and what keeps it from acting.
//   - view.go: the View the plugin fingerprints (each parent's pool and
//     problem, each class below its parent) and a slot's health (Health);
//     build.go: one scan → the View (BuildView); ensure.go: what to create
//     or mount (PlanEnsure).
//   - holder.go: "may this holder still run?" (Judge), from Nomad's answer.
//   - lifecycle.go: what the watcher's snapshot calls for on each slot
//     (PlanSlot); reserve.go: the fence a Reserve must pass (DecideReserve).
//   - policy.go: release policies, the policy a release carries out, and
//     which retained data is due (RetainedDue).
//   - sticky.go: sticky classes' rules: who parks, who inherits, what
//     becomes of parked data (Parks, Predecessor, DecideInherit,
//     PlanParked).
//   - plan.go: a Plan, the zfs commands of one step with what each failure
//     means; plan_release.go, plan_sticky.go, plan_aside.go: the planners
//     (a release by each policy, a park, a claim, a record, a tidy, a
//     prune, a finish after a crash, a removed class).
//   - migrate.go: data that follows its allocation to another node: the
//     migration snapshots, what a sender sends (DecideSend), a copy's
//     states and the plans that take, receive, mark and drop it.
//   - replica.go, replica_place.go, replica_takeover.go,
//     replica_send.go, replica_pull.go: copies kept on other nodes while
//     a holder runs (issue 30; the replicate block still refused): a
//     replica's name, marks and fate (DecideReplica), which nodes keep one
//     (ReplicaNodes), when a replacement of a holder lost with its node
//     may claim one (DecideTakeover), what the holder sends for a pull,
//     from bookmarks (DecideReplicaSend), and the replica node's rounds:
//     which replicas it keeps (ReplicaTargets, ReplicaWork) and one pull
//     by the migration's receive rules (DecideReplicaPullMove).
//
// hooks.Manager is the only code that acts on these decisions; the plugin,
// the operator CLI and the tests call the same functions, so no rule is
// restated anywhere else.
package model
