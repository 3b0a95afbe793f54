//go:build e2e

package e2e

import (
	"fmt"
	"strings"
	"testing"

	"github.com/hashicorp/nomad/api"

	"github.com/nomad-device-zfs/nomad-device-zfs/internal/nomadtest"
)

// TestSlotsLoweredWhileHeld: the operator lowers a class's slots from 2 to
// 1 and restarts the agent while an allocation holds both. The dropped
// slot is no longer offered, keeps its holder's data while it runs, and
// is destroyed once it ends, not created again; the remaining slot is
// released as usual.
func TestSlotsLoweredWhileHeld(t *testing.T) {
	t.Parallel()
	p := newPool(t, "e2eorphan", false)
	a := startAgentScan(t, p, releaseScan, scratchClass)
	a.WaitForNodeDevice(t, "zfs", "dataset", "scratch", 2, deviceTimeout)
	ds1, ds2 := p.Parent+"/scratch/scratch-1", p.Parent+"/scratch/scratch-2"
	gen1 := generation(mustLookup(t, ds1))

	jobHCL := strings.Replace(batchJob("both", "exec", "scratch",
		held(`for d in /data/*; do echo kept > "$d/mine"; done`), ""),
		`device "zfs/dataset/scratch" {}`, `device "zfs/dataset/scratch" { count = 2 }`, 1)
	job := a.RunJob(t, jobHCL)
	stubs := nomadtest.Counted(a.WaitAllocs(t, *job.ID, nomadtest.AllocsWithStatus(1, api.AllocClientStatusRunning), jobTimeout))
	allocID := stubs[0].ID
	waitHolder(t, ds1, allocID)
	waitHolder(t, ds2, allocID)
	waitFor(t, jobTimeout, "the task's writes", func() (bool, string) {
		got, err := readFileErr("/" + ds2 + "/mine")
		return got == "kept\n", fmt.Sprintf("%s/mine = %q (%v)", ds2, got, err)
	})

	a.RestartWithPluginConfig(t, strings.Replace(a.PluginConfig(), "slots = 2", "slots = 1", 1))
	a.WaitForNodeDevice(t, "zfs", "dataset", "scratch", 1, deviceTimeout)
	if got := readFile(t, "/"+ds2+"/mine"); got != "kept\n" {
		t.Fatalf("%s lost its running holder's data: mine = %q", ds2, got)
	}
	if d := mustLookup(t, ds2); d.User.Get(propState) != "held" || d.User.Get(propHolder) != allocID {
		t.Fatalf("%s after the restart: state %q holder %q", ds2, d.User.Get(propState), d.User.Get(propHolder))
	}

	finish(t, a, allocID)
	waitComplete(t, a, *job.ID)
	waitFor(t, releaseTimeout, ds2+" destroyed", func() (bool, string) {
		d, ok, err := lookup(ds2)
		if err != nil {
			return false, err.Error()
		}
		return !ok, fmt.Sprintf("still there: state %q", d.User.Get(propState))
	})
	waitReleased(t, ds1, gen1)
	checkEntries(t, "/"+ds1)
	// The pass that released scratch-1 did not make a scratch-2 again
	// (the unit tests follow it over more passes).
	if _, ok, _ := lookup(ds2); ok {
		t.Fatalf("%s was created again", ds2)
	}
}
