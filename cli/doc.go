// Package cli is nomad-device-zfs-ctl, the operator CLI of the
// nomad-device-zfs plugin (a binary of its own, cmd/nomad-device-zfs-ctl:
// the plugin's binary links none of this, so what every client runs stays
// small; run by a person, the plugin hands its arguments to this one):
//
//   - doctor: loads the plugin the way the agent does, from the agent's
//     configuration, and checks everything it depends on, one line per
//     check; it changes nothing (see shim.go).
//   - status: the slots by class, their holders and the retained data.
//   - release: asks the running plugin to release one slot.
//   - gc: prunes retained data past its retention.
//
// The CLI never destroys, creates or renames a slot: the long-lived plugin
// process owns them and serialises its changes with locks this process
// cannot take. `release` records its request in the slot's ZFS user
// properties with one `zfs set` (hooks.MarkReleasing) and the plugin's next
// reconcile pass carries it out; `gc` destroys only retained data, which the
// plugin prunes by the same rule (model.RetainedDue), idempotently.
//
// Output follows the nomad CLI: aligned tables and `key = value` headers for
// people, -json for machines, the API flags -address, -token, -ca-cert,
// -client-cert, -client-key and -tls-server-name.
package cli
