//go:build e2e

package e2e

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/hashicorp/nomad/api"
)

// TestQuotaEnforcedInTask: a class's refquota is set on its slots, shows as
// a device attribute a job can constrain on, and is enforced by ZFS inside
// the task: writing 32 MiB of incompressible data into a 16 MiB slot fails
// in the task with EDQUOT (or ENOSPC), the task exits non-zero, and the
// dataset stays within its quota. (busybox dd, not head: head reports any
// write error as "standard output: I/O error", without the errno.)
//
// The next holder is unaffected: after the failed allocation's release, a
// second allocation on the same (only) slot gets a clean dataset with the
// whole refquota available, and writes 12 MiB into it (zeros: compression
// is off, so they take their space, and are cheaper to make than random
// data in the emulated guest).
func TestQuotaEnforcedInTask(t *testing.T) {
	t.Parallel()
	const (
		mib      = 1 << 20
		refquota = 16 * mib
		write    = 32 * mib
		slack    = mib
	)
	p := newPool(t, "e2equota", false)
	a := startAgentScan(t, p, releaseScan, `class "small" {
  slots = 1
  properties {
    refquota    = "16M"
    compression = "off"
  }
  mount = "/q"
}`)
	g := a.WaitForNodeDevice(t, "zfs", "dataset", "small", 1, deviceTimeout)
	if got := g.Attributes["refquota"]; got == nil || got.String() != "16 MiB" {
		t.Errorf("device attribute refquota = %v, want 16 MiB", got)
	}
	if got := g.Attributes["quota"]; got != nil {
		t.Errorf("device attribute quota = %v, want none", got)
	}
	slot := checkSlots(t, p, "small", 1)["small-1"]
	gen := generation(mustLookup(t, slot.Name))
	if slot.Refquota != refquota || slot.Compression != "off" {
		t.Fatalf("%s: refquota=%d compression=%s, want %d off", slot.Name, slot.Refquota, slot.Compression, refquota)
	}

	job := batchJob("fill", "exec", "small", held(`dd if=/dev/urandom of=/q/big bs=1048576 count=32`), noRetry)
	// Placed only where the slot's refquota is at most 16 MiB.
	job = strings.Replace(job, `device "zfs/dataset/small" {}`, `device "zfs/dataset/small" {
          constraint {
            attribute = "${device.attr.refquota}"
            operator  = "<="
            value     = "16 MiB"
          }
        }`, 1)
	alloc, out := startHeld(t, a, job)
	if deviceID(t, alloc) != "small-1" {
		t.Fatalf("placed on %s", deviceID(t, alloc))
	}
	if strings.Contains(out, "body exit 0") {
		t.Errorf("writing %d bytes into a %d byte refquota succeeded: %s", write, refquota, out)
	}
	stderr := logOrErr(a, alloc.ID, "stderr")
	t.Logf("task: %s; stderr: %s", strings.TrimSpace(out), strings.TrimSpace(stderr))
	if !strings.Contains(stderr, "quota exceeded") && !strings.Contains(stderr, "No space left on device") {
		t.Errorf("task stderr does not report EDQUOT or ENOSPC:\n%s", stderr)
	}

	// While the task holds the slot: the file stopped short, the dataset
	// stayed within its quota.
	path := filepath.Join("/"+slot.Name, "big")
	fi, err := os.Stat(path)
	if err != nil {
		t.Fatal(err)
	}
	syncPool(t, p.Name)
	d := dataset(t, slot.Name)
	t.Logf("%s: file %d bytes, referenced %d, used %d, refquota %d", slot.Name, fi.Size(), d.Referenced, d.Used, d.Refquota)
	if fi.Size() >= write || fi.Size() == 0 {
		t.Errorf("%s is %d bytes: the write was not stopped by the quota", path, fi.Size())
	}
	// ZFS enforces a quota on its estimate of the data in flight plus
	// what is on disk; metadata can overshoot by a few blocks (38 KiB in
	// one run here), never by a write's worth.
	if fi.Size() > refquota || d.Referenced > refquota+slack {
		t.Errorf("%s: file %d bytes, referenced %d: beyond the refquota %d (+%d)", slot.Name, fi.Size(), d.Referenced, refquota, slack)
	}
	if d.Referenced < refquota/2 {
		t.Errorf("%s references only %d bytes: the task did not fill it", slot.Name, d.Referenced)
	}

	// The task's failure is the allocation's.
	finish(t, a, alloc.ID)
	alloc = waitEnded(t, a, "fill", api.AllocClientStatusFailed)
	exit := -1
	for _, ev := range alloc.TaskStates["t"].Events {
		if ev.Type == api.TaskTerminated {
			exit = ev.ExitCode
		}
	}
	if exit <= 0 {
		t.Errorf("task exit code %d, want a failure:\n%s", exit, taskEvents(alloc))
	}

	// The next holder: the released slot is empty with the whole refquota
	// available.
	fresh := waitSlotFree(t, a, "small", slot.Name, gen, 1)
	if fresh.GUID == slot.GUID {
		t.Errorf("%s: guid %s unchanged after the release", slot.Name, fresh.GUID)
	}
	checkEntries(t, "/"+slot.Name)
	syncPool(t, p.Name)
	fresh = mustLookup(t, slot.Name)
	t.Logf("%s after the release: referenced %d, available %d, refquota %d", slot.Name, fresh.Referenced, fresh.Available, fresh.Refquota)
	if fresh.Refquota != refquota || fresh.Referenced > slack || fresh.Available < refquota-slack || fresh.Available > refquota {
		t.Errorf("%s after the release: refquota %d, referenced %d, available %d: want %d available, nothing referenced",
			slot.Name, fresh.Refquota, fresh.Referenced, fresh.Available, refquota)
	}
	next, out := startHeld(t, a, batchJob("next", "exec", "small", held(nextHolderScript("/q", "",
		`dd if=/dev/zero of=/q/next.bin bs=1048576 count=12 2>&1`)), noRetry))
	if deviceID(t, next) != "small-1" {
		t.Fatalf("next allocation placed on %s", deviceID(t, next))
	}
	if !strings.Contains(out, "body exit 0") || !strings.Contains(out, "12+0 records out") || !strings.Contains(out, "clean and writable") {
		t.Errorf("next task: %s\nstderr: %s", out, logOrErr(a, next.ID, "stderr"))
	}
	checkSize(t, filepath.Join("/"+slot.Name, "next.bin"), 12*mib)
	syncPool(t, p.Name)
	if d := mustLookup(t, slot.Name); d.Referenced < 12*mib || d.Referenced > 12*mib+slack {
		t.Errorf("%s references %d bytes after the next holder wrote 12 MiB", slot.Name, d.Referenced)
	}
	finish(t, a, next.ID)
	waitComplete(t, a, "next")
}
