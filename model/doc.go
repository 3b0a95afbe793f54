// Package model is the slot model: every rule of the slot lifecycle, in one
// place, as pure functions of what was read. It runs no process, takes no
// context and reads no clock it is not given.
//
//   - config.go: the configuration types (Config, Class) and slot naming.
//   - slot.go, props.go: a slot's state in ZFS user properties — how it is
//     read back (Owned, SlotFromRows) and every property set the lifecycle
//     writes (its state machine's edges).
//   - view.go, ensure.go: one scan → the View the plugin fingerprints, and
//     what to create or mount (PlanEnsure).
//   - holder.go: "may this holder still run?" (Judge), from Nomad's answer.
//   - lifecycle.go: what the watcher's snapshot calls for on each slot
//     (PlanSlot); reserve.go: the fence a Reserve must pass (DecideReserve).
//   - policy.go: release policies, the policy a release carries out, and
//     which retained data is due (RetainedDue).
//
// hooks.Manager is the only code that acts on these decisions; the plugin,
// the operator CLI and the tests call the same functions, so no rule is
// restated anywhere else.
package model
