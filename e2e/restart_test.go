//go:build e2e

package e2e

import (
	"fmt"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/hashicorp/nomad/api"

	"github.com/nomad-device-zfs/nomad-device-zfs/internal/nomadtest"
)

// beatScript is an exec task that writes a file once and then a counter every
// second through the mount, until the test calls finish.
const beatScript = `echo first > /data/first.txt; i=0; while [ ! -e "$NOMAD_TASK_DIR/finish" ]; do i=$((i+1)); echo $i > /data/beat.tmp && mv /data/beat.tmp /data/beat; sleep 1; done`

// TestAgentRestartKeepsRunningAllocData: the Nomad agent (and with it the
// plugin) restarts while an exec task holds a slot. The allocation keeps
// running without a task restart, on the same dataset, still writing
// through its mount, and the data it wrote before is there. When it then
// ends, the restarted plugin still releases the slot (policy destroy): a
// fresh, empty dataset at generation+1 with no holder.
func TestAgentRestartKeepsRunningAllocData(t *testing.T) {
	t.Parallel()
	p := newPool(t, "e2erestart", false)
	a := startAgentScan(t, p, releaseScan, strings.Replace(scratchClass, "slots = 2", "slots = 1", 1))
	a.WaitForNodeDevice(t, "zfs", "dataset", "scratch", 1, deviceTimeout)

	job := a.RunJob(t, batchJob("beat", "exec", "scratch", beatScript, ""))
	stubs := nomadtest.Counted(a.WaitAllocs(t, *job.ID, nomadtest.AllocsWithStatus(1, api.AllocClientStatusRunning), jobTimeout))
	alloc := allocInfo(t, a, stubs[0].ID)
	ds := p.Parent + "/scratch/" + deviceID(t, alloc)
	dir := "/" + ds
	waitBeat(t, dir, 1)
	waitHolder(t, ds, alloc.ID)
	guid := dataset(t, ds).GUID
	gen := generation(mustLookup(t, ds))
	startedAt := alloc.TaskStates["t"].StartedAt

	pluginsBefore := pluginPIDs(t, a)
	a.Restart(t)
	a.WaitForNodeDevice(t, "zfs", "dataset", "scratch", 1, deviceTimeout)
	t.Logf("plugin processes: %v before the restart, %v after", pluginsBefore, pluginPIDs(t, a))

	// The counter keeps going after the restart: the task is alive and
	// writes through the same mount.
	n := waitBeat(t, dir, 0)
	waitBeat(t, dir, n+3)

	after := allocInfo(t, a, alloc.ID)
	ts := after.TaskStates["t"]
	if after.ClientStatus != api.AllocClientStatusRunning || ts.State != "running" || ts.Restarts != 0 || !ts.StartedAt.Equal(startedAt) {
		t.Errorf("after the restart: alloc %s, task %s, restarts %d, started %s (was %s)\n%s",
			after.ClientStatus, ts.State, ts.Restarts, ts.StartedAt, startedAt, taskEvents(after))
	}
	if id := deviceID(t, after); p.Parent+"/scratch/"+id != ds {
		t.Errorf("device %s after the restart, want %s", id, ds)
	}
	if got := dataset(t, ds).GUID; got != guid {
		t.Errorf("%s: guid %s -> %s: the dataset was recreated", ds, guid, got)
	}
	if got := readFile(t, filepath.Join(dir, "first.txt")); got != "first\n" {
		t.Errorf("%s/first.txt = %q", dir, got)
	}
	// The restarted plugin's watcher still attributes the slot to it.
	waitHolder(t, ds, alloc.ID)
	finish(t, a, alloc.ID)
	waitComplete(t, a, *job.ID)

	// Kept while it ran, released once it ended.
	released := waitReleased(t, ds, gen)
	if released.GUID == guid {
		t.Errorf("%s: guid %s unchanged after the allocation ended: not released", ds, guid)
	}
	checkEntries(t, dir)
}

// waitBeat waits until the counter in dir/beat exceeds min and returns it.
func waitBeat(t testing.TB, dir string, min int) int {
	t.Helper()
	var n int
	waitFor(t, 60*time.Second, fmt.Sprintf("%s/beat > %d", dir, min), func() (bool, string) {
		b, err := readFileErr(filepath.Join(dir, "beat"))
		if err != nil {
			return false, err.Error()
		}
		n, err = strconv.Atoi(strings.TrimSpace(b))
		if err != nil {
			return false, err.Error()
		}
		return n > min, fmt.Sprintf("beat is %d", n)
	})
	return n
}
