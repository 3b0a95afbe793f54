package cli

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"syscall"

	"github.com/nomad-device-zfs/nomad-device-zfs/plugin"
)

// doctor hosts the plugin binary to show what Nomad would see, while the
// agent's own plugin may be running on the same datasets. The hosted copy
// must change nothing: it holds none of the running plugin's slot locks, and
// its reconcile pass would otherwise create, mount, release and prune —
// with a configuration the operator may just have edited (a lower
// retain_max would destroy retained data at once). So doctor starts it with
// a PATH whose zfs and zpool are this binary acting as a read-only shim: it
// runs the real command for subcommands that only read and refuses every
// other one. It works with any version of the plugin binary, since every
// one of them finds zfs on PATH.

// shimEnv holds the PATH behind the shim; set, it makes this binary the shim
// when it runs as zfs or zpool.
const shimEnv = plugin.ReadOnlyEnv

// shimMarker starts the shim's refusal, so doctor can tell it from a zfs
// failure in the hosted plugin's health reasons.
const shimMarker = "nomad-device-zfs-ctl doctor: read-only"

// readOnly are the subcommands the shim lets through.
var readOnly = map[string]map[string]bool{
	"zfs":   {"list": true, "get": true, "holds": true, "version": true},
	"zpool": {"list": true, "get": true, "status": true, "version": true},
}

// ShimIfCalled makes a test binary that doctor uses as its shim act as one;
// call it first in TestMain, before zfstest.ImpersonateIfCalled.
func ShimIfCalled() {
	if code, ok := runShim(os.Args); ok {
		os.Exit(code)
	}
}

// runShim acts as the read-only zfs or zpool when this process was started
// as one with shimEnv set. ok is false otherwise.
func runShim(args []string) (code int, ok bool) {
	realPath, set := os.LookupEnv(shimEnv)
	name := filepath.Base(args[0])
	if !set || (name != "zfs" && name != "zpool") {
		return 0, false
	}
	if len(args) < 2 || !readOnly[name][args[1]] {
		fmt.Fprintf(os.Stderr, "%s: not running %q\n", shimMarker, strings.Join(append([]string{name}, args[1:]...), " "))
		return 1, true
	}
	exe, err := lookPathIn(name, realPath)
	if err != nil {
		fmt.Fprintf(os.Stderr, "%s: command not found\n", name)
		return 127, true
	}
	os.Unsetenv(shimEnv)
	os.Setenv("PATH", realPath)
	err = syscall.Exec(exe, append([]string{exe}, args[1:]...), os.Environ())
	fmt.Fprintf(os.Stderr, "%s: %v\n", name, err)
	return 126, true
}

// lookPathIn finds an executable in a PATH-style list.
func lookPathIn(name, path string) (string, error) {
	for _, dir := range filepath.SplitList(path) {
		if dir == "" {
			dir = "."
		}
		p := filepath.Join(dir, name)
		if fi, err := os.Stat(p); err == nil && !fi.IsDir() && fi.Mode()&0o111 != 0 {
			return p, nil
		}
	}
	return "", errors.New("not found")
}

// readOnlyZFS puts the shim first on this process's PATH, so processes
// started from now on (the plugin doctor hosts) run zfs and zpool through
// it. restore puts PATH back; the shim directory stays until cleanup, while
// the hosted plugin may still run commands.
func readOnlyZFS() (restore, cleanup func(), err error) {
	self, err := os.Executable()
	if err != nil {
		return nil, nil, err
	}
	dir, err := os.MkdirTemp("", "nomad-device-zfs-doctor-")
	if err != nil {
		return nil, nil, err
	}
	cleanup = func() { os.RemoveAll(dir) }
	for _, name := range []string{"zfs", "zpool"} {
		if err := os.Symlink(self, filepath.Join(dir, name)); err != nil {
			cleanup()
			return nil, nil, err
		}
	}
	oldPath, hadPath := os.LookupEnv("PATH")
	os.Setenv(shimEnv, oldPath)
	os.Setenv("PATH", dir+string(os.PathListSeparator)+oldPath)
	restore = func() {
		os.Unsetenv(shimEnv)
		if hadPath {
			os.Setenv("PATH", oldPath)
		} else {
			os.Unsetenv("PATH")
		}
	}
	return restore, cleanup, nil
}
