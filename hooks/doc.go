// Package hooks is the Manager: the only code above the zfs seam that
// changes ZFS. Each pass reads top to bottom as scan → decide → act: it
// scans the parent (one zpool and one zfs process), asks the slot model
// (package model) what the scan and the watcher's latest snapshot call for,
// and carries that out under each slot's lock.
//
//   - manager.go: the Manager, its Run loop, the reconcile and Settle passes.
//   - create.go: creating and mounting slots, four at a time, offered as they
//     come.
//   - publish.go: the published View, and the slots re-read since its scan.
//   - steps.go: one lifecycle step on one slot: re-read, re-decide, act.
//   - release.go: the release policies as zfs commands, and slot creation.
//   - reserve.go: the Reserve fence (model.DecideReserve) and its waits.
//   - prune.go: retained data past its retention.
//   - inspect.go: what the operator CLI may do from another process: read
//     the slots, and record a release request with one zfs set.
//   - observer.go: the Observer that hears each release and scan (the
//     metrics endpoint); a no-op by default.
package hooks
