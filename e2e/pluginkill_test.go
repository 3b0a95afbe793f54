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
)

// TestPluginKilledIsRelaunched: the plugin process dies (SIGKILL) while an
// allocation holds a slot. The Nomad client launches it again within
// seconds; the new process resumes from the datasets (no slot recreated,
// the holder's data untouched, the slot still attributed to it), the
// instances are healthy, and a new task is reserved the other slot through
// it.
func TestPluginKilledIsRelaunched(t *testing.T) {
	t.Parallel()
	p := newPool(t, "e2ekill", false)
	a := startAgent(t, p, scratchClass)
	a.WaitForNodeDevice(t, "zfs", "dataset", "scratch", 2, deviceTimeout)

	first, _ := startHeld(t, a, batchJob("holder", "raw_exec", "scratch",
		held(`echo before-kill > "$ZFS_SCRATCH_HOST_PATH/before.txt"`), ""))
	firstDS := p.Parent + "/scratch/" + deviceID(t, first)
	marker := filepath.Join("/"+firstDS, "before.txt")
	waitHolder(t, firstDS, first.ID)
	before := checkSlots(t, p, "scratch", 2)

	pids := pluginPIDs(t, a)
	if len(pids) != 1 {
		t.Fatalf("plugin processes %v, want exactly one", pids)
	}
	killed := time.Now()
	killProcess(t, pids[0])
	seen := map[int]bool{}
	waitFor(t, 60*time.Second, "a new plugin process", func() (bool, string) {
		now := pluginPIDs(t, a)
		for _, pid := range now {
			seen[pid] = true
		}
		return len(now) > 0 && now[0] != pids[0], fmt.Sprintf("plugin processes %v", now)
	})
	t.Logf("plugin pid %d killed; a new one running %s later", pids[0], time.Since(killed).Round(100*time.Millisecond))

	g := a.WaitForNodeDevice(t, "zfs", "dataset", "scratch", 2, deviceTimeout)
	checkInstances(t, g, true, "")
	// Then one plugin process, the same for 2 s.
	var relaunched int
	stable := time.Now()
	waitFor(t, 30*time.Second, "one plugin process", func() (bool, string) {
		now := pluginPIDs(t, a)
		for _, pid := range now {
			seen[pid] = true
		}
		if len(now) != 1 || now[0] != relaunched {
			relaunched, stable = 0, time.Now()
			if len(now) == 1 {
				relaunched = now[0]
			}
		}
		return relaunched != 0 && time.Since(stable) > 2*time.Second, fmt.Sprintf("plugin processes %v", now)
	})
	delete(seen, pids[0])
	var all []int
	for pid := range seen {
		all = append(all, pid)
	}
	sort.Ints(all)
	t.Logf("plugin processes seen since the kill: %v; running: %d", all, relaunched)
	after := checkSlots(t, p, "scratch", 2)
	for id, b := range before {
		if after[id].GUID != b.GUID {
			t.Errorf("%s: guid %s -> %s: the slot was recreated", id, b.GUID, after[id].GUID)
		}
	}
	if got, err := readFileErr(marker); got != "before-kill\n" {
		t.Errorf("%s = %q (%v) after the plugin was killed", marker, got, err)
	}
	waitHolder(t, firstDS, first.ID)

	// Reserve is answered by the new process, with the free slot.
	second, out := startHeld(t, a, batchJob("after", "raw_exec", "scratch",
		held(`ls "$ZFS_SCRATCH_HOST_PATH" && echo "id=$ZFS_SCRATCH_ID"`), ""))
	id := deviceID(t, second)
	if p.Parent+"/scratch/"+id == firstDS {
		t.Errorf("the second allocation got the held slot %s", id)
	}
	if !strings.Contains(out, "id="+id) || strings.Contains(out, "before.txt") {
		t.Errorf("the task after the relaunch: want ZFS_SCRATCH_ID=%s and an empty slot:\n%s", id, out)
	}
	if now := pluginPIDs(t, a); len(now) != 1 || now[0] != relaunched {
		t.Errorf("plugin processes %v after the second job, want only the relaunched %d", now, relaunched)
	}
	if _, err := os.Stat(marker); err != nil {
		t.Errorf("the first holder's data: %v", err)
	}
	finish(t, a, first.ID)
	finish(t, a, second.ID)
	waitComplete(t, a, "holder")
	waitComplete(t, a, "after")
}
