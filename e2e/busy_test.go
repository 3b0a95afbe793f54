//go:build e2e

package e2e

import (
	"fmt"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

// TestBusyDatasetReleasedWhenFree: a process on the host (not the task)
// has its working directory in a slot when the slot's allocation
// completes. The slot's dataset is busy, and the release (policy destroy)
// does not force it: the slot stays "releasing" with the holder's data,
// the instance stays offered, and the release is retried. Once the process
// is gone the release completes: a fresh, empty slot at generation+1, and
// a healthy instance.
func TestBusyDatasetReleasedWhenFree(t *testing.T) {
	t.Parallel()
	p := newPool(t, "e2ebusy", false)
	a := startAgentScan(t, p, releaseScan, `class "busy" {
  slots = 1
}`)
	a.WaitForNodeDevice(t, "zfs", "dataset", "busy", 1, deviceTimeout)
	ds := p.Parent + "/busy/busy-1"
	dir := "/" + ds
	before := mustLookup(t, ds)
	gen := generation(before)

	alloc, out := startHeld(t, a, batchJob("busy", "raw_exec", "busy",
		held(`echo busy-holder > "$ZFS_BUSY_HOST_PATH/data.txt"`), ""))
	if !strings.Contains(out, "body exit 0") || deviceID(t, alloc) != "busy-1" {
		t.Fatalf("task on %s: %s\nstderr: %s", deviceID(t, alloc), out, logOrErr(a, alloc.ID, "stderr"))
	}
	waitHolder(t, ds, alloc.ID)

	// The process that keeps the dataset busy.
	sleeper := exec.Command("sleep", "600")
	sleeper.Dir = dir
	if err := sleeper.Start(); err != nil {
		t.Fatal(err)
	}
	done := make(chan error, 1)
	go func() { done <- sleeper.Wait() }()
	t.Cleanup(func() {
		_ = sleeper.Process.Kill()
		<-done
	})

	finish(t, a, alloc.ID)
	waitComplete(t, a, "busy")
	d := waitState(t, ds, "releasing")
	if d.User.Get(propHolder) != alloc.ID || d.User.Get(propOutcome) != "complete" {
		t.Errorf("%s releasing: holder %q outcome %q, want %s complete", ds, d.User.Get(propHolder), d.User.Get(propOutcome), alloc.ID)
	}
	// Still offered meanwhile: Reserve would finish the release first.
	a.WaitForNodeDevice(t, "zfs", "dataset", "busy", 1, deviceTimeout)

	// The release is retried (every scan, 2 s) and refused each time.
	const failedStep = "slot lifecycle step failed; will retry"
	waitFor(t, 60*time.Second, "two failed release attempts in the agent log", func() (bool, string) {
		n := countLines(a.Logs(), failedStep, "slot=busy-1", "dataset is busy")
		return n >= 2, fmt.Sprintf("%d so far", n)
	})
	d = mustLookup(t, ds)
	if d.User.Get(propState) != "releasing" || d.GUID != before.GUID || generation(d) != gen {
		t.Errorf("%s while busy: %s, want releasing, guid %s, generation %d", ds, describeSlot(d), before.GUID, gen)
	}
	if got, err := readFileErr(filepath.Join(dir, "data.txt")); got != "busy-holder\n" {
		t.Errorf("%s/data.txt = %q (%v) while busy: the data must stay", dir, got, err)
	}
	select {
	case err := <-done:
		t.Fatalf("the busy process ended by itself: %v", err)
	default:
	}
	t.Logf("agent log: %s", firstLine(a.Logs(), failedStep))

	// Free it: the release completes.
	freed := time.Now()
	if err := sleeper.Process.Kill(); err != nil {
		t.Fatal(err)
	}
	<-done
	done <- nil // for the cleanup
	after := waitReleased(t, ds, gen)
	t.Logf("released %s after the process was killed", time.Since(freed).Round(100*time.Millisecond))
	if after.GUID == before.GUID {
		t.Errorf("%s: guid %s unchanged after the release", ds, after.GUID)
	}
	checkEntries(t, dir)
	a.WaitForNodeDevice(t, "zfs", "dataset", "busy", 1, deviceTimeout)
}

// countLines counts the lines of log holding every one of subs.
func countLines(log string, subs ...string) int {
	n := 0
	for _, l := range strings.Split(log, "\n") {
		all := true
		for _, s := range subs {
			all = all && strings.Contains(l, s)
		}
		if all {
			n++
		}
	}
	return n
}

// firstLine returns the first line of log holding sub.
func firstLine(log, sub string) string {
	for _, l := range strings.Split(log, "\n") {
		if strings.Contains(l, sub) {
			return l
		}
	}
	return ""
}
