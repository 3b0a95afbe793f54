// Command nomad-device-zfs is the Nomad device plugin that hands each
// allocation its own ZFS dataset: Nomad runs it from plugin_dir. It links
// the plugin and nothing else, because every client runs it for as long as
// the agent runs; the operator CLI (doctor, status, release, gc, plan) is
// nomad-device-zfs-ctl, a second binary (cmd/nomad-device-zfs-ctl).
//
// Run by a person, it prints its version, or hands its arguments to
// nomad-device-zfs-ctl: the one beside it, else the one on PATH.
package main

import (
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"syscall"

	hclog "github.com/hashicorp/go-hclog"
	"github.com/hashicorp/nomad/plugins/base"
	"github.com/hashicorp/nomad/plugins/device"

	"github.com/nomad-device-zfs/nomad-device-zfs/plugin"
)

func main() {
	if os.Getenv(base.Handshake.MagicCookieKey) != "" {
		serve()
		return
	}
	self, _ := os.Executable()
	os.Exit(person(os.Args, self, os.Stdout, os.Stderr, syscall.Exec))
}

// serve runs the device plugin as Nomad's plugins.Serve does (the logger
// Nomad expects: JSON on stderr, re-logged under the plugin's name; go-plugin
// owns stdout for its handshake), without the driver plugin code that
// plugins.Serve links. The process that manages slots returns each scan's
// garbage to the system (plugin.CollectAfterScans).
func serve() {
	plugin.CollectAfterScans = true
	logger := hclog.New(&hclog.LoggerOptions{Level: hclog.Trace, JSONFormat: true})
	device.Serve(plugin.New(logger), logger)
}

// execFunc replaces the process (syscall.Exec); it returns only on failure.
type execFunc func(path string, argv, env []string) error

// person is the binary (at self) run by a person: `version`, else exec of
// nomad-device-zfs-ctl with the same arguments. It returns the exit status
// when it does not exec.
func person(args []string, self string, stdout, stderr io.Writer, execve execFunc) int {
	if len(args) == 2 && (args[1] == "version" || args[1] == "-version" || args[1] == "--version") {
		fmt.Fprintf(stdout, "%s %s\n", plugin.Name, plugin.Version)
		return 0
	}
	ctl, err := findCtl(self)
	if err != nil {
		fmt.Fprintf(stderr, "%s %s is the device plugin that Nomad runs from plugin_dir.\n"+
			"The operator commands (doctor, status, release, gc, plan) are in %s, from the same release: "+
			"install it on PATH or beside this binary.\n(%v)\n", plugin.Name, plugin.Version, plugin.CtlName, err)
		return 2
	}
	err = execve(ctl, append([]string{ctl}, args[1:]...), os.Environ())
	fmt.Fprintf(stderr, "%s: running %s: %v\n", plugin.Name, ctl, err)
	return 1
}

// findCtl finds nomad-device-zfs-ctl beside self (its symlinks resolved,
// so a link on PATH to the plugin in plugin_dir finds the one installed
// there), else on PATH.
func findCtl(self string) (string, error) {
	if real, err := filepath.EvalSymlinks(self); err == nil {
		self = real
	}
	beside := filepath.Join(filepath.Dir(self), plugin.CtlName)
	if fi, err := os.Stat(beside); err == nil && !fi.IsDir() && fi.Mode()&0o111 != 0 {
		return beside, nil
	}
	p, err := exec.LookPath(plugin.CtlName)
	if err != nil {
		return "", fmt.Errorf("none beside %s, and %w", self, err)
	}
	return p, nil
}
