//go:build e2e

package e2e

import (
	"context"
	"errors"
	"fmt"
	"os"
	"sort"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/hashicorp/nomad/api"

	"github.com/nomad-device-zfs/nomad-device-zfs/internal/nomadtest"
	"github.com/nomad-device-zfs/nomad-device-zfs/zfs"
)

// More of the plugin's user properties (docs/how-it-works.md: the slot
// lifecycle).
const (
	propGeneration = "nomad-device-zfs:generation"
	propOutcome    = "nomad-device-zfs:outcome"
	propSince      = "nomad-device-zfs:since"
	propExpires    = "nomad-device-zfs:expires"
)

// holdTag is the zfs hold docs/configuration.md says retained snapshots
// carry (class.release.policy).
const holdTag = "nomad-device-zfs"

// releaseTimeout bounds a release from the allocation's end to the slot's
// being ready again: the watcher sees the end within a second, a release
// is a few zfs commands of 80-180 ms each.
const releaseTimeout = 60 * time.Second

var lifecycleProps = []string{propOwner, propState, propHolder, propGeneration, propOutcome, propSince, propExpires}

// lookupAll lists root and everything below it (snapshots too) with the
// lifecycle properties; a root that does not exist is an empty map.
func lookupAll(root string) (map[string]zfs.Dataset, error) {
	sets, err := zc.List(context.Background(), root, lifecycleProps)
	if errors.Is(err, zfs.ErrNotExist) {
		return map[string]zfs.Dataset{}, nil
	}
	if err != nil {
		return nil, err
	}
	m := make(map[string]zfs.Dataset, len(sets))
	for _, d := range sets {
		m[d.Name] = d
	}
	return m, nil
}

// lookup returns one dataset's or snapshot's row; ok is false when it does
// not exist.
func lookup(name string) (d zfs.Dataset, ok bool, err error) {
	root, _, _ := strings.Cut(name, "@") // zfs list -r of a snapshot's dataset lists it
	m, err := lookupAll(root)
	if err != nil {
		return zfs.Dataset{}, false, err
	}
	d, ok = m[name]
	return d, ok, nil
}

// mustLookup returns one dataset's row and fails the test if it is missing.
func mustLookup(t testing.TB, name string) zfs.Dataset {
	t.Helper()
	d, ok, err := lookup(name)
	if err != nil {
		t.Fatalf("zfs list %s: %v", name, err)
	}
	if !ok {
		t.Fatalf("zfs list %s: does not exist", name)
	}
	return d
}

// exists reports whether a dataset or snapshot exists.
func exists(t testing.TB, name string) bool {
	t.Helper()
	_, ok, err := lookup(name)
	if err != nil {
		t.Fatalf("zfs list %s: %v", name, err)
	}
	return ok
}

func generation(d zfs.Dataset) int {
	n, _ := strconv.Atoi(d.User.Get(propGeneration))
	return n
}

func describeSlot(d zfs.Dataset) string {
	return fmt.Sprintf("state %q generation %q holder %q outcome %q mounted %v guid %s",
		d.User.Get(propState), d.User.Get(propGeneration), d.User.Get(propHolder), d.User.Get(propOutcome), d.Mounted, d.GUID)
}

// waitState waits until slot ds is in state (a "releasing" slot that
// finishes in between is missed: use it for states that last).
func waitState(t testing.TB, ds, state string) zfs.Dataset {
	t.Helper()
	var d zfs.Dataset
	waitFor(t, releaseTimeout, ds+" "+state, func() (bool, string) {
		var ok bool
		var err error
		d, ok, err = lookup(ds)
		if err != nil || !ok {
			return false, fmt.Sprintf("exists %v: %v", ok, err)
		}
		return d.User.Get(propState) == state, describeSlot(d)
	})
	return d
}

// waitReleased waits until slot ds, at generation gen when its holder
// ended, is ready again at generation gen+1, mounted, with no holder
// recorded, and returns its row.
func waitReleased(t testing.TB, ds string, gen int) zfs.Dataset {
	t.Helper()
	var d zfs.Dataset
	waitFor(t, releaseTimeout, fmt.Sprintf("%s released (ready at generation %d)", ds, gen+1), func() (bool, string) {
		var ok bool
		var err error
		d, ok, err = lookup(ds)
		if err != nil || !ok {
			return false, fmt.Sprintf("exists %v: %v", ok, err)
		}
		return d.User.Get(propState) == "ready" && generation(d) == gen+1 && d.User.Get(propHolder) == "" && d.Mounted,
			describeSlot(d)
	})
	if d.User.Get(propOwner) != ds {
		t.Errorf("%s: %s = %q after the release, want its own name", ds, propOwner, d.User.Get(propOwner))
	}
	if d.Mountpoint != "/"+ds {
		t.Errorf("%s: mountpoint %q after the release", ds, d.Mountpoint)
	}
	return d
}

// releaseScan is the scan_interval of the release tests: a release is
// triggered by the allocation watcher; scans only retry a busy release and
// prune expired retained data.
const releaseScan = 5 * time.Second

// waitSlotFree waits until slot ds of class, at generation gen when its
// holder ended, is released (waitReleased) and the node record shows all
// slots instances of class healthy, and returns the slot's row; tests that
// check what a release left use it before they start the next job.
func waitSlotFree(t testing.TB, a *nomadtest.Agent, class, ds string, gen, slots int) zfs.Dataset {
	t.Helper()
	d := waitReleased(t, ds, gen)
	a.WaitForNodeDevice(t, "zfs", "dataset", class, slots, deviceTimeout)
	return d
}

// entries lists a directory's names, sorted (a dataset's .zfs is hidden).
func entries(t testing.TB, dir string) []string {
	t.Helper()
	es, err := os.ReadDir(dir)
	if err != nil {
		t.Fatal(err)
	}
	var names []string
	for _, e := range es {
		names = append(names, e.Name())
	}
	sort.Strings(names)
	return names
}

// checkEntries checks that dir holds exactly want (sorted names).
func checkEntries(t testing.TB, dir string, want ...string) {
	t.Helper()
	got := entries(t, dir)
	if strings.Join(got, " ") != strings.Join(want, " ") {
		t.Errorf("%s holds %q, want %q", dir, got, want)
	}
}

// snapshotsOf returns the names of ds's snapshots (the part after @),
// sorted.
func snapshotsOf(t testing.TB, ds string) []string {
	t.Helper()
	all, err := lookupAll(ds)
	if err != nil {
		t.Fatalf("zfs list %s: %v", ds, err)
	}
	var snaps []string
	for name, d := range all {
		if d.IsSnapshot() && strings.HasPrefix(name, ds+"@") {
			snaps = append(snaps, strings.TrimPrefix(name, ds+"@"))
		}
	}
	sort.Strings(snaps)
	return snaps
}

// retainedBelow returns the retained datasets directly below classDS
// (retained-<alloc ID>), sorted.
func retainedBelow(t testing.TB, classDS string) []string {
	t.Helper()
	all, err := lookupAll(classDS)
	if err != nil {
		t.Fatalf("zfs list %s: %v", classDS, err)
	}
	var out []string
	for name, d := range all {
		if !d.IsSnapshot() && zfs.Parent(name) == classDS && strings.HasPrefix(name, classDS+"/retained-") {
			out = append(out, name)
		}
	}
	sort.Strings(out)
	return out
}

// nextHolderScript is the body of a task that must find its slot, at dir,
// holding exactly want (one name, or "" for empty), and otherwise fails:
// the next allocation checks for itself that it got a clean dataset. It
// then writes a file of its own, to show the slot is writable.
func nextHolderScript(dir, want, extra string) string {
	s := fmt.Sprintf(`d=%s; got=$(ls -A "$d"); echo "slot holds: [$got]"; `+
		`if [ "$got" != %q ]; then echo "NOT CLEAN: want [%s]"; exit 1; fi; `, dir, want, want)
	if extra != "" {
		s += extra + "; "
	}
	return s + `echo next > "$d/next.txt" && echo "clean and writable"`
}

// runToEnd registers a one-allocation job, waits until its allocation has
// ended, and fails the test unless it completed; it returns the allocation
// and task "t"'s stdout.
func runToEnd(t *testing.T, a *nomadtest.Agent, jobHCL string) (*api.Allocation, string) {
	t.Helper()
	job := a.RunJob(t, jobHCL)
	return waitEndedOut(t, a, *job.ID)
}

// waitEndedOut waits until the single allocation of job has ended and
// fails the test unless it completed; it returns the allocation and task
// "t"'s stdout.
func waitEndedOut(t *testing.T, a *nomadtest.Agent, job string) (*api.Allocation, string) {
	t.Helper()
	stubs := a.WaitAllocs(t, job, func(allocs []*api.AllocationListStub) bool {
		if len(allocs) != 1 {
			return false
		}
		switch allocs[0].ClientStatus {
		case api.AllocClientStatusComplete, api.AllocClientStatusFailed, api.AllocClientStatusLost:
			return true
		}
		return false
	}, jobTimeout)
	alloc := allocInfo(t, a, stubs[0].ID)
	out := logOrErr(a, alloc.ID, "stdout")
	if alloc.ClientStatus != api.AllocClientStatusComplete {
		t.Fatalf("allocation %s of job %s: %s (%s), want complete\nstdout: %s\nstderr: %s\n%s", alloc.ID, job,
			alloc.ClientStatus, alloc.ClientDescription, out, logOrErr(a, alloc.ID, "stderr"), taskEvents(alloc))
	}
	return alloc, out
}

// checkHolds checks with the zfs package and with `zfs holds -H` that snap
// carries the plugin's hold.
func checkHolds(t testing.TB, snap string) {
	t.Helper()
	holds, err := zc.Holds(context.Background(), snap)
	if err != nil {
		t.Fatalf("zfs holds %s: %v", snap, err)
	}
	found := false
	for _, h := range holds {
		found = found || (h.Snapshot == snap && h.Tag == holdTag)
	}
	if !found {
		t.Errorf("%s: holds %+v, want the tag %s", snap, holds, holdTag)
	}
	out := run(t, "zfs", "holds", "-H", snap)
	if f := strings.Fields(out); len(f) < 2 || f[0] != snap || f[1] != holdTag {
		t.Errorf("zfs holds -H %s: %q, want the tag %s", snap, out, holdTag)
	}
}
