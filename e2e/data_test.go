//go:build e2e

package e2e

import (
	"fmt"
	"os"
	"path/filepath"
	"sort"
	"strings"
	"testing"
	"time"

	gozfs "github.com/mistifyio/go-zfs/v3"

	"github.com/nomad-device-zfs/nomad-device-zfs/internal/nomadtest"
)

const scratchClass = `class "scratch" {
  slots = 2
  properties {
    quota       = "64M"
    compression = "lz4"
  }
  mount = "/data"
}`

// TestFingerprintPlaceAndWrite: the plugin creates the slots on the real
// pool and fingerprints them; the scheduler places an exec job and a
// raw_exec job, running at the same time, on the two slots; the exec task
// writes through the bind mount at /data, the raw_exec task through
// ZFS_SCRATCH_HOST_PATH; the data lands on the slots' datasets, whose used
// space grows, and each slot records its holder.
func TestFingerprintPlaceAndWrite(t *testing.T) {
	t.Parallel()
	p := newPool(t, "e2edata", false)
	a := startAgentScan(t, p, 5*time.Second, scratchClass) // no scan is waited for

	g := a.WaitForNodeDevice(t, "zfs", "dataset", "scratch", 2, deviceTimeout)
	for name, want := range map[string]string{
		"pool":        p.Name,
		"dataset":     p.Parent + "/scratch",
		"mount":       "/data",
		"slots":       "2",
		"quota":       "64 MiB",
		"compression": "lz4",
		"encryption":  "off",
		"recordsize":  "128 KiB",
	} {
		if got := g.Attributes[name]; got == nil || got.String() != want {
			t.Errorf("device attribute %s = %v, want %s", name, got, want)
		}
	}
	var ids []string
	for _, inst := range g.Instances {
		ids = append(ids, inst.ID)
	}
	sort.Strings(ids)
	if strings.Join(ids, " ") != "scratch-1 scratch-2" {
		t.Fatalf("device instances %v, want scratch-1 scratch-2", ids)
	}

	slots := checkSlots(t, p, "scratch", 2)
	for id, d := range slots {
		if d.Quota != 64<<20 || d.Compression != "lz4" {
			t.Errorf("%s: quota=%d compression=%s, want 64 MiB lz4", id, d.Quota, d.Compression)
		}
	}
	crossCheckGoZFS(t, p.Parent)

	syncPool(t, p.Name)
	before := datasets(t, p.Parent)

	// Both allocations hold their slot until the test lets them finish, so
	// they run at the same time and must get different slots.
	const mib = 1 << 20
	execJob := a.RunJob(t, batchJob("exec-write", "exec", "scratch", held(
		fmt.Sprintf("head -c %d /dev/urandom > /data/exec.bin && echo from-exec > /data/exec.txt && grep ' /data ' /proc/mounts", mib)), ""))
	rawJob := a.RunJob(t, batchJob("raw-write", "raw_exec", "scratch", held(
		fmt.Sprintf(`head -c %d /dev/urandom > "$ZFS_SCRATCH_HOST_PATH/raw.bin" && echo from-raw > "$ZFS_SCRATCH_HOST_PATH/raw.txt" && env | grep ^ZFS_SCRATCH_ | sort`, mib)), ""))
	execAlloc, execOut := waitHeld(t, a, *execJob.ID)
	rawAlloc, rawOut := waitHeld(t, a, *rawJob.ID)

	execID, rawID := deviceID(t, execAlloc), deviceID(t, rawAlloc)
	if execID == rawID {
		t.Errorf("both running allocations got slot %s", execID)
	}
	execDS, rawDS := p.Parent+"/scratch/"+execID, p.Parent+"/scratch/"+rawID

	// exec: the dataset itself is mounted at /data inside the task.
	if !strings.Contains(execOut, "body exit 0") {
		t.Errorf("exec task failed:\n%s\nstderr: %s", execOut, logOrErr(a, execAlloc.ID, "stderr"))
	}
	if want := execDS + " /data zfs "; !strings.Contains(execOut, want) {
		t.Errorf("exec task's /proc/mounts has no %q:\n%s", want, execOut)
	}
	if got, _ := readFileErr(filepath.Join("/"+execDS, "exec.txt")); got != "from-exec\n" {
		t.Errorf("%s/exec.txt = %q", execDS, got)
	}
	checkSize(t, filepath.Join("/"+execDS, "exec.bin"), mib)

	// raw_exec: no mount, the environment names the dataset.
	if !strings.Contains(rawOut, "body exit 0") {
		t.Errorf("raw_exec task failed:\n%s\nstderr: %s", rawOut, logOrErr(a, rawAlloc.ID, "stderr"))
	}
	for _, want := range []string{
		"ZFS_SCRATCH_DATASET=" + rawDS,
		"ZFS_SCRATCH_HOST_PATH=/" + rawDS,
		"ZFS_SCRATCH_ID=" + rawID,
		"ZFS_SCRATCH_MOUNT=/data",
	} {
		if !strings.Contains(rawOut, want) {
			t.Errorf("raw_exec task's environment lacks %s:\n%s", want, rawOut)
		}
	}
	if got, _ := readFileErr(filepath.Join("/"+rawDS, "raw.txt")); got != "from-raw\n" {
		t.Errorf("%s/raw.txt = %q", rawDS, got)
	}
	checkSize(t, filepath.Join("/"+rawDS, "raw.bin"), mib)

	// The space is accounted to the slots' datasets (random data does not
	// compress), the same datasets as before, now held by the allocations.
	syncPool(t, p.Name)
	after := datasets(t, p.Parent)
	for _, name := range []string{execDS, rawDS} {
		was, now := before[name], after[name]
		t.Logf("%s: used %d -> %d bytes", name, was.Used, now.Used)
		if now.Used < was.Used+mib {
			t.Errorf("%s: used %d -> %d, want it to grow by at least %d", name, was.Used, now.Used, mib)
		}
		if now.GUID != was.GUID {
			t.Errorf("%s: guid %s -> %s: the dataset was recreated", name, was.GUID, now.GUID)
		}
	}
	waitHolder(t, execDS, execAlloc.ID)
	waitHolder(t, rawDS, rawAlloc.ID)

	finish(t, a, execAlloc.ID)
	finish(t, a, rawAlloc.ID)
	waitComplete(t, a, *execJob.ID)
	waitComplete(t, a, *rawJob.ID)
}

// logOrErr is a task log for a failure message.
func logOrErr(a *nomadtest.Agent, allocID, stream string) string {
	s, err := allocLog(a, allocID, stream)
	if err != nil {
		return err.Error()
	}
	return s
}

// checkSize checks that the file at path has size bytes.
func checkSize(t testing.TB, path string, size int64) {
	t.Helper()
	fi, err := os.Stat(path)
	if err != nil {
		t.Error(err)
		return
	}
	if fi.Size() != size {
		t.Errorf("%s: %d bytes, want %d", path, fi.Size(), size)
	}
}

// crossCheckGoZFS lists the filesystems below parent with go-zfs, an
// independent implementation, and compares them with the zfs package's
// view: the same names, and the same quota and mountpoint for each.
func crossCheckGoZFS(t testing.TB, parent string) {
	t.Helper()
	theirs, err := gozfs.Filesystems(parent)
	if err != nil {
		t.Fatalf("go-zfs Filesystems(%s): %v", parent, err)
	}
	ours := datasets(t, parent)
	var theirNames []string
	for _, d := range theirs {
		theirNames = append(theirNames, d.Name)
		o, ok := ours[d.Name]
		if !ok {
			continue
		}
		if d.Quota != o.Quota || d.Mountpoint != o.Mountpoint || d.Compression != o.Compression {
			t.Errorf("%s: go-zfs quota=%d mountpoint=%s compression=%s; zfs package quota=%d mountpoint=%s compression=%s",
				d.Name, d.Quota, d.Mountpoint, d.Compression, o.Quota, o.Mountpoint, o.Compression)
		}
	}
	sort.Strings(theirNames)
	var ourNames []string
	for name, d := range ours {
		if !d.IsSnapshot() {
			ourNames = append(ourNames, name)
		}
	}
	sort.Strings(ourNames)
	if strings.Join(theirNames, " ") != strings.Join(ourNames, " ") {
		t.Errorf("go-zfs lists %v, the zfs package %v", theirNames, ourNames)
	}
	if len(theirNames) < 2 {
		t.Errorf("go-zfs lists only %v below %s", theirNames, parent)
	}
}
