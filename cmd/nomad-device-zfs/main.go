// Command nomad-device-zfs is the Nomad device plugin that hands each
// allocation its own ZFS dataset, and its operator CLI. Nomad runs it from
// plugin_dir as a plugin; a person runs it for doctor, status, release and
// gc (package cli).
package main

import (
	"os"

	"github.com/nomad-device-zfs/nomad-device-zfs/cli"
	"github.com/nomad-device-zfs/nomad-device-zfs/plugin"
)

func main() {
	// The process that manages slots returns each scan's garbage to the
	// system (plugin.CollectAfterScans).
	plugin.CollectAfterScans = true
	os.Exit(cli.Main(os.Args))
}
