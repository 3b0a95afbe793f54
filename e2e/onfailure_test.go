//go:build e2e

package e2e

import (
	"fmt"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/hashicorp/nomad/api"
)

// TestReleaseOnFailureRetainsFailedData: a class with policy destroy,
// on_failure snapshot and retain = "60s" (on an idle guest; see paced). A
// task that exits 1 (no restart, no reschedule: the allocation fails once)
// has its data retained as <class>/retained-<alloc ID>, marked outcome
// failed, under the plugin's hold; the next holder, on the same slot,
// finds it clean, completes, and its data is destroyed: nothing retained
// for it. The failed allocation's data is pruned once retain has passed,
// not before.
func TestReleaseOnFailureRetainsFailedData(t *testing.T) {
	t.Parallel()
	// The retained data must outlast the checks below, which a slow guest
	// stretches: beside a CPU hog a fixed 60 s ran out while the test
	// waited, and the hold it then checked was gone.
	retain := paced(60 * time.Second)
	p := newPool(t, "e2efail", false)
	a := startAgentScan(t, p, releaseScan, fmt.Sprintf(`class "work" {
  slots = 1
  release {
    policy     = "destroy"
    on_failure = "snapshot"
    retain     = %q
  }
}`, retain))
	a.WaitForNodeDevice(t, "zfs", "dataset", "work", 1, deviceTimeout)
	classDS := p.Parent + "/work"
	ds := classDS + "/work-1"
	before := mustLookup(t, ds)
	gen := generation(before)

	ended := time.Now()
	failed := runBatch(t, a, batchJob("fails", "raw_exec", "work",
		`echo failed-run > "$ZFS_WORK_HOST_PATH/data.txt" && exit 1`, noRetry), api.AllocClientStatusFailed)
	if id := deviceID(t, failed); id != "work-1" {
		t.Fatalf("failing allocation got %s", id)
	}
	after := waitReleased(t, ds, gen)
	if after.GUID == before.GUID {
		t.Errorf("%s: guid %s unchanged: no fresh slot in place of the retained one", ds, after.GUID)
	}
	checkEntries(t, "/"+ds)
	kept := classDS + "/retained-" + failed.ID
	d := checkRetained(t, kept, before.GUID, failed.ID, "failed", "failed-run\n", retain, ended)
	expires, _ := strconv.ParseInt(d.User.Get(propExpires), 10, 64)
	a.WaitForNodeDevice(t, "zfs", "dataset", "work", 1, deviceTimeout) // see waitSlotFree

	ok, out := startHeld(t, a, batchJob("succeeds", "raw_exec", "work",
		held(nextHolderScript(`"$ZFS_WORK_HOST_PATH"`, "", `echo ok-run > "$d/data.txt"`)), ""))
	if id := deviceID(t, ok); id != "work-1" {
		t.Fatalf("completing allocation got %s", id)
	}
	if !strings.Contains(out, "body exit 0") || !strings.Contains(out, "clean and writable") {
		t.Fatalf("completing task: %s\nstderr: %s", out, logOrErr(a, ok.ID, "stderr"))
	}
	waitHolder(t, ds, ok.ID)
	if got := readFile(t, "/"+ds+"/data.txt"); got != "ok-run\n" {
		t.Fatalf("/%s/data.txt = %q", ds, got)
	}
	finish(t, a, ok.ID)
	waitComplete(t, a, "succeeds")

	final := waitReleased(t, ds, gen+1)
	if final.GUID == after.GUID {
		t.Errorf("%s: guid %s unchanged: the completed holder's slot was not destroyed", ds, final.GUID)
	}
	checkEntries(t, "/"+ds)
	if exists(t, classDS+"/retained-"+ok.ID) {
		t.Errorf("%s/retained-%s exists: a completed allocation's data must be destroyed", classDS, ok.ID)
	}
	if r := retainedBelow(t, classDS); len(r) > 1 || (len(r) == 1 && r[0] != kept) {
		t.Errorf("retained datasets %v, want at most %s", r, kept)
	}
	// Checked again only if it cannot race the expiry (checkRetained
	// takes a few zfs commands).
	if leftBefore(time.Unix(expires, 0), 10*time.Second) {
		checkRetained(t, kept, before.GUID, failed.ID, "failed", "failed-run\n", retain, ended)
	} else {
		t.Logf("%s: too close to its expiry to check again", kept)
	}

	// retain: the failed allocation's data goes once it has expired.
	waitFor(t, retain+releaseTimeout, kept+" pruned after its expiry", func() (bool, string) {
		return !exists(t, kept), "still there"
	})
	if now := time.Now().Unix(); now < expires {
		t.Errorf("%s pruned at %d, before its expiry %d", kept, now, expires)
	}
	t.Logf("%s pruned %d s after its expiry", kept, time.Now().Unix()-expires)
	checkPruneLog(t, a, kept, true)
}
