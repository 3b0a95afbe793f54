//go:build e2e

package e2e

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"testing"
	"time"

	gozfs "github.com/mistifyio/go-zfs/v3"

	"github.com/nomad-device-zfs/nomad-device-zfs/internal/nomadtest"
)

// TestPoolDegradedAndExported: the slots' instances turn unhealthy, with
// the pool named in the reason, while the pool is DEGRADED (one side of a
// mirror offline) and while it is exported, and healthy again once it is
// back; the slots and their data come back as they were.
func TestPoolDegradedAndExported(t *testing.T) {
	t.Parallel()
	p := newPool(t, "e2epool", true)
	a := startAgent(t, p, scratchClass)
	a.WaitForNodeDevice(t, "zfs", "dataset", "scratch", 2, deviceTimeout)
	before := checkSlots(t, p, "scratch", 2)
	marker := filepath.Join("/"+before["scratch-1"].Name, "marker")
	if err := os.WriteFile(marker, []byte("kept\n"), 0o644); err != nil {
		t.Fatal(err)
	}

	t.Run("degraded", func(t *testing.T) {
		run(t, "zpool", "offline", p.Name, p.Vdevs[1])
		checkPoolHealth(t, p.Name, "DEGRADED")
		a.WaitForUnhealthy(t, "zfs", "dataset", "scratch", fmt.Sprintf("pool %q is DEGRADED", p.Name), deviceTimeout)

		run(t, "zpool", "online", p.Name, p.Vdevs[1])
		checkPoolHealth(t, p.Name, "ONLINE")
		g := a.WaitForNodeDevice(t, "zfs", "dataset", "scratch", 2, deviceTimeout)
		checkInstances(t, g, true, "")
	})

	t.Run("exported", func(t *testing.T) {
		// The plugin's scans hold nothing open; an export can still race
		// one and find the pool busy for a moment.
		exportPool(t, p.Name)
		// On the way out the pool unmounts its datasets ("parent ... is not
		// mounted"), then it is gone.
		a.WaitForUnhealthy(t, "zfs", "dataset", "scratch", fmt.Sprintf("pool %q not found", p.Name), deviceTimeout)

		run(t, "zpool", "import", "-d", p.Dir, p.Name)
		g := a.WaitForNodeDevice(t, "zfs", "dataset", "scratch", 2, deviceTimeout)
		checkInstances(t, g, true, "")
	})

	// The same datasets (no slot was recreated while the pool was away) and
	// the data in them.
	after := checkSlots(t, p, "scratch", 2)
	for id, b := range before {
		if after[id].GUID != b.GUID {
			t.Errorf("%s: guid %s -> %s: the slot was recreated", id, b.GUID, after[id].GUID)
		}
	}
	if got := readFile(t, marker); got != "kept\n" {
		t.Errorf("%s = %q after export and import", marker, got)
	}
}

// exportPool exports pool, retrying while it is busy. A zfs or zpool
// command of the plugin's scan holds a reference on the pool while it runs
// (an export then fails with "pool is busy"), and in the loaded guest a
// scan's commands can take seconds: retry often, and for up to a minute (stretched on a slow guest).
func exportPool(t testing.TB, pool string) {
	t.Helper()
	deadline := nomadtest.NewDeadline(time.Minute, pace.Slowness)
	for n := 1; ; n++ {
		_, err := runErr("zpool", "export", pool)
		if err == nil {
			if n > 1 {
				t.Logf("zpool export %s: done at attempt %d", pool, n)
			}
			return
		}
		if deadline.Passed() {
			t.Fatalf("zpool export %s: still failing after %d attempts (%s): %v", pool, n, deadline, err)
		}
		time.Sleep(200 * time.Millisecond)
	}
}

// checkPoolHealth checks the pool's health with the zfs package and with
// go-zfs.
func checkPoolHealth(t testing.TB, pool, want string) {
	t.Helper()
	pools, err := zc.Pools(context.Background(), pool)
	if err != nil || len(pools) != 1 {
		t.Fatalf("zpool list %s: %v %+v", pool, err, pools)
	}
	if pools[0].Health != want {
		t.Errorf("zfs package: pool %s is %s, want %s", pool, pools[0].Health, want)
	}
	zp, err := gozfs.GetZpool(pool)
	if err != nil {
		t.Fatalf("go-zfs GetZpool(%s): %v", pool, err)
	}
	if zp.Health != want {
		t.Errorf("go-zfs: pool %s is %s, want %s", pool, zp.Health, want)
	}
}
