package scheduler

import (
	"testing"
)

// TestSnapshotRestore: a snapshot is the cluster as it was; what the
// original does since is not in it, and allocations placed after a
// restore get indexes from the snapshot's on, below those the original
// gave meanwhile (the world a restored cluster shows its clients).
func TestSnapshotRestore(t *testing.T) {
	c := newCluster(t, slots("scratch", 2), false)
	a := register(t, c, job("a", 1, 50, Ask{Class: "scratch", Count: 1})).Placed[0].AllocID
	saved, err := c.Snapshot()
	if err != nil {
		t.Fatal(err)
	}
	b := register(t, c, job("b", 1, 50, Ask{Class: "scratch", Count: 1})).Placed[0].AllocID
	setStatus(t, c, a, "complete")
	if err := c.GC(a); err != nil {
		t.Fatal(err)
	}
	late := c.Alloc(b).CreateIndex

	// Restore: the copy takes the original's place.
	if saved.Alloc(b) != nil {
		t.Errorf("the snapshot shows %s, placed after it", b)
	}
	if got := saved.Alloc(a); got == nil || got.ClientStatus != "pending" {
		t.Fatalf("the snapshot lost %s or its status as it was: %+v", a, got)
	}
	ev := register(t, saved, job("c", 1, 50, Ask{Class: "scratch", Count: 1}))
	if len(ev.Placed) != 1 {
		t.Fatalf("no placement after the restore: %s", reasons(ev))
	}
	if got := saved.Alloc(ev.Placed[0].AllocID).CreateIndex; got > late {
		t.Errorf("an allocation placed after the restore has CreateIndex %d, want at most %d (the original's since the snapshot)", got, late)
	}
	if c.Alloc(ev.Placed[0].AllocID) != nil || c.Alloc(a) != nil {
		t.Error("the restored copy and the original share state")
	}
}
