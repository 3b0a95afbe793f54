//go:build e2e

package e2e

import (
	"fmt"
	"os/exec"
	"strings"
	"testing"

	"github.com/hashicorp/nomad/api"

	"github.com/nomad-device-zfs/nomad-device-zfs/internal/nomadtest"
)

// TestClassesOnTwoPools: one plugin block, a class on each of two pools
// (bulk below the block's parent, fast below its own parent on a mirror
// pool). A job on fast is placed on the second pool's slot and released
// there: destroyed and created again below the second pool's parent, the
// first pool untouched. Then the second pool goes DEGRADED: only fast's
// instance turns unhealthy, a job on bulk is still placed and its slot
// released, and the operator CLI's status and doctor show both pools, the
// DEGRADED one as the only problem.
func TestClassesOnTwoPools(t *testing.T) {
	t.Parallel()
	bulkPool, fastPool := newPool(t, "e2etwo", false), newPool(t, "e2etwofast", true)
	a := startAgentScan(t, bulkPool, releaseScan, fmt.Sprintf(`class "bulk" {
  slots = 1
  mount = "/bulk"
}
class "fast" {
  parent = %q
  slots  = 1
  mount  = "/fast"
}`, fastPool.Parent))
	a.WaitForNodeDevice(t, "zfs", "dataset", "bulk", 1, deviceTimeout)
	a.WaitForNodeDevice(t, "zfs", "dataset", "fast", 1, deviceTimeout)
	bulk := checkSlots(t, bulkPool, "bulk", 1)["bulk-1"]
	fast := checkSlots(t, fastPool, "fast", 1)["fast-1"]
	for _, ds := range []string{bulkPool.Parent + "/fast", fastPool.Parent + "/bulk"} {
		if _, ok, err := lookup(ds); ok || err != nil {
			t.Errorf("%s exists (%v): a class was made below the other parent", ds, err)
		}
	}

	t.Run("a job on the second pool's class", func(t *testing.T) {
		ds := fast.Name
		gen := generation(mustLookup(t, ds))
		alloc, out := startHeld(t, a, batchJob("on-fast", "exec", "fast", held(`echo mine > /fast/mine`), ""))
		if !strings.Contains(out, "body exit 0") {
			t.Fatalf("task failed: %s\nstderr: %s", out, logOrErr(a, alloc.ID, "stderr"))
		}
		if id := deviceID(t, alloc); id != "fast-1" {
			t.Fatalf("placed on %s", id)
		}
		waitHolder(t, ds, alloc.ID)
		if got := readFile(t, "/"+ds+"/mine"); got != "mine\n" {
			t.Fatalf("/%s/mine = %q: the task did not write into the second pool's slot", ds, got)
		}
		finish(t, a, alloc.ID)
		waitComplete(t, a, "on-fast")
		after := waitSlotFree(t, a, "fast", ds, gen, 1)
		if after.GUID == fast.GUID {
			t.Errorf("%s: guid unchanged: not destroyed and created again", ds)
		}
		checkEntries(t, "/"+ds)
		if b := mustLookup(t, bulk.Name); b.GUID != bulk.GUID || generation(b) != 1 {
			t.Errorf("%s changed by a release on the other pool", bulk.Name)
		}
	})

	t.Run("the second pool degraded", func(t *testing.T) {
		run(t, "zpool", "offline", fastPool.Name, fastPool.Vdevs[1])
		checkPoolHealth(t, fastPool.Name, "DEGRADED")
		a.WaitForUnhealthy(t, "zfs", "dataset", "fast", fmt.Sprintf("pool %q is DEGRADED", fastPool.Name), deviceTimeout)
		checkInstances(t, nodeGroup(t, a, "bulk"), true, "")

		// The first pool's class is placed and released meanwhile.
		gen := generation(mustLookup(t, bulk.Name))
		alloc := runBatch(t, a, batchJob("on-bulk", "exec", "bulk", `echo mine > /bulk/mine`, ""), api.AllocClientStatusComplete)
		if id := deviceID(t, alloc); id != "bulk-1" {
			t.Fatalf("placed on %s", id)
		}
		waitSlotFree(t, a, "bulk", bulk.Name, gen, 1)
		checkEntries(t, "/"+bulk.Name)

		status := ctl(t, a, 0, "status")
		for _, want := range []string{
			fmt.Sprintf("Parent    = %s (class bulk)", bulkPool.Parent),
			fmt.Sprintf("Pool      = %s (ONLINE,", bulkPool.Name),
			fmt.Sprintf("Parent    = %s (class fast)", fastPool.Parent),
			fmt.Sprintf("Pool      = %s (DEGRADED,", fastPool.Name),
			fmt.Sprintf("Problem   = pool %q is DEGRADED", fastPool.Name),
			fmt.Sprintf("fast-1  pool %q is DEGRADED", fastPool.Name),
		} {
			if !strings.Contains(status, want) {
				t.Errorf("status lacks %q", want)
			}
		}
		doctor := ctl(t, a, 1, "doctor")
		fails := linesOf(doctor, "✗")
		if want := fmt.Sprintf("✗ pool %q is DEGRADED", fastPool.Name); len(fails) != 1 || fails[0] != want {
			t.Errorf("doctor's problems %q, want only %q", fails, want)
		}
		for _, want := range []string{
			fmt.Sprintf("✓ parent %q exists and is mounted", bulkPool.Parent),
			fmt.Sprintf("✓ class \"bulk\": %s/bulk is the plugin's", bulkPool.Parent),
		} {
			if !strings.Contains(doctor, want) {
				t.Errorf("doctor lacks %q", want)
			}
		}

		run(t, "zpool", "online", fastPool.Name, fastPool.Vdevs[1])
		checkPoolHealth(t, fastPool.Name, "ONLINE")
		checkInstances(t, a.WaitForNodeDevice(t, "zfs", "dataset", "fast", 1, deviceTimeout), true, "")
	})
}

// nodeGroup is the device group zfs/dataset/name of a's node as the
// servers have it now.
func nodeGroup(t testing.TB, a *nomadtest.Agent, name string) *api.NodeDeviceResource {
	t.Helper()
	node, _, err := a.Client().Nodes().Info(a.NodeID(), nil)
	if err != nil {
		t.Fatal(err)
	}
	for _, g := range node.NodeResources.Devices {
		if g.Vendor == "zfs" && g.Type == "dataset" && g.Name == name {
			return g
		}
	}
	t.Fatalf("node has no device group zfs/dataset/%s", name)
	return nil
}

// ctl runs the operator CLI's command against agent a's configuration,
// checks its exit status and returns its output, which it logs: the real
// output docs/cli.md shows.
func ctl(t testing.TB, a *nomadtest.Agent, wantCode int, command string) string {
	t.Helper()
	cmd := exec.Command(ctlBin, command, "-config", a.ConfigFile())
	out, err := cmd.CombinedOutput()
	code := 0
	if ee, ok := err.(*exec.ExitError); ok {
		code = ee.ExitCode()
	} else if err != nil {
		t.Fatalf("%s %s: %v", ctlName, command, err)
	}
	t.Logf("# %s %s (exit %d)\n%s", ctlName, command, code, out)
	if code != wantCode {
		t.Fatalf("%s %s: exit %d, want %d", ctlName, command, code, wantCode)
	}
	return string(out)
}

// linesOf returns the lines of s that start (after spaces) with prefix,
// trimmed.
func linesOf(s, prefix string) []string {
	var out []string
	for _, l := range strings.Split(s, "\n") {
		if l = strings.TrimSpace(l); strings.HasPrefix(l, prefix) {
			out = append(out, l)
		}
	}
	return out
}
