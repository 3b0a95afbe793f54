// Command nomad-device-zfs is the Nomad device plugin that hands each
// allocation its own ZFS dataset. Nomad runs it from plugin_dir.
package main

import (
	hclog "github.com/hashicorp/go-hclog"
	"github.com/hashicorp/nomad/plugins/device"

	"github.com/nomad-device-zfs/nomad-device-zfs/plugin"
)

func main() {
	// go-plugin owns stdout for its handshake; Nomad re-logs JSON from stderr
	// under the plugin's name.
	logger := hclog.New(&hclog.LoggerOptions{Level: hclog.Trace, JSONFormat: true})
	device.Serve(plugin.New(logger), logger)
}
