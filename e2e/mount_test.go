//go:build e2e

package e2e

import (
	"os"
	"path/filepath"
	"sort"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/nomad-device-zfs/nomad-device-zfs/internal/nomadtest"
)

// TestImportWithoutMountKeepsSlotsVisible: the pool comes back without its
// datasets mounted (`zpool import -N`, as at boot before the mount step; a
// plain `zpool import` mounts them one by one and can race a scan the same
// way), then they are mounted (as `zfs mount -a` does, for this pool
// only). Afterwards every slot's mountpoint must show the slot's own
// dataset with its data: that path is what Reserve hands to the task (bind
// mount source, ZFS_<CLASS>_HOST_PATH).
//
// The plugin mounts top-down only: nothing below an unmounted parent, the
// class dataset before its slots. A slot mounted below an unmounted parent
// would sit on a bare directory that the parent's own mount later covers:
// `zfs get mounted` would say yes, but the path a task is handed would show
// the class dataset (found by this test on real OpenZFS, then fixed).
func TestImportWithoutMountKeepsSlotsVisible(t *testing.T) {
	t.Parallel()
	p := newPool(t, "e2emount", false)
	a := startAgent(t, p, scratchClass)
	a.WaitForNodeDevice(t, "zfs", "dataset", "scratch", 2, deviceTimeout)
	slots := checkSlots(t, p, "scratch", 2)
	for id, d := range slots {
		if err := os.WriteFile(filepath.Join(d.Mountpoint, "marker"), []byte(id+"\n"), 0o644); err != nil {
			t.Fatal(err)
		}
	}

	exportPool(t, p.Name)
	a.WaitForNodeDevice(t, "zfs", "dataset", "scratch", 0, deviceTimeout)
	run(t, "zpool", "import", "-N", "-d", p.Dir, p.Name)
	// Give the plugin's scans (every 2 s; later on a slow guest) the
	// chance to act on the unmounted slots before the mount step.
	for deadline := nomadtest.NewDeadline(10*time.Second, pace.Slowness); !deadline.Passed(); time.Sleep(pollInterval) {
		if dataset(t, slots["scratch-1"].Name).Mounted {
			t.Logf("after zpool import -N, scratch-1 was mounted (by the plugin), its parents were not:\n%s", mountsOf(p.Name))
			break
		}
	}
	mountPool(t, p.Name)
	a.WaitForNodeDevice(t, "zfs", "dataset", "scratch", 2, deviceTimeout)

	classFS := fsid(t, "/"+p.Parent+"/scratch")
	for id, d := range slots {
		now := dataset(t, d.Name)
		if !now.Mounted {
			t.Errorf("%s: not mounted", d.Name)
		}
		if fsid(t, d.Mountpoint) == classFS {
			t.Errorf("%s: %s shows the class dataset %s/scratch, not the slot (its mount is covered): a task would write there",
				id, d.Mountpoint, p.Parent)
		}
		if got, err := readFileErr(filepath.Join(d.Mountpoint, "marker")); got != id+"\n" {
			t.Errorf("%s: marker = %q (%v): the slot's data is not at its mountpoint", id, got, err)
		}
	}
	if t.Failed() {
		t.Logf("mounts of %s:\n%s", p.Name, mountsOf(p.Name))
	}
}

// mountPool mounts the pool's unmounted filesystems the way `zfs mount -a`
// does (by mountpoint, parents first), but only this pool's: `zfs mount -a`
// would also remount what the tests running beside this one have just
// unmounted (a slot the plugin is destroying: "dataset is busy").
func mountPool(t testing.TB, pool string) {
	t.Helper()
	type fs struct{ name, mountpoint string }
	var all []fs
	for _, l := range strings.Split(strings.TrimSpace(run(t, "zfs", "list", "-H", "-r", "-t", "filesystem",
		"-o", "name,mountpoint,canmount,mounted", pool)), "\n") {
		f := strings.Split(l, "\t")
		if len(f) == 4 && f[2] == "on" && f[3] == "no" && strings.HasPrefix(f[1], "/") {
			all = append(all, fs{f[0], f[1]})
		}
	}
	sort.Slice(all, func(i, j int) bool { return all[i].mountpoint < all[j].mountpoint })
	for _, d := range all {
		if out, err := runErr("zfs", "mount", d.name); err != nil {
			t.Logf("zfs mount %s: %v %s", d.name, err, out)
		}
	}
}

// fsid identifies the file system path is on.
func fsid(t testing.TB, path string) [2]int32 {
	t.Helper()
	var st syscall.Statfs_t
	if err := syscall.Statfs(path, &st); err != nil {
		t.Fatalf("statfs %s: %v", path, err)
	}
	return st.Fsid.X__val
}

// mountsOf returns the /proc/mounts lines of pool's datasets.
func mountsOf(pool string) string {
	b, _ := os.ReadFile("/proc/mounts")
	var out []string
	for _, l := range strings.Split(string(b), "\n") {
		if strings.HasPrefix(l, pool+" ") || strings.HasPrefix(l, pool+"/") {
			out = append(out, l)
		}
	}
	return strings.Join(out, "\n")
}
