package model_test

import (
	"bytes"
	"testing"
	"time"

	"github.com/nomad-device-zfs/nomad-device-zfs/model"
	"github.com/nomad-device-zfs/nomad-device-zfs/zfs"
)

// The takeover of a local replica on the zfs fake (model.PlanTakeReplica):
// its crash case is in crashCases.

// replicating is a sticky class that migrates and keeps replicas.
var replicating = model.Class{Name: "pg", Slots: 2, Sticky: true, StickyWait: time.Hour,
	Migrate:   model.Migrate{Enabled: true, Timeout: 10 * time.Minute, OnTimeout: model.MigrateFail},
	Replicate: model.Replicate{Copies: 1, Every: time.Minute}}

// withReplicaOf is a world of class c where this node keeps the replica
// of a's slot id, from another node, with two increments received (as a
// replica node's pulls receive them: ReplicaProps set by the receiver,
// unmounted), and the node's allocations are snap's.
func withReplicaOf(c model.Class, a model.Alloc, id string, snap *model.Snapshot) func(t *testing.T) *world {
	return func(t *testing.T) *world {
		w := newWorld(t, c)
		ctx := t.Context()
		const holder = "tank/holder"
		must(t, w.c.Create(ctx, holder, nil))
		name := w.cfg.ReplicaName(c.Name, a.ID, id)
		from := ""
		for n := 1; n <= 2; n++ {
			w.write(holder, "data", a.ID+"-"+model.ReplicaSnapshot(n))
			snap := holder + "@" + model.ReplicaSnapshot(n)
			must(t, w.c.Snapshot(ctx, snap, nil))
			var stream bytes.Buffer
			must(t, w.c.Send(ctx, zfs.SendOptions{Snapshot: snap, From: from}, &stream))
			must(t, w.c.Receive(ctx, zfs.ReceiveOptions{Target: name, NoMount: true,
				Props: model.ReplicaProps(c, name, a, id, w.now)}, &stream))
			from = snap
		}
		w.settle(snap, 5)
		return w
	}
}

// takeReplica is the takeover B's Reserve plans: the replica as read now.
func takeReplica(c model.Class, prev model.Alloc, id string) func(w *world) model.Plan {
	return func(w *world) model.Plan {
		name := w.cfg.ReplicaName(c.Name, prev.ID, id)
		rows, err := w.c.List(w.t.Context(), name, model.UserProps)
		must(w.t, err)
		r, ok := model.LocalReplica(w.cfg.ClassDataset(c.Name), name, rows)
		if !ok {
			w.t.Fatalf("no replica %s to take over:\n%s", name, w.state())
		}
		return model.PlanTakeReplica(c, prev, r, w.now)
	}
}

// tookOver is the end of a takeover: the Reserve fails on a crash, the
// task's restart reserves again, takes over the replica if it is still
// one, claims the parked data it became, and B runs.
func tookOver(c model.Class, prev, b model.Alloc, id string) func(w *world) {
	return func(w *world) {
		endsThen(b)(w)
		if _, err := w.c.List(w.t.Context(), w.cfg.ReplicaName(c.Name, prev.ID, id), nil); err == nil {
			if ran, err := w.apply(takeReplica(c, prev, id)(w), -1, model.Seen{}); err != nil {
				w.t.Fatalf("the Reserve's retry of the takeover: ran %d: %v", ran, err)
			}
		}
		v := w.view()
		if len(v.Classes[0].Parked) != 1 {
			w.t.Fatalf("no parked data to claim:\n%s", w.state())
		}
		slot := w.slot(c.Name, b.Devices[0].IDs[0])
		if ran, err := w.apply(model.PlanClaim(slot, b, v.Classes[0].Parked[0], w.now), -1, model.Seen{}); err != nil {
			w.t.Fatalf("the claim: ran %d: %v", ran, err)
		}
		endsThen(running(b))(w)
	}
}
