//go:build e2e

package e2e

import (
	"fmt"
	"regexp"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/hashicorp/nomad/api"

	"github.com/nomad-device-zfs/nomad-device-zfs/internal/nomadtest"
)

// TestStickyDataFollowsReplacements: a service on a sticky class of two
// slots writes data; a destructive update (changed env) gives the new
// allocation the old data, and nothing else keeps it (no parked-<old>, no
// other dataset with it); `nomad alloc stop` does the same for the
// rescheduled allocation; `nomad job stop` releases the data by the
// class's policy (destroy: a fresh slot); and a job that then takes both
// slots finds them empty.
//
// With two slots Nomad picks the replacement's instance at random (it
// iterates a map): on the predecessor's slot the replacement inherits in
// place; on the other one, the predecessor's data is parked when it ends
// and claimed by the replacement's Reserve. Both must give the same
// result; the log says which happened.
func TestStickyDataFollowsReplacements(t *testing.T) {
	t.Parallel()
	p := newPool(t, "e2esticky", false)
	a := startAgentScan(t, p, releaseScan, stickyClass(2, ""))
	stopAtCleanup(t, a, "svc", "other")
	a.WaitForNodeDevice(t, "zfs", "dataset", "state", 2, deviceTimeout)
	classDS := p.Parent + "/state"

	// v1 starts on an empty slot and writes.
	a.RunJob(t, stickyService("svc", "1", historyScript, ""))
	v1, out := waitRunning(t, a, "svc", "appended v1")
	if !strings.Contains(out, "found nothing") {
		t.Fatalf("v1 found data on a new slot: %s", out)
	}
	ds := classDS + "/" + deviceID(t, v1)
	waitHolder(t, ds, v1.ID)
	checkDataOnlyIn(t, p, ds, historyLine("1", v1))

	// A destructive update: v2 gets v1's data.
	a.RunJob(t, stickyService("svc", "2", historyScript, ""))
	v2, out := waitRunning(t, a, "svc", "appended v2", v1.ID)
	if v2.PreviousAllocation != v1.ID {
		t.Fatalf("v2 %s replaces %q, want v1 %s", v2.ID, v2.PreviousAllocation, v1.ID)
	}
	if want := "found: " + historyLine("1", v1); !strings.Contains(out, want) {
		t.Fatalf("v2 after the update: %q, want %q", out, want)
	}
	v1 = waitAllocStatus(t, a, v1.ID, api.AllocClientStatusComplete)
	ds = classDS + "/" + deviceID(t, v2)
	waitHolder(t, ds, v2.ID)
	checkDataOnlyIn(t, p, ds, historyLine("1", v1), historyLine("2", v2))
	if pk := parkedFor(t, classDS, v1.ID); len(pk) != 0 {
		t.Errorf("v1's data is still parked as %v", pk)
	}
	t.Logf("update %s (%s) -> %s (%s): %s", v1.ID[:8], deviceID(t, v1), v2.ID[:8], deviceID(t, v2), handover(a, v1, v2))

	// `nomad alloc stop`: the rescheduled allocation gets the data.
	if _, err := a.Client().Allocations().Stop(v2, nil); err != nil {
		t.Fatalf("stopping allocation %s: %v", v2.ID, err)
	}
	v3, out := waitRunning(t, a, "svc", "appended v2", v1.ID, v2.ID)
	if v3.PreviousAllocation != v2.ID {
		t.Fatalf("%s replaces %q, want the stopped %s", v3.ID, v3.PreviousAllocation, v2.ID)
	}
	if want := "found: " + historyLine("1", v1) + " " + historyLine("2", v2); !strings.Contains(out, want) {
		t.Fatalf("the rescheduled allocation: %q, want %q", out, want)
	}
	v2 = waitAllocStatus(t, a, v2.ID, api.AllocClientStatusComplete)
	ds = classDS + "/" + deviceID(t, v3)
	waitHolder(t, ds, v3.ID)
	checkDataOnlyIn(t, p, ds, historyLine("1", v1), historyLine("2", v2), historyLine("2", v3))
	t.Logf("alloc stop %s (%s) -> %s (%s): %s", v2.ID[:8], deviceID(t, v2), v3.ID[:8], deviceID(t, v3), handover(a, v2, v3))

	// `nomad job stop`: no replacement can come; the data goes by the
	// class's policy (destroy), at once.
	held := mustLookup(t, ds)
	a.StopJob(t, "svc", false)
	waitAllocStatus(t, a, v3.ID, api.AllocClientStatusComplete)
	fresh := waitSlotFree(t, a, "state", ds, generation(held), 2)
	if fresh.GUID == held.GUID {
		t.Errorf("%s: guid %s unchanged after the job stopped: the data was not destroyed", ds, fresh.GUID)
	}
	checkEntries(t, "/"+ds)
	if pk := parkedBelow(t, classDS); len(pk) != 0 {
		t.Errorf("parked after the job stopped: %v", pk)
	}
	if r := retainedBelow(t, classDS); len(r) != 0 {
		t.Errorf("policy destroy retained %v", r)
	}

	// Another job, on both slots, finds nothing.
	_, out = runToEnd(t, a, `job "other" {
  type = "batch"
  group "g" {
`+noRetry+`
    task "t" {
      driver = "exec"
      config {
        command = "/bin/sh"
        args    = ["-c", "for d in /data/state-1 /data/state-2; do grep -q \" $d zfs \" /proc/mounts || { echo \"$d: no slot mounted\"; bad=1; }; got=$(ls -A $d); echo \"$d holds: [$got]\"; [ -z \"$got\" ] || bad=1; done; [ -z \"$bad\" ] && echo all-clean"]
      }
      resources {
        device "zfs/dataset/state" {
          count = 2
        }
      }
    }
  }
}`)
	if !strings.Contains(out, "all-clean") {
		t.Errorf("the other job on both slots: %s", out)
	}
	t.Logf("other job: %s", strings.TrimSpace(out))
}

// TestStickyFailedDataWaitsThenGoes: an allocation of a sticky class fails
// and nothing replaces it (no reschedule). Its data is parked, where
// `status` shows it in its Parked section, waiting for a replacement for
// sticky_wait (1m on an idle guest, see paced: the parked data must
// outlast the checks); then the class's policy (destroy) takes it, not
// before.
func TestStickyFailedDataWaitsThenGoes(t *testing.T) {
	t.Parallel()
	wait := paced(time.Minute)
	p := newPool(t, "e2estickyfail", false)
	a := startAgentScan(t, p, releaseScan, stickyClass(1, fmt.Sprintf(`  sticky_wait = %q`, wait)))
	stopAtCleanup(t, a, "fails", "counter")
	a.WaitForNodeDevice(t, "zfs", "dataset", "state", 1, deviceTimeout)
	classDS := p.Parent + "/state"
	ds := classDS + "/state-1"
	before := mustLookup(t, ds)

	a.RunJob(t, stickyService("fails", "1",
		`echo "v$VERSION $NOMAD_ALLOC_ID" > /data/history.txt && echo wrote && exit 1`, noRetry))
	stubs := nomadtest.Counted(a.WaitAllocs(t, "fails", nomadtest.AllocsWithStatus(1, api.AllocClientStatusFailed), jobTimeout))
	failed := allocInfo(t, a, stubs[0].ID)
	ended := taskFinished(failed)

	var parked string
	waitFor(t, releaseTimeout, "the failed allocation's data parked", func() (bool, string) {
		pk := parkedFor(t, classDS, failed.ID)
		if len(pk) != 1 {
			return false, fmt.Sprintf("parked for it: %v", pk)
		}
		parked = pk[0]
		d, ok, err := lookup(parked)
		if err != nil || !ok {
			return false, fmt.Sprintf("%s: exists %v: %v", parked, ok, err)
		}
		return d.User.Get(propState) == "parked" && d.User.Get(propHolder) == failed.ID, describeSlot(d)
	})
	d := mustLookup(t, parked)
	if d.GUID != before.GUID {
		t.Errorf("%s: guid %s, want the former slot's %s", parked, d.GUID, before.GUID)
	}
	if got := readFile(t, "/"+parked+"/history.txt"); got != historyLine("1", failed)+"\n" {
		t.Errorf("%s/history.txt = %q", parked, got)
	}
	fresh := waitReleased(t, ds, generation(before))
	if fresh.GUID == before.GUID {
		t.Errorf("%s: no fresh slot in the parked one's place", ds)
	}
	checkEntries(t, "/"+ds)

	out := statusOutput(t, a)
	section := afterLine(out, "Parked")
	if !strings.Contains(section, parked) || !strings.Contains(section, failed.ID[:8]) {
		t.Errorf("status shows no Parked row for %s:\n%s", parked, out)
	}
	t.Logf("status:\n%s", out)

	waitFor(t, wait+releaseTimeout, parked+" released after sticky_wait", func() (bool, string) {
		return !exists(t, parked), "still there"
	})
	if waited := time.Since(ended); waited < wait {
		t.Errorf("%s went %s after its allocation failed, before sticky_wait %s", parked, waited, wait)
	} else {
		t.Logf("%s released %s after its allocation failed (sticky_wait %s)", parked, waited.Round(time.Second), wait)
	}
	if r := retainedBelow(t, classDS); len(r) != 0 {
		t.Errorf("policy destroy retained %v", r)
	}

	runExampleCounter(t, a)
}

// runExampleCounter runs docs/sticky-and-migration.md's example,
// examples/job-sticky.nomad.hcl,
// on class "state", and updates it (VERSION=2, a destructive update): the
// new allocation goes on counting from where the old one stopped.
func runExampleCounter(t *testing.T, a *nomadtest.Agent) {
	t.Helper()
	job, err := a.Client().Jobs().ParseHCL(mustExample(t, "job-sticky.nomad.hcl"), true)
	if err != nil {
		t.Fatalf("parsing examples/job-sticky.nomad.hcl: %v", err)
	}
	task := job.TaskGroups[0].Tasks[0]
	starts := regexp.MustCompile(`version (\d) starts at (\d+)`)
	waitStart := func(version string, skip ...string) (string, int) {
		var id string
		a.WaitAllocs(t, *job.ID, func(allocs []*api.AllocationListStub) bool {
			for _, al := range allocs {
				if al.ClientStatus == api.AllocClientStatusRunning && !contains(skip, al.ID) {
					id = al.ID
					return true
				}
			}
			return false
		}, jobTimeout)
		var n int
		waitFor(t, jobTimeout, "the example's version "+version+" to start counting", func() (bool, string) {
			out, err := a.ReadAllocLogs(id, task.Name, "stdout")
			if err != nil {
				return false, err.Error()
			}
			m := starts.FindStringSubmatch(out)
			if m == nil || m[1] != version {
				return false, "stdout: " + out
			}
			n, _ = strconv.Atoi(m[2])
			return true, ""
		})
		return id, n
	}
	if _, _, err := a.Client().Jobs().Register(job, nil); err != nil {
		t.Fatalf("registering the example: %v", err)
	}
	first, n := waitStart("1")
	if n != 0 {
		t.Errorf("the example's first allocation starts at %d, want 0 on a fresh slot", n)
	}
	task.Env["VERSION"] = "2"
	if _, _, err := a.Client().Jobs().Register(job, nil); err != nil {
		t.Fatalf("updating the example: %v", err)
	}
	_, n = waitStart("2", first)
	if n < 1 {
		t.Errorf("the example's updated allocation starts at %d: it did not get the count of %s", n, first)
	}
	t.Logf("examples/job-sticky.nomad.hcl: version 2 goes on from %d", n)
}
