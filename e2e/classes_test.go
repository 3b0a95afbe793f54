//go:build e2e

package e2e

import (
	"strings"
	"testing"
	"time"
)

// TestClassesKeepTheirOwnReleasePolicy: two classes with different release
// blocks in one agent, "keep" (snapshot) and "wipe" (destroy). A completed
// allocation on each: keep's data is retained as keep/retained-<alloc ID>,
// wipe's is destroyed.
//
// This test found the bug it guards against: the plugin decoded its
// configuration into map[string]ClassConfig, and the msgpack decoder reused
// one value for every entry, so all classes shared the release block (and
// the properties) of the class decoded last: keep's data was destroyed.
func TestClassesKeepTheirOwnReleasePolicy(t *testing.T) {
	t.Parallel()
	p := newPool(t, "e2eclasses", false)
	a := startAgentScan(t, p, releaseScan, `class "keep" {
  slots = 1
  release {
    policy = "snapshot"
    retain = "1h"
  }
}
class "wipe" {
  slots = 1
  release {
    policy = "destroy"
  }
}`)
	a.WaitForNodeDevice(t, "zfs", "dataset", "keep", 1, deviceTimeout)
	a.WaitForNodeDevice(t, "zfs", "dataset", "wipe", 1, deviceTimeout)
	keepDS, wipeDS := p.Parent+"/keep/keep-1", p.Parent+"/wipe/wipe-1"
	keepBefore, wipeBefore := mustLookup(t, keepDS), mustLookup(t, wipeDS)

	ended := time.Now()
	keep, _ := runToEnd(t, a, batchJob("keep", "raw_exec", "keep", `echo keep-holder > "$ZFS_KEEP_HOST_PATH/data.txt"`, ""))
	runToEnd(t, a, batchJob("wipe", "raw_exec", "wipe", `echo wipe-holder > "$ZFS_WIPE_HOST_PATH/data.txt"`, ""))
	waitReleased(t, keepDS, generation(keepBefore))
	waitReleased(t, wipeDS, generation(wipeBefore))

	kept := p.Parent + "/keep/retained-" + keep.ID
	if !exists(t, kept) {
		t.Errorf("class keep has policy snapshot, but %s does not exist: the holder's data was not retained; agent log: %s",
			kept, lastLine(a.Logs(), "releasing slot", "slot=keep-1"))
	} else {
		checkRetained(t, kept, keepBefore.GUID, keep.ID, "complete", "keep-holder\n", time.Hour, ended)
	}
	if r := retainedBelow(t, p.Parent+"/wipe"); len(r) != 0 {
		t.Errorf("class wipe has policy destroy, but retained %v; agent log: %s", r, lastLine(a.Logs(), "releasing slot", "slot=wipe-1"))
	}
}

// lastLine returns the last line of log holding every one of subs.
func lastLine(log string, subs ...string) string {
	lines := strings.Split(log, "\n")
	for i := len(lines) - 1; i >= 0; i-- {
		if countLines(lines[i], subs...) == 1 {
			return strings.TrimSpace(lines[i])
		}
	}
	return ""
}
