//go:build e2e

package e2e

import (
	"fmt"
	"os"
	"regexp"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/hashicorp/nomad/api"

	"github.com/nomad-device-zfs/nomad-device-zfs/internal/nomadtest"
)

// TestStickyHandoverTimeIndependentOfSize: the handover of a sticky slot's
// data is a rename, so it takes as long for a gigabyte as for ten
// megabytes. For each size an allocation writes that much (zeros on a
// class with compression off, so every byte is on disk) and fails; its
// data is parked, and the reschedule Nomad places 5 s later claims it.
// The test logs, for each size, the plugin's own measure of the claim
// (took= of "claimed parked data"), the time from the replacement's
// placement to its task's start, and the zfs events of the park and the
// claim; and it fails if the claim of the gigabyte took half as long as
// writing it, which any copy would.
//
// The pool is on the guest's virtio disk (NDZ_E2E_DISK, which
// scripts/e2e.sh attaches: a sparse file on the host's disk): the guest's
// /tmp is its memory, too small for a gigabyte beside the other tests, and
// a file vdev on the 9p share locked both vCPUs up.
func TestStickyHandoverTimeIndependentOfSize(t *testing.T) {
	t.Parallel()
	disk := os.Getenv("NDZ_E2E_DISK")
	if disk == "" {
		t.Fatal("NDZ_E2E_DISK is not set: run the suite with scripts/e2e.sh, which gives the guest a disk for this test's gigabyte")
	}
	p := &testPool{Name: "e2ehandover", Dir: "/dev", Vdevs: []string{disk}}
	createPool(t, p, false)
	a := startAgentScan(t, p, releaseScan, stickyClass(1, "  properties {\n    compression = \"off\"\n  }"))
	stopAtCleanup(t, a, "h-10mib", "h-1024mib")
	a.WaitForNodeDevice(t, "zfs", "dataset", "state", 1, deviceTimeout)

	var results []handoverResult
	for _, mib := range []int{10, 1024} {
		results = append(results, measureHandover(t, a, p, mib))
	}
	for _, r := range results {
		t.Logf("handover of %4d MiB: claim took %s (plugin), placement -> task started %s, previous task finished -> task started %s; written in %s; zfs events: %s",
			r.mib, r.took, r.startLatency.Round(time.Millisecond), r.endToStart.Round(time.Millisecond), r.write, r.events)
	}
	big := results[len(results)-1]
	if big.took <= 0 || big.took > big.write/2 {
		t.Errorf("the claim of %d MiB took %s, writing it %s: not a zero-copy handover", big.mib, big.took, big.write)
	}
}

// handoverResult is one size's handover.
type handoverResult struct {
	mib          int
	write        time.Duration // the first allocation's dd and sync
	took         time.Duration // the plugin's claim
	startLatency time.Duration // the replacement's placement to its task's start
	endToStart   time.Duration // the failed task's end to the replacement's start (with the 5 s reschedule delay)
	events       string        // the zfs events of the park and the claim
}

// handoverGroup: no restart, one reschedule 5 s after the failure.
const handoverGroup = `    restart {
      attempts = 0
      mode     = "fail"
    }
    reschedule {
      attempts       = 1
      interval       = "1h"
      delay          = "5s"
      delay_function = "constant"
      unlimited      = false
    }`

// measureHandover runs job h-<mib>mib on the class's one slot: the first
// allocation writes mib MiB and fails, the reschedule reads the size back.
// It stops the job and waits for the slot to be free again.
func measureHandover(t *testing.T, a *nomadtest.Agent, p *testPool, mib int) handoverResult {
	t.Helper()
	job := fmt.Sprintf("h-%dmib", mib)
	ds := p.Parent + "/state/state-1"
	script := fmt.Sprintf(`trap 'exit 0' INT TERM; `+
		`if [ -e /data/blob ]; then echo "found $(wc -c < /data/blob) bytes"; while :; do sleep 1; done; fi; `+
		`s=$(date +%%s); dd if=/dev/zero of=/data/blob bs=1M count=%d 2>/dev/null && sync && `+
		`echo "wrote %d MiB in $(( $(date +%%s) - s )) s"; exit 1`, mib, mib)
	a.RunJob(t, stickyService(job, "1", script, handoverGroup))
	stubs := a.WaitAllocs(t, job, func(as []*api.AllocationListStub) bool { return len(as) > 0 }, jobTimeout)
	first := stubs[0].ID

	// A gigabyte takes about 30 s to write on an idle guest.
	timeout := jobTimeout + time.Duration(mib)*time.Second/8
	next, out := waitRunningWithin(t, a, job, "found ", timeout, first)
	prev := allocInfo(t, a, first)
	if prev.ClientStatus != api.AllocClientStatusFailed || next.PreviousAllocation != prev.ID {
		t.Fatalf("%s: %s is %s, %s replaces %q", job, prev.ID, prev.ClientStatus, next.ID, next.PreviousAllocation)
	}
	if want := fmt.Sprintf("found %d bytes", mib<<20); !strings.Contains(out, want) {
		t.Fatalf("%s: the rescheduled allocation says %q, want %q", job, out, want)
	}
	r := handoverResult{mib: mib}
	if m := regexp.MustCompile(`wrote \d+ MiB in (\d+) s`).FindStringSubmatch(logOrErr(a, prev.ID, "stdout")); m != nil {
		n, _ := strconv.Atoi(m[1])
		r.write = time.Duration(n) * time.Second
	}
	waitFor(t, 30*time.Second, "the plugin to log the claim of "+job, func() (bool, string) {
		line, took, ok := claimTook(a, next.ID)
		r.took = took
		return ok, "log line: " + line
	})
	r.startLatency = taskStarted(next).Sub(time.Unix(0, next.CreateTime))
	r.endToStart = taskStarted(next).Sub(taskFinished(prev))
	r.events = parkAndClaimEvents(t, p.Name, ds, p.Parent+"/state/parked-"+prev.ID)
	if pk := parkedBelow(t, p.Parent+"/state"); len(pk) != 0 {
		t.Errorf("%s: parked after the claim: %v", job, pk)
	}
	waitHolder(t, ds, next.ID)

	held := mustLookup(t, ds)
	a.StopJob(t, job, false)
	waitAllocStatus(t, a, next.ID, api.AllocClientStatusComplete)
	waitSlotFree(t, a, "state", ds, generation(held), 1)
	return r
}

// zfsEvent is one history event of `zpool events -v`: what was done to
// which dataset, when the event was posted (its txg had synced).
type zfsEvent struct {
	at     time.Time
	name   string // history_internal_name: rename, destroy, create, set...
	ds     string // history_dsname
	detail string // history_internal_str: "-> <new name>" for a rename
}

// zfsEvents reads pool's history events from the kernel's event queue (it
// keeps the latest few hundred; older ones may be gone).
func zfsEvents(t testing.TB, pool string) []zfsEvent {
	t.Helper()
	out, err := runErr("zpool", "events", "-v", pool)
	if err != nil {
		t.Logf("zpool events: %v", err)
		return nil
	}
	var evs []zfsEvent
	for _, block := range strings.Split(out, "\n\n") {
		if !strings.Contains(block, "sysevent.fs.zfs.history_event") {
			continue
		}
		var ev zfsEvent
		for _, l := range strings.Split(block, "\n") {
			k, v, ok := strings.Cut(strings.TrimSpace(l), " = ")
			if !ok {
				continue
			}
			v = strings.Trim(strings.TrimSpace(v), `"`)
			switch k {
			case "history_internal_name":
				ev.name = v
			case "history_dsname":
				ev.ds = v
			case "history_internal_str":
				ev.detail = v
			case "time": // "0x<seconds> 0x<nanoseconds>"
				f := strings.Fields(v)
				if len(f) == 2 {
					s, _ := strconv.ParseInt(f[0], 0, 64)
					ns, _ := strconv.ParseInt(f[1], 0, 64)
					ev.at = time.Unix(s, ns)
				}
			}
		}
		evs = append(evs, ev)
	}
	return evs
}

// parkAndClaimEvents describes the park (slot -> a name starting with
// parkedPrefix) and the claim (the fresh slot destroyed, parked -> slot)
// from the zfs events, with the claim's span from the destroy to the
// rename.
func parkAndClaimEvents(t testing.TB, pool, slot, parkedPrefix string) string {
	t.Helper()
	var park, destroy, claim *zfsEvent
	var parked string
	evs := zfsEvents(t, pool)
	for i := range evs {
		ev := &evs[i]
		switch {
		case ev.name == "rename" && ev.ds == slot && strings.HasPrefix(ev.detail, "-> "+parkedPrefix):
			park, destroy, claim = ev, nil, nil
			parked = strings.TrimPrefix(ev.detail, "-> ")
		case ev.name == "destroy" && ev.ds == slot && park != nil:
			destroy = ev
		case ev.name == "rename" && park != nil && ev.ds == parked && ev.detail == "-> "+slot:
			claim = ev
		}
	}
	if park == nil || claim == nil {
		return fmt.Sprintf("park or claim not among the %d history events of %s", len(evs), pool)
	}
	s := fmt.Sprintf("park at %s, claim (rename) %s later", park.at.Format("15:04:05.000"), claim.at.Sub(park.at).Round(time.Millisecond))
	if destroy != nil {
		s += fmt.Sprintf(", fresh slot destroyed -> renamed: %s", claim.at.Sub(destroy.at).Round(time.Millisecond))
	}
	return s
}
