package hooks

import (
	"strings"
	"testing"
	"time"

	"github.com/nomad-device-zfs/nomad-device-zfs/model"
)

// TestReleaseDropsReplicaBases: a held slot with what replica pulls leave
// on the holder (a marked, held @replica-<n> and #replica-<n> bookmarks,
// made by the model's own plans) is released by the Manager under every
// policy, and nothing of the pulls survives: not on the fresh slot, not
// on the data a retain keeps aside. A stranger's @replica-9 (the slot's
// mark by inheritance only) stops the release, survives it, and the
// release goes on by itself once it is gone. Below the seams: the real
// Manager, its reads (bookmarks among the rows) and the zfs fake.
func TestReleaseDropsReplicaBases(t *testing.T) {
	for _, p := range []model.Policy{model.PolicyDestroy, model.PolicyRollback, model.PolicySnapshot} {
		for _, stranger := range []bool{false, true} {
			name := string(p)
			if stranger {
				name += " with a stranger's @replica-9"
			}
			t.Run(name, func(t *testing.T) {
				r := newRig(t, model.Release{Policy: p, Retain: time.Hour})
				r.sync(alloc("A", 10, "running", "run", "scratch-1"))
				r.write("data", "A's data")
				have := uint64(0)
				for range 3 {
					have = r.replicaPull(have)
				}
				r.m.Reconcile(t.Context()) // a scan: the published view has them
				if s := r.slot(); len(s.OwnBookmarks) != 3 || len(s.Strangers) != 0 || !r.zfsHas(slot1+"@replica-3") {
					t.Fatalf("after three pulls: own %v, bookmarks %v, strangers %v", s.OwnSnapshots, s.OwnBookmarks, s.Strangers)
				}
				if stranger {
					must(t, r.c.Snapshot(t.Context(), slot1+"@replica-9", nil))
					r.sync(alloc("A", 10, "complete", "run", "scratch-1"))
					if s := r.slot(); s.State != model.StateHeld || s.Healthy || !strings.Contains(s.Reason, slot1+"@replica-9") {
						t.Fatalf("slot %s, healthy %v, reason %q: want held, unhealthy, naming the stranger", s.State, s.Healthy, s.Reason)
					}
					if !r.exists("data") || !r.zfsHas(slot1+"@replica-9") {
						t.Fatalf("data %v, stranger %v: both must survive a refused release", r.exists("data"), r.zfsHas(slot1+"@replica-9"))
					}
					must(t, r.c.Exec(t.Context(), model.PlanDropReplicaBases([]string{slot1 + "@replica-9"}, nil).Ops[1].Command))
				}
				r.sync(alloc("A", 10, "complete", "run", "scratch-1"))
				r.wantState(model.StateReady, "", 2)
				if r.exists("data") {
					t.Fatal("the release left A's data in the slot")
				}
				rows, err := r.c.List(t.Context(), "tank/nomad", model.UserProps)
				must(t, err)
				for _, d := range rows {
					if strings.Contains(d.Name, "@replica-") || strings.Contains(d.Name, "#replica-") {
						t.Errorf("%s survived the release", d.Name)
					}
				}
			})
		}
	}
}

// replicaPull answers one replica pull of slot1 from a receiver holding
// the snapshot of guid have as the holder will (model.DecideReplicaSend
// and its plans, run through the zfs seam), and returns the guid of the
// snapshot sent.
func (r *lifecycleRig) replicaPull(have uint64) uint64 {
	r.t.Helper()
	ctx := r.t.Context()
	rows, err := r.c.List(ctx, slot1, model.UserProps)
	must(r.t, err)
	marks, err := r.c.Bookmarks(ctx, slot1)
	must(r.t, err)
	rs, err := model.DecideReplicaSend(model.ReplicaSendInput{Dataset: slot1, Rows: rows, Bookmarks: marks, HaveGUID: have})
	must(r.t, err)
	plans := []model.Plan{model.PlanDropReplicaBases(rs.DropSnapshots, rs.DropBookmarks)}
	if rs.Take != "" || rs.TakeBookmark != "" {
		plans = append([]model.Plan{model.PlanTakeReplicaSnapshot(rs)}, plans...)
	}
	for _, p := range plans {
		for _, op := range p.Ops {
			if err := r.c.Exec(ctx, op.Command); op.Outcome(err) != model.Next {
				r.t.Fatalf("%s: %v", op.Command, err)
			}
		}
	}
	marks, err = r.c.Bookmarks(ctx, slot1)
	must(r.t, err)
	for _, b := range marks {
		if b.Name == strings.Replace(rs.Snapshot, "@", "#", 1) {
			return b.GUID
		}
	}
	r.t.Fatalf("no bookmark of %s", rs.Snapshot)
	return 0
}
