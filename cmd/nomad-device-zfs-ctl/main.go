// Command nomad-device-zfs-ctl is nomad-device-zfs's operator CLI: doctor,
// status, release, gc and plan (package cli). The plugin itself is the
// nomad-device-zfs binary (cmd/nomad-device-zfs), which Nomad runs from
// plugin_dir; this one links Nomad's scheduler, its plugin loader and its
// job parser, which the plugin has no use for.
package main

import (
	"os"

	"github.com/nomad-device-zfs/nomad-device-zfs/cli"
)

func main() {
	os.Exit(cli.Main(os.Args))
}
