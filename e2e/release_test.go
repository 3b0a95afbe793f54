//go:build e2e

package e2e

import (
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/hashicorp/nomad/api"

	"github.com/nomad-device-zfs/nomad-device-zfs/internal/nomadtest"
	"github.com/nomad-device-zfs/nomad-device-zfs/zfs"
)

// The release policies on real ZFS. A class has one slot (two for
// snapshot's retain_max), so the next allocation must land on a slot a
// previous one used: that task checks for itself that it finds a clean
// dataset (and fails if it finds the previous holder's files), and the test
// checks the datasets on the host.

// TestReleaseDestroyNextHolderClean: policy destroy. The first holder, an
// exec task, writes through its mount; when it completes, the slot is
// destroyed and created again (a new dataset: another guid, generation+1,
// no holder), nothing is retained, and the next allocation on the same slot
// finds it empty.
func TestReleaseDestroyNextHolderClean(t *testing.T) {
	t.Parallel()
	p := newPool(t, "e2edestroy", false)
	a := startAgentScan(t, p, releaseScan, `class "wipe" {
  slots = 1
  mount = "/data"
  release {
    policy = "destroy"
  }
}`)
	a.WaitForNodeDevice(t, "zfs", "dataset", "wipe", 1, deviceTimeout)
	ds := p.Parent + "/wipe/wipe-1"
	dir := "/" + ds
	before := mustLookup(t, ds)
	gen := generation(before)
	if before.User.Get(propState) != "ready" || gen < 1 {
		t.Fatalf("%s before the first job: %s", ds, describeSlot(before))
	}

	first, out := startHeld(t, a, batchJob("first", "exec", "wipe",
		held(`echo first-holder > /data/first.txt && head -c 1048576 /dev/urandom > /data/first.bin`), ""))
	if !strings.Contains(out, "body exit 0") {
		t.Fatalf("first task failed: %s\nstderr: %s", out, logOrErr(a, first.ID, "stderr"))
	}
	if id := deviceID(t, first); id != "wipe-1" {
		t.Fatalf("first allocation got %s", id)
	}
	waitHolder(t, ds, first.ID)
	checkEntries(t, dir, "first.bin", "first.txt")
	if got := readFile(t, filepath.Join(dir, "first.txt")); got != "first-holder\n" {
		t.Fatalf("%s/first.txt = %q", dir, got)
	}
	finish(t, a, first.ID)
	waitComplete(t, a, "first")

	after := waitSlotFree(t, a, "wipe", ds, gen, 1)
	if after.GUID == before.GUID {
		t.Errorf("%s: guid %s unchanged: the slot was not destroyed and created again", ds, after.GUID)
	}
	checkEntries(t, dir)
	syncPool(t, p.Name)
	if d := mustLookup(t, ds); d.Referenced >= 1<<20 {
		t.Errorf("%s references %d bytes after the release: the first holder's 1 MiB is still there", ds, d.Referenced)
	}
	if r := retainedBelow(t, p.Parent+"/wipe"); len(r) != 0 {
		t.Errorf("policy destroy retained %v", r)
	}

	second, out := runToEnd(t, a, batchJob("second", "exec", "wipe", nextHolderScript("/data", "", ""), ""))
	if id := deviceID(t, second); id != "wipe-1" {
		t.Fatalf("second allocation got %s", id)
	}
	if !strings.Contains(out, "clean and writable") {
		t.Errorf("second task: %s", out)
	}
	t.Logf("second task: %s", strings.TrimSpace(out))
}

// TestReleaseRollbackNextHolderClean: policy rollback. The slot has a
// @pristine snapshot from its creation; the first holder writes a file;
// when it completes, the slot is rolled back: the same dataset (guid) and
// @pristine, the file gone, generation+1; the next allocation finds it
// empty. (A snapshot someone else took below the slot stops the rollback
// instead: TestForeignBelowSlotSurvivesEveryPolicy.)
func TestReleaseRollbackNextHolderClean(t *testing.T) {
	t.Parallel()
	p := newPool(t, "e2erollback", false)
	a := startAgentScan(t, p, releaseScan, `class "roll" {
  slots = 1
  release {
    policy = "rollback"
  }
}`)
	a.WaitForNodeDevice(t, "zfs", "dataset", "roll", 1, deviceTimeout)
	ds := p.Parent + "/roll/roll-1"
	dir := "/" + ds
	before := mustLookup(t, ds)
	gen := generation(before)
	if snaps := snapshotsOf(t, ds); strings.Join(snaps, " ") != "pristine" {
		t.Fatalf("%s has snapshots %v, want pristine", ds, snaps)
	}
	pristine := mustLookup(t, ds+"@pristine")

	first, out := startHeld(t, a, batchJob("first", "raw_exec", "roll",
		held(`echo first-holder > "$ZFS_ROLL_HOST_PATH/first.txt"`), ""))
	if !strings.Contains(out, "body exit 0") {
		t.Fatalf("first task failed: %s\nstderr: %s", out, logOrErr(a, first.ID, "stderr"))
	}
	if id := deviceID(t, first); id != "roll-1" {
		t.Fatalf("first allocation got %s", id)
	}
	waitHolder(t, ds, first.ID)
	if got := readFile(t, filepath.Join(dir, "first.txt")); got != "first-holder\n" {
		t.Fatalf("%s/first.txt = %q", dir, got)
	}
	finish(t, a, first.ID)
	waitComplete(t, a, "first")

	after := waitSlotFree(t, a, "roll", ds, gen, 1)
	if after.GUID != before.GUID {
		t.Errorf("%s: guid %s -> %s: rolled back means the same dataset", ds, before.GUID, after.GUID)
	}
	if snaps := snapshotsOf(t, ds); strings.Join(snaps, " ") != "pristine" {
		t.Errorf("%s has snapshots %v after the rollback, want only pristine", ds, snaps)
	}
	if now := mustLookup(t, ds+"@pristine"); now.GUID != pristine.GUID {
		t.Errorf("%s@pristine: guid %s -> %s", ds, pristine.GUID, now.GUID)
	}
	checkEntries(t, dir)

	second, out := runToEnd(t, a, batchJob("second", "raw_exec", "roll",
		nextHolderScript(`"$ZFS_ROLL_HOST_PATH"`, "", ""), ""))
	if id := deviceID(t, second); id != "roll-1" {
		t.Fatalf("second allocation got %s", id)
	}
	if !strings.Contains(out, "clean and writable") {
		t.Errorf("second task: %s", out)
	}
}

// TestReleaseSnapshotRetainsAndPrunes: policy snapshot with retain_max = 1,
// two slots. Two allocations hold both slots at once and end one after the
// other. Each released slot's data is renamed aside to
// <class>/retained-<alloc ID> (the same dataset, with the holder's data and
// a @retained snapshot carrying the hold nomad-device-zfs, which makes a
// plain destroy of it fail), and a fresh slot takes its place. The second
// release leaves only the newest retained dataset: the older one is pruned
// by retain_max (retain is 1h: not by expiry). A third allocation, on one
// of the released slots, finds it empty. (Expiry: see
// TestReleaseOnFailureRetainsFailedData.)
//
// One class only: two classes with release blocks in one agent share one
// release configuration (see TestClassesKeepTheirOwnReleasePolicy).
func TestReleaseSnapshotRetainsAndPrunes(t *testing.T) {
	t.Parallel()
	p := newPool(t, "e2esnap", false)
	a := startAgentScan(t, p, releaseScan, `class "keep" {
  slots = 2
  release {
    policy     = "snapshot"
    retain     = "1h"
    retain_max = 1
  }
}`)
	a.WaitForNodeDevice(t, "zfs", "dataset", "keep", 2, deviceTimeout)
	classDS := p.Parent + "/keep"
	before := datasetsByName(t, classDS+"/keep-1", classDS+"/keep-2")

	// Both slots held at once.
	job := func(id string) string {
		return batchJob(id, "raw_exec", "keep", held(`echo `+id+` > "$ZFS_KEEP_HOST_PATH/data.txt"`), "")
	}
	firstJob, secondJob := a.RunJob(t, job("first")), a.RunJob(t, job("second"))
	first, out1 := waitHeld(t, a, *firstJob.ID)
	second, out2 := waitHeld(t, a, *secondJob.ID)
	for _, h := range []struct {
		alloc *api.Allocation
		out   string
	}{{first, out1}, {second, out2}} {
		if !strings.Contains(h.out, "body exit 0") {
			t.Fatalf("task %s: %s\nstderr: %s", h.alloc.JobID, h.out, logOrErr(a, h.alloc.ID, "stderr"))
		}
	}
	ds1, ds2 := classDS+"/"+deviceID(t, first), classDS+"/"+deviceID(t, second)
	if ds1 == ds2 {
		t.Fatalf("both allocations got %s", ds1)
	}
	waitHolder(t, ds1, first.ID)
	waitHolder(t, ds2, second.ID)

	// The first ends: its data is retained, a fresh slot replaces it.
	ended1 := time.Now()
	finish(t, a, first.ID)
	waitComplete(t, a, "first")
	fresh1 := waitReleased(t, ds1, generation(before[ds1]))
	if fresh1.GUID == before[ds1].GUID {
		t.Errorf("%s: guid %s unchanged: no fresh slot in place of the retained one", ds1, fresh1.GUID)
	}
	checkEntries(t, "/"+ds1)
	r1 := classDS + "/retained-" + first.ID
	checkRetained(t, r1, before[ds1].GUID, first.ID, "complete", "first\n", time.Hour, ended1)
	// The hold is real: a plain destroy of the snapshot is refused.
	if out, err := runErr("zfs", "destroy", r1+"@retained"); err == nil {
		t.Errorf("zfs destroy %s@retained succeeded despite the hold: %s", r1, out)
	} else {
		t.Logf("zfs destroy %s@retained: %v", r1, err)
	}
	if !exists(t, r1+"@retained") {
		t.Fatalf("%s@retained is gone", r1)
	}
	if r := retainedBelow(t, classDS); strings.Join(r, " ") != r1 {
		t.Errorf("retained %v, want only %s", r, r1)
	}

	// The second ends a second later (retained data is ordered by release
	// time, in seconds): retain_max = 1 keeps only its data.
	time.Sleep(time.Second)
	ended2 := time.Now()
	finish(t, a, second.ID)
	waitComplete(t, a, "second")
	fresh2 := waitReleased(t, ds2, generation(before[ds2]))
	if fresh2.GUID == before[ds2].GUID {
		t.Errorf("%s: guid %s unchanged: no fresh slot in place of the retained one", ds2, fresh2.GUID)
	}
	checkEntries(t, "/"+ds2)
	r2 := classDS + "/retained-" + second.ID
	checkRetained(t, r2, before[ds2].GUID, second.ID, "complete", "second\n", time.Hour, ended2)
	waitFor(t, releaseTimeout, r1+" pruned (retain_max = 1)", func() (bool, string) {
		r := retainedBelow(t, classDS)
		return strings.Join(r, " ") == r2, fmt.Sprintf("retained: %v", r)
	})
	checkPruneLog(t, a, r1, false)
	checkRetained(t, r2, before[ds2].GUID, second.ID, "complete", "second\n", time.Hour, ended2)

	// The next allocation, on one of the released slots, finds it empty.
	a.WaitForNodeDevice(t, "zfs", "dataset", "keep", 2, deviceTimeout)
	third, out := runToEnd(t, a, batchJob("third", "raw_exec", "keep",
		nextHolderScript(`"$ZFS_KEEP_HOST_PATH"`, "", ""), ""))
	if !strings.Contains(out, "clean and writable") {
		t.Errorf("third task on %s: %s", deviceID(t, third), out)
	}
}

// datasetsByName returns the rows of the named datasets.
func datasetsByName(t testing.TB, names ...string) map[string]zfs.Dataset {
	t.Helper()
	m := map[string]zfs.Dataset{}
	for _, n := range names {
		m[n] = mustLookup(t, n)
	}
	return m
}

// checkPruneLog checks that the plugin logged pruning dataset, by expiry
// or (expired=false) by retain_max. The line reaches the agent log a moment
// after the dataset is gone (the plugin's output is relayed by the agent).
func checkPruneLog(t testing.TB, a *nomadtest.Agent, dataset string, expired bool) {
	t.Helper()
	var line string
	waitFor(t, 30*time.Second, "the agent log to tell "+dataset+" was pruned", func() (bool, string) {
		line = lastLine(a.Logs(), "pruned retained data", "dataset="+dataset)
		return line != "", "no such line"
	})
	if !strings.Contains(line, fmt.Sprintf("expired=%v", expired)) {
		t.Errorf("%s was pruned, but not with expired=%v: %s", dataset, expired, line)
	}
}

// checkRetained checks a retained dataset: the former slot (guid), marked
// retained, owned under its own name, naming its holder and outcome,
// expiring retain after its release (which began after ended), mounted
// with the holder's data.txt, and a @retained snapshot under the plugin's
// hold. It returns its row.
func checkRetained(t testing.TB, name, guid, holder, outcome, data string, retain time.Duration, ended time.Time) zfs.Dataset {
	t.Helper()
	// The release's last write makes the data retained, after the fresh
	// slot is in place (a crash before it still has the slot re-created as
	// the release would: model.PlanEnsure).
	var d zfs.Dataset
	waitFor(t, releaseTimeout, name+" retained", func() (bool, string) {
		var ok bool
		var err error
		d, ok, err = lookup(name)
		if err != nil || !ok {
			return false, fmt.Sprintf("exists %v: %v", ok, err)
		}
		return d.User.Get(propState) == "retained", fmt.Sprintf("state %q owner %q", d.User.Get(propState), d.User.Get(propOwner))
	})
	if d.GUID != guid {
		t.Errorf("%s: guid %s, want %s: not the former slot", name, d.GUID, guid)
	}
	if d.User.Get(propState) != "retained" || d.User.Get(propOwner) != name || d.User.Get(propHolder) != holder || d.User.Get(propOutcome) != outcome {
		t.Errorf("%s: state %q owner %q holder %q outcome %q, want retained, its own name, %s, %s",
			name, d.User.Get(propState), d.User.Get(propOwner), d.User.Get(propHolder), d.User.Get(propOutcome), holder, outcome)
	}
	// The expiry is set when the release begins: after ended (taken
	// before the holder was let end), before now.
	if expires, err := strconv.ParseInt(d.User.Get(propExpires), 10, 64); err != nil {
		t.Errorf("%s: %s = %q", name, propExpires, d.User.Get(propExpires))
	} else if lo, hi := ended.Add(retain).Unix()-1, time.Now().Add(retain).Unix(); expires < lo || expires > hi {
		t.Errorf("%s: expires at %d, want %s after the release, between %d and %d", name, expires, retain, lo, hi)
	}
	if _, err := strconv.ParseInt(d.User.Get(propSince), 10, 64); err != nil {
		t.Errorf("%s: %s = %q", name, propSince, d.User.Get(propSince))
	}
	if !d.Mounted || d.Mountpoint != "/"+name {
		t.Errorf("%s: mounted %v at %q", name, d.Mounted, d.Mountpoint)
	}
	if got, err := readFileErr(filepath.Join("/"+name, "data.txt")); got != data {
		t.Errorf("%s/data.txt = %q (%v), want %q: the holder's data", name, got, err, data)
	}
	if snaps := snapshotsOf(t, name); strings.Join(snaps, " ") != "retained" {
		t.Errorf("%s: snapshots %v, want retained", name, snaps)
	}
	checkHolds(t, name+"@retained")
	return d
}

// TestReleaseGoldenCloneNextHolderSeesSeed: a class cloned from a golden
// snapshot (from_snapshot). Each slot is a clone (origin) holding the seed
// file; the first holder modifies the seed and adds a file; after the
// release the slot is a new clone of the same snapshot, with the original
// seed and nothing else, the golden dataset and snapshot untouched, and
// the next allocation sees the original seed.
func TestReleaseGoldenCloneNextHolderSeesSeed(t *testing.T) {
	t.Parallel()
	p := newPool(t, "e2egolden", false)
	golden := p.Name + "/golden"
	seed := golden + "@seed"
	run(t, "zfs", "create", golden)
	if err := os.WriteFile("/"+golden+"/seed.txt", []byte("seed-v1\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	run(t, "zfs", "snapshot", seed)
	seedRow := mustLookup(t, seed)

	a := startAgentScan(t, p, releaseScan, fmt.Sprintf(`class "pg" {
  slots         = 1
  from_snapshot = %q
}`, seed))
	a.WaitForNodeDevice(t, "zfs", "dataset", "pg", 1, deviceTimeout)
	ds := p.Parent + "/pg/pg-1"
	dir := "/" + ds
	before := mustLookup(t, ds)
	gen := generation(before)
	if before.Origin != seed {
		t.Fatalf("%s: origin %q, want %s", ds, before.Origin, seed)
	}
	checkEntries(t, dir, "seed.txt")
	if got := readFile(t, filepath.Join(dir, "seed.txt")); got != "seed-v1\n" {
		t.Fatalf("%s/seed.txt = %q", dir, got)
	}

	first, out := startHeld(t, a, batchJob("first", "raw_exec", "pg",
		held(`echo modified > "$ZFS_PG_HOST_PATH/seed.txt" && echo extra > "$ZFS_PG_HOST_PATH/extra.txt"`), ""))
	if !strings.Contains(out, "body exit 0") || deviceID(t, first) != "pg-1" {
		t.Fatalf("first task on %s: %s\nstderr: %s", deviceID(t, first), out, logOrErr(a, first.ID, "stderr"))
	}
	waitHolder(t, ds, first.ID)
	if got := readFile(t, filepath.Join(dir, "seed.txt")); got != "modified\n" {
		t.Fatalf("%s/seed.txt = %q after the first holder modified it", dir, got)
	}
	finish(t, a, first.ID)
	waitComplete(t, a, "first")

	after := waitSlotFree(t, a, "pg", ds, gen, 1)
	if after.GUID == before.GUID {
		t.Errorf("%s: guid %s unchanged: not cloned again", ds, after.GUID)
	}
	if after.Origin != seed {
		t.Errorf("%s: origin %q after the release, want %s", ds, after.Origin, seed)
	}
	checkEntries(t, dir, "seed.txt")
	if got := readFile(t, filepath.Join(dir, "seed.txt")); got != "seed-v1\n" {
		t.Errorf("%s/seed.txt = %q after the release, want the seed", dir, got)
	}
	// The golden snapshot is the same, its only clone the new slot, and
	// the golden dataset untouched.
	if now := mustLookup(t, seed); now.GUID != seedRow.GUID {
		t.Errorf("%s: guid %s -> %s", seed, seedRow.GUID, now.GUID)
	}
	if clones := strings.TrimSpace(run(t, "zfs", "get", "-H", "-o", "value", "clones", seed)); clones != ds {
		t.Errorf("%s: clones %q, want only %s", seed, clones, ds)
	}
	if got := readFile(t, "/"+golden+"/seed.txt"); got != "seed-v1\n" {
		t.Errorf("/%s/seed.txt = %q", golden, got)
	}

	second, out := runToEnd(t, a, batchJob("second", "raw_exec", "pg",
		nextHolderScript(`"$ZFS_PG_HOST_PATH"`, "seed.txt",
			`s=$(cat "$d/seed.txt"); echo "seed: $s"; [ "$s" = seed-v1 ] || { echo "SEED CHANGED"; exit 1; }`), ""))
	if id := deviceID(t, second); id != "pg-1" {
		t.Fatalf("second allocation got %s", id)
	}
	if !strings.Contains(out, "seed: seed-v1") || !strings.Contains(out, "clean and writable") {
		t.Errorf("second task: %s", out)
	}
}
