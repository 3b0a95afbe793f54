// Package testrig is the scaffolding the plugin, devicemanager and cli tests
// share: the plugin binary and the operator CLI built once per test
// process, plugin dirs holding the plugin, and a fake ZFS host
// (zfs/zfstest) with the operator's parent.
package testrig

import (
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"strings"
	"sync"
	"testing"

	"github.com/nomad-device-zfs/nomad-device-zfs/zfs"
	"github.com/nomad-device-zfs/nomad-device-zfs/zfs/zfstest"
)

// BinaryName is the plugin's file name in plugin_dir, the name its block
// must carry.
const BinaryName = "nomad-device-zfs"

// CtlName is the operator CLI's file name, plugin.CtlName (the plugin's
// tests use this package: it cannot import plugin).
const CtlName = "nomad-device-zfs-ctl"

// build is one binary of cmd/, built once per test process.
type build struct {
	once sync.Once
	dir  string
	err  error
}

var pluginBuild, ctlBuild build

// path builds ./cmd/<name> the first time, as it ships (make dist,
// scripts/e2e.sh): static, no cgo. The memory bench measures the plugin's
// process; a cgo build maps libc too.
func (b *build) path(t testing.TB, name string) string {
	t.Helper()
	b.once.Do(func() {
		b.dir, b.err = os.MkdirTemp("", "ndz-testrig-")
		if b.err != nil {
			return
		}
		cmd := exec.Command("go", "build", "-trimpath", "-o", filepath.Join(b.dir, name), "./cmd/"+name)
		cmd.Dir = moduleRoot()
		cmd.Env = append(os.Environ(), "CGO_ENABLED=0")
		if out, err := cmd.CombinedOutput(); err != nil {
			b.err = fmt.Errorf("building %s: %v\n%s", name, err, out)
		}
	})
	if b.err != nil {
		t.Fatal(b.err)
	}
	return filepath.Join(b.dir, name)
}

// Binary builds the plugin (cmd/nomad-device-zfs) once per test process
// and returns its path. Tests must not change the file; PluginDir copies
// it.
func Binary(t testing.TB) string {
	t.Helper()
	return pluginBuild.path(t, BinaryName)
}

// Ctl builds the operator CLI (cmd/nomad-device-zfs-ctl) once per test
// process and returns its path. Tests must not change the file.
func Ctl(t testing.TB) string {
	t.Helper()
	return ctlBuild.path(t, CtlName)
}

// PluginDir is a fresh plugin_dir holding the plugin binary under name
// (BinaryName for the agent to load it).
func PluginDir(t testing.TB, name string) string {
	t.Helper()
	b, err := os.ReadFile(Binary(t))
	if err != nil {
		t.Fatal(err)
	}
	dir := t.TempDir()
	if err := os.WriteFile(filepath.Join(dir, name), b, 0o755); err != nil {
		t.Fatal(err)
	}
	return dir
}

// Pool is the fake pool every rig has.
const Pool = "tank"

// Parent is the operator's parent dataset FakeHost creates.
const Parent = "tank/nomad"

// FakeHost is a fake pool "tank" of size bytes, with the operator's parent
// tank/nomad when withParent, and a client over it.
func FakeHost(t testing.TB, size uint64, withParent bool) (*zfstest.Fake, *zfs.Client) {
	t.Helper()
	f := zfstest.New(zfstest.Options{MountRoot: t.TempDir()})
	if err := f.AddPool(Pool, size); err != nil {
		t.Fatal(err)
	}
	c := zfs.NewClient(f)
	if withParent {
		if err := c.Create(context.Background(), Parent, nil); err != nil {
			t.Fatal(err)
		}
	}
	return f, c
}

// UseExecutables installs f as the zfs and zpool executables (this test
// binary impersonating them: the test's TestMain must call
// zfstest.ImpersonateIfCalled) and puts them in the environment of every
// process the test starts.
func UseExecutables(t *testing.T, f *zfstest.Fake) *zfstest.Executables {
	t.Helper()
	exe := zfstest.InstallExecutables(t, f)
	for _, kv := range exe.Env {
		k, v, _ := strings.Cut(kv, "=")
		t.Setenv(k, v)
	}
	return exe
}

// SlotProp reads the plugin's user property prop (without its prefix) of
// slot id of class scratch under Parent, or "error: ..." when zfs fails.
func SlotProp(r zfs.Runner, id, prop string) string {
	out, err := r.Run(context.Background(), "zfs", "get", "-H", "-p", "-o", "value", "nomad-device-zfs:"+prop, Parent+"/scratch/"+id)
	if err != nil {
		return "error: " + err.Error()
	}
	return strings.TrimSpace(string(out))
}

// moduleRoot is the repository root: two levels above this file.
func moduleRoot() string {
	_, file, _, _ := runtime.Caller(0)
	return filepath.Dir(filepath.Dir(filepath.Dir(file)))
}

// Cleanup removes what Binary and Ctl built; TestMain calls it after m.Run.
func Cleanup() {
	for _, b := range []*build{&pluginBuild, &ctlBuild} {
		if b.dir != "" {
			os.RemoveAll(b.dir)
		}
	}
}
