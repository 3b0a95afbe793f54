//go:build e2e

package e2e

import (
	"fmt"
	"os"
	"os/exec"
	"strings"
	"testing"

	"github.com/hashicorp/nomad/api"

	"github.com/nomad-device-zfs/nomad-device-zfs/internal/nomadtest"
)

// TestJobQueuedDuringReleaseIsPlaced: a job asks for the one slot of a
// class while that slot's release is under way (kept busy by a process on
// the host). The job must be placed at once and get a clean slot: the
// plugin keeps a releasing slot healthy, and Reserve finishes the release
// before it mounts.
//
// This test found the problem it guards against: the plugin used to report
// a releasing slot unhealthy; the job's evaluation then found no healthy
// instance and was blocked with the node's computed class ineligible, and
// since device health is not part of the computed class, the slot turning
// healthy never unblocked it: the job stayed pending for good.
func TestJobQueuedDuringReleaseIsPlaced(t *testing.T) {
	t.Parallel()
	p := newPool(t, "e2eblocked", false)
	a := startAgentScan(t, p, releaseScan, `class "one" {
  slots = 1
}`)
	a.WaitForNodeDevice(t, "zfs", "dataset", "one", 1, deviceTimeout)
	ds := p.Parent + "/one/one-1"

	first, _ := startHeld(t, a, batchJob("first", "raw_exec", "one", held(`true`), ""))
	waitHolder(t, ds, first.ID)
	if err := os.WriteFile("/"+ds+"/first.txt", []byte("first holder\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	sleeper := exec.Command("sleep", "600")
	sleeper.Dir = "/" + ds
	if err := sleeper.Start(); err != nil {
		t.Fatal(err)
	}
	done := make(chan struct{})
	go func() { _ = sleeper.Wait(); close(done) }()
	t.Cleanup(func() { _ = sleeper.Process.Kill(); <-done })
	finish(t, a, first.ID)
	waitComplete(t, a, "first")
	waitState(t, ds, "releasing")
	// The slot stays offered while its release waits for the busy dataset.
	a.WaitForNodeDevice(t, "zfs", "dataset", "one", 1, deviceTimeout)

	// Queued while the slot is releasing: placed at once, not blocked.
	next := a.RunJob(t, batchJob("next", "raw_exec", "one", nextHolderScript(`"$ZFS_ONE_HOST_PATH"`, "", ""), ""))
	var allocs []*api.AllocationListStub
	waitFor(t, jobTimeout, "job next placed", func() (bool, string) {
		var err error
		allocs, _, err = a.Client().Jobs().Allocations(*next.ID, true, nil)
		if err != nil || len(allocs) == 0 {
			if ev := blockedEval(t, a, *next.ID); ev != nil {
				return false, fmt.Sprintf("blocked evaluation %s, class eligibility %v", ev.ID[:8], ev.ClassEligibility)
			}
			return false, "no allocation yet"
		}
		return true, ""
	})
	// Free the dataset: the next Reserve (or scan) completes the release.
	_ = sleeper.Process.Kill()
	<-done
	_, out := waitEndedOut(t, a, *next.ID)
	if !strings.Contains(out, "clean and writable") {
		t.Errorf("next task: %s", out)
	}
}

// blockedEval returns the job's blocked evaluation, or nil.
func blockedEval(t testing.TB, a *nomadtest.Agent, job string) *api.Evaluation {
	t.Helper()
	evals, _, err := a.Client().Jobs().Evaluations(job, nil)
	if err != nil {
		t.Fatalf("evaluations of %s: %v", job, err)
	}
	for _, ev := range evals {
		if ev.Status == api.EvalStatusBlocked {
			return ev
		}
	}
	return nil
}
