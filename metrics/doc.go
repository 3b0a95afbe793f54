// Package metrics is the plugin's opt-in Prometheus endpoint: what an
// operator alerts on and graphs, under Nomad's own label names
// (`namespace`, `job`, `task_group`, `alloc_id`) so that a slot's series
// join with the client's `nomad_client_allocs_*`, plus `class`, `slot` and
// `pool`.
//
// Two kinds of numbers, kept apart on purpose:
//
//   - State, read when Prometheus asks (collect.go): slots by class and
//     state, each held slot's sizes with its holder's labels, retained and
//     parked data, the pool's health. It comes from the Manager's published
//     View and the watcher's latest snapshot, both already in memory, so the
//     plugin keeps no gauge of its own: a slot released is a series gone at
//     the next scrape, and the series stay as many as the slots.
//   - Events, counted as they happen (metrics.go): releases and their
//     latency (hooks.Observer), Reserve calls, every zfs and zpool command
//     (runner.go, around zfs.Runner), scans, the watcher's failed
//     blocking queries and index resets (allocwatch.Observer), and the
//     bytes of the transfer's streams, sent and received, by kind
//     (transfer.Observer). Every label value comes from a small fixed set
//     or from the configuration.
//
// The registry is the plugin's own, not Prometheus's global one, and the
// endpoint (server.go) listens only in the process that runs the slots,
// from the plugin's first fingerprint on, as the watcher starts.
package metrics
