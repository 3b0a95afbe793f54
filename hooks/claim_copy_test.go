package hooks

import (
	"testing"
	"time"

	"github.com/nomad-device-zfs/nomad-device-zfs/model"
)

// TestClaimOfAHeldCopy: the claim destroys a copy's received snapshots
// without releasing a hold first (a receive places none). Should one carry
// the plugin's hold all the same, the destroy is refused, nothing is
// destroyed or renamed, and the hold is released for the Reserve's next
// try, which claims it.
func TestClaimOfAHeldCopy(t *testing.T) {
	f, z := newFakeZFS(t)
	ctx := t.Context()
	const class, slot, copyName = "tank/nomad/pg", "tank/nomad/pg/pg-1", "tank/nomad/pg/parked-A-pg-1"
	for _, d := range []string{class, slot, copyName} {
		if err := z.Create(ctx, d, nil); err != nil {
			t.Fatal(err)
		}
	}
	for _, s := range []string{"@migrate-1", "@migrate-final"} {
		if _, err := f.Run(ctx, "zfs", "snapshot", copyName+s); err != nil {
			t.Fatal(err)
		}
	}
	if _, err := f.Run(ctx, "zfs", "hold", model.HoldTag, copyName+"@migrate-final"); err != nil {
		t.Fatal(err)
	}
	m := mustManager(t, Config{Slots: &model.Config{Parent: "tank/nomad", ScanInterval: time.Hour}, ZFS: z})
	s := model.Slot{ID: "pg-1", Class: "pg", Dataset: slot, Exists: true, State: model.StateReady, Generation: 1}
	p := model.Retained{Dataset: copyName, State: model.StateParked, Holder: "A", Outcome: model.OutcomeMigrated,
		OwnSnapshots: []string{copyName + "@migrate-1", copyName + "@migrate-final"}}
	plan := model.PlanClaim(s, model.Alloc{ID: "B"}, p, time.Now())
	if err := m.run(ctx, plan); err == nil {
		t.Fatal("the claim of a copy with a held snapshot succeeded")
	}
	if rows, _ := z.List(ctx, copyName, nil); len(rows) != 3 {
		t.Fatalf("after the refused destroy: %v, want the copy and both snapshots", rows)
	}
	if err := m.run(ctx, plan); err != nil {
		t.Fatalf("the next try: %v", err)
	}
	if rows, _ := z.List(ctx, slot, nil); len(rows) != 1 {
		t.Fatalf("the claimed slot: %v, want it without snapshots", rows)
	}
}
