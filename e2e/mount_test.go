//go:build e2e

package e2e

import (
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"
)

// TestImportWithoutMountKeepsSlotsVisible: the pool comes back without its
// datasets mounted (`zpool import -N`, as at boot before the mount step; a
// plain `zpool import` mounts them one by one and can race a scan the same
// way), then they are mounted (`zfs mount -a`). Afterwards every slot's
// mountpoint must show the slot's own dataset with its data: that path is
// what Reserve hands to the task (bind mount source, ZFS_<CLASS>_HOST_PATH).
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

	waitFor(t, 30*time.Second, "zpool export", func() (bool, string) {
		_, err := runErr("zpool", "export", p.Name)
		return err == nil, fmt.Sprint(err)
	})
	a.WaitForNodeDevice(t, "zfs", "dataset", "scratch", 0, deviceTimeout)
	run(t, "zpool", "import", "-N", "-d", p.Dir, p.Name)
	// Give the plugin's scans (every 2 s) the chance to act on the
	// unmounted slots before the mount step.
	for deadline := time.Now().Add(10 * time.Second); time.Now().Before(deadline); time.Sleep(250 * time.Millisecond) {
		if dataset(t, slots["scratch-1"].Name).Mounted {
			t.Logf("after zpool import -N, scratch-1 was mounted (by the plugin), its parents were not:\n%s", mountsOf(p.Name))
			break
		}
	}
	if out, err := runErr("zfs", "mount", "-a"); err != nil {
		t.Logf("zfs mount -a: %v %s", err, out)
	}
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
