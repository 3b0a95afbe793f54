// Package hooks is the Manager: the only code above the zfs seam that
// changes ZFS. Each pass reads top to bottom as scan → decide → act: it
// scans the parents (one zpool process, one zfs process per parent: a
// class may live below a parent of its own, on another pool), asks the slot model
// (package model) what the scan and the watcher's latest snapshot call for,
// and runs the plans the model returns under each slot's lock. It decides
// nothing a plan could say: what to run, in which order, and what each
// command's failure means are the model's (model/plan*.go).
//
//   - config.go: the Config a Manager is built from, and NewManager.
//   - manager.go: the Manager, its Run loop, the reconcile and Settle passes,
//     the slot locks.
//   - exec.go: the executor: runs a plan's commands, and makes it again from
//     a fresh reading when a command asks (runPlan, carryOut).
//   - create.go: creating and mounting slots, four at a time, offered as they
//     come.
//   - publish.go: the published View, and the slots re-read since its scan.
//   - steps.go: one lifecycle step on one slot: re-read, re-decide, act; and
//     the questions to Nomad a step asks first (a lost or vanished holder).
//   - waits.go: the clocks of the held slots that wait on what no event
//     reports (a stopping holder the servers may forget, one only the local
//     client still runs): recheck, nextRecheck.
//   - release.go: a release, and recording a holder, as plans.
//   - drive.go: the driver of the loops that decide, act and read again (a
//     Reserve, a pull, a send): it asks a model decider for the next move
//     (read the slot, ask Nomad, look up a holder, ask the local client,
//     read the predecessor's data, list a copy, read a token, fetch, take
//     or try a lock, wait, run an act or a plan, grant, fail, done), makes
//     it, and asks again with what came of it, keeping what the loop has
//     read since its last pause and the locks it took.
//   - reserve.go: the Reserve fence on the driver (model.DecideReserveMove,
//     which asks model.DecideReserve and model.DecideInherit).
//   - sticky.go: what a Reserve reads of its predecessor's data and a send
//     of parked data (listParked: in one listing), a claim of parked data,
//     and the pass over parked data.
//   - prune.go: retained data past its retention, crash finishes, removed
//     classes; DestroyRetained for the operator's gc.
//   - inspect.go: what the operator CLI may do from another process: read
//     the slots, and record a release request with one zfs set.
//   - send.go: the sending node's side of a migration (transfer.Source) on
//     the driver (model.DecideSendMove): which snapshot of an allocation's
//     data a peer gets, under its lock.
//   - replica_send.go: the holder's answer to a replica pull (issue 30) on
//     the driver (model.DecideReplicaSendMove): the increment of a held
//     slot a replica node lacks, from the holder's bookmarks; the
//     transport's ReplicaSource.
//   - replica_nodes.go: the holder's choice of its replica nodes, which
//     its transport authorizes pulls by (transfer.ReplicaChooser).
//   - replica_pull.go: the replica node's loop under Run's context: each
//     round, the replicas this node keeps (model.ReplicaTargets,
//     model.ReplicaWork), each due one pulled or dropped on the driver
//     (model.DecideReplicaPullMove); the Cluster it reads Nomad through.
//   - migrate.go: the receiving node's side: the pulls a replacement's data
//     needs, each on the driver (model.DecidePullMove), increment after
//     increment, until the final copy is marked; the pauses a Reserve
//     ends (its copy claimable: wake) or cuts short (the next increment
//     asked for now: kick); the one call to the Fetcher.
//   - observer.go: the Observer that hears each release and scan (the
//     metrics endpoint); a no-op by default.
//   - export_sim.go: the lifecycle simulation's way in (package sim), and
//     nobody else's: its clock and order (Config.Sim).
package hooks
