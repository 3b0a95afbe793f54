// Package plugin is the Nomad device plugin: the gRPC face of the slot
// manager (package hooks). Nomad starts the binary several times; the
// short-lived processes only ask for PluginInfo and ConfigSchema, or check a
// configuration with SetConfig, so SetConfig only validates and the manager
// starts from the long-lived process's first Fingerprint. Nothing here
// decides a slot's lifecycle: every call asks the manager, which asks the
// model.
//
//   - device.go: the Plugin, its identity (Name, Version), SetConfig, and the
//     manager started on first use.
//   - config.go: the hclspec (every key and default, in one place) and the
//     Config it decodes into.
//   - validate.go: the checks of a decoded Config, each error naming its key
//     and value, and the model.Config and watcher config it resolves to.
//   - fingerprint.go: one device group per class, zfs/dataset/<class>, sent
//     only when it changed; a zfs failure marks instances unhealthy, never
//     an error (Nomad would disable the plugin).
//   - stats.go: per-slot usage from the manager's latest scan, sent when a
//     newer one is published.
//   - reserve.go: Reserve: the manager's grants as mounts and environment
//     variables.
//   - watch.go: the allocation watcher (package allocwatch) as the
//     manager's source, refusing every question until it runs.
//   - memory.go, collect.go: returning a scan's garbage to the system after
//     each scan, in the plugin process only.
//   - runner_bench.go: New over another zfs runner, for the bench build.
package plugin
