package model_test

import (
	"errors"
	"fmt"
	"testing"

	"github.com/nomad-device-zfs/nomad-device-zfs/model"
	"github.com/nomad-device-zfs/nomad-device-zfs/zfs"
)

// TestDecideReplicaSendMove: the holder's answer to a replica pull, step
// by step, as hooks' Sender.SendReplica drives it: only from a slot its
// allocation holds, under the slot's lock (only tried), the old bases
// dropped (a failure only logged), the snapshot taken and bookmarked,
// its guid read back; a crash or a failed step ends it (the peer asks
// again, and the next pull decides from what the slot then holds).
func TestDecideReplicaSendMove(t *testing.T) {
	const ds = "tank/nomad/pg/pg-1"
	mark := func(n int) zfs.Dataset {
		return zfs.Dataset{Name: ds + "#" + model.ReplicaSnapshot(n), Type: zfs.DatasetBookmark, GUID: replicaGUID(n)}
	}
	snap := func(n int) zfs.Dataset { return replicaSnapRow(ds+"@"+model.ReplicaSnapshot(n), replicaGUID(n)) }
	slotRow := zfs.Dataset{Name: ds, Type: zfs.DatasetFilesystem, GUID: "1"}
	held := model.Slot{Dataset: ds, Exists: true, State: model.StateHeld, Holder: "A"}
	fail := errors.New("zfs: exit status 1")
	toSlot := []moveBeat{{want: "lock lock-slot", locked: true}, {want: "read read-slot", slot: held}}
	seq := func(parts ...[]moveBeat) []moveBeat {
		var out []moveBeat
		for _, p := range parts {
			out = append(out, p...)
		}
		return out
	}
	sent := func(snap, from string, fromGUID, toGUID uint64, raw bool) func(*testing.T, model.Move) {
		return func(t *testing.T, mv model.Move) {
			s := mv.Send
			if s.Options.Snapshot != snap || s.Options.From != from || s.FromGUID != fromGUID || s.ToGUID != toGUID ||
				s.Options.Raw != raw || s.Encrypted != raw || s.Final {
				t.Errorf("send %+v, want %s from %q (%d, %d), raw %v", s, snap, from, fromGUID, toGUID, raw)
			}
		}
	}
	planIs := func(want ...string) func(*testing.T, model.Move) {
		return func(t *testing.T, mv model.Move) {
			var got []string
			for _, op := range mv.Plan.Ops {
				got = append(got, op.Command.String())
			}
			if len(got) != len(want) {
				t.Fatalf("plan %q, want %q", got, want)
			}
			for i := range got {
				if got[i] != want[i] {
					t.Errorf("plan %q, want %q", got, want)
				}
			}
		}
	}
	cases := []struct {
		name       string
		req        model.ReplicaSendRequest
		replicates bool
		beats      []moveBeat
	}{
		{name: "a class that keeps no replicas: no data", req: model.ReplicaSendRequest{Alloc: "A", Slot: "pg-1"},
			beats: []moveBeat{{want: "fail", check: isErr(model.ErrNoData)}}},
		{name: "a first pull: replica-1 taken, marked, held and bookmarked, sent whole", replicates: true,
			req: model.ReplicaSendRequest{Alloc: "A", Slot: "pg-1"}, beats: seq(toSlot, []moveBeat{
				{want: "list list", rows: []zfs.Dataset{slotRow}},
				{want: "run take", check: planIs("snapshot "+ds+"@replica-1 {nomad-device-zfs:owner}", "hold "+ds+"@replica-1 nomad-device-zfs",
					"bookmark "+ds+"@replica-1 "+ds+"#replica-1")},
				{want: "list relist", rows: []zfs.Dataset{slotRow, snap(1), mark(1)}},
				{want: "done replica-1", check: sent(ds+"@replica-1", "", 0, 101, false)},
			})},
		{name: "the next pull: the old snapshot dropped first, the next taken, sent from the bookmark", replicates: true,
			req: model.ReplicaSendRequest{Alloc: "A", Slot: "pg-1", HaveGUID: 101}, beats: seq(toSlot, []moveBeat{
				{want: "list list", rows: []zfs.Dataset{slotRow, snap(1), mark(1)}},
				{want: "run drop", check: planIs("release "+ds+"@replica-1 nomad-device-zfs", "destroy "+ds+"@replica-1")},
				{want: "run take"},
				{want: "list relist", rows: []zfs.Dataset{slotRow, mark(1), snap(2), mark(2)}},
				{want: "done replica-2", check: sent(ds+"@replica-2", ds+"#replica-1", 101, 102, false)},
			})},
		{name: "a drop that fails is only logged: the take goes on", replicates: true,
			req: model.ReplicaSendRequest{Alloc: "A", Slot: "pg-1", HaveGUID: 101}, beats: seq(toSlot, []moveBeat{
				{want: "list list", rows: []zfs.Dataset{slotRow, snap(1), mark(1)}},
				{want: "run drop", check: func(t *testing.T, mv model.Move) {
					if mv.Warn == "" {
						t.Error("a drop whose failure ends the send")
					}
				}},
				{want: "run take"},
				{want: "list relist", rows: []zfs.Dataset{slotRow, snap(1), mark(1), snap(2), mark(2)}},
				{want: "done replica-2", check: sent(ds+"@replica-2", ds+"#replica-1", 101, 102, false)},
			})},
		{name: "a replica behind: the newest there is, from its bookmark; nothing taken", replicates: true,
			req: model.ReplicaSendRequest{Alloc: "A", Slot: "pg-1", HaveGUID: 103}, beats: seq(toSlot, []moveBeat{
				{want: "list list", rows: []zfs.Dataset{slotRow, mark(3), mark(4), snap(5), mark(5)}},
				{want: "done replica-5", check: sent(ds+"@replica-5", ds+"#replica-3", 103, 105, false)},
			})},
		{name: "encrypted data goes out raw", replicates: true,
			req: model.ReplicaSendRequest{Alloc: "A", Slot: "pg-1", HaveGUID: 103}, beats: seq(toSlot, []moveBeat{
				{want: "list list", rows: []zfs.Dataset{{Name: ds, Type: zfs.DatasetFilesystem, GUID: "1", Encryption: "aes-256-gcm"}, mark(3), snap(5), mark(5)}},
				{want: "done replica-5", check: sent(ds+"@replica-5", ds+"#replica-3", 103, 105, true)},
			})},
		{name: "an interrupted stream: its token decoded by this node, that stream resumed", replicates: true,
			req: model.ReplicaSendRequest{Alloc: "A", Slot: "pg-1", HaveGUID: 103, ResumeToken: "1-abc"}, beats: seq([]moveBeat{
				{want: "decode-token token", resume: &model.Resume{ToGUID: 105, FromGUID: 103}},
			}, toSlot, []moveBeat{
				{want: "list list", rows: []zfs.Dataset{slotRow, mark(3), snap(5), mark(5)}},
				{want: "done replica-5", check: sent(ds+"@replica-5", ds+"#replica-3", 103, 105, false)},
			})},
		// A lying holder's foreign stream, cut, leaves a token naming a
		// snapshot not on this node (seed 9710293): refused, the replica
		// node aborts its receive and asks again without it.
		{name: "a token this node's zfs cannot decode: refused", replicates: true,
			req:   model.ReplicaSendRequest{Alloc: "A", Slot: "pg-1", ResumeToken: "garbage"},
			beats: []moveBeat{{want: "decode-token token", err: fail}, {want: "fail", check: isErr(model.ErrResumeRefused)}}},
		{name: "the slot busy (a Reserve fences it): the peer asks again", replicates: true,
			req:   model.ReplicaSendRequest{Alloc: "A", Slot: "pg-1"},
			beats: []moveBeat{{want: "lock lock-slot"}, {want: "fail", check: isErr(model.ErrPeerBusy)}}},
		{name: "the slot held by another allocation: no data", replicates: true,
			req: model.ReplicaSendRequest{Alloc: "A", Slot: "pg-1"},
			beats: []moveBeat{{want: "lock lock-slot", locked: true},
				{want: "read read-slot", slot: model.Slot{Dataset: ds, Exists: true, State: model.StateHeld, Holder: "B"}},
				{want: "fail", check: isErr(model.ErrNoData)}}},
		{name: "A's slot releasing (A ended): no data, no snapshot taken on data that is going", replicates: true,
			req: model.ReplicaSendRequest{Alloc: "A", Slot: "pg-1"},
			beats: []moveBeat{{want: "lock lock-slot", locked: true},
				{want: "read read-slot", slot: model.Slot{Dataset: ds, Exists: true, State: model.StateReleasing, Holder: "A"}},
				{want: "fail", check: isErr(model.ErrNoData)}}},
		{name: "the take fails: the send fails", replicates: true,
			req: model.ReplicaSendRequest{Alloc: "A", Slot: "pg-1"}, beats: seq(toSlot, []moveBeat{
				{want: "list list", rows: []zfs.Dataset{slotRow}},
				{want: "run take", err: fail},
				{want: "fail"},
			})},
		{name: "the snapshot not there after the take: the send fails", replicates: true,
			req: model.ReplicaSendRequest{Alloc: "A", Slot: "pg-1"}, beats: seq(toSlot, []moveBeat{
				{want: "list list", rows: []zfs.Dataset{slotRow}},
				{want: "run take"},
				{want: "list relist", rows: []zfs.Dataset{slotRow}},
				{want: "fail"},
			})},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			in := model.ReplicaSendLoop{Req: tc.req, Class: "pg", Replicates: tc.replicates, SlotDataset: ds}
			playMoves(t, func() model.Move { return model.DecideReplicaSendMove(in) }, func(r model.Result) { in = in.After(r) },
				describeSend, tc.beats, true)
		})
	}
}

// replicaGUID is the guid the replica tests give replica-<n>: 100+n.
func replicaGUID(n int) string { return fmt.Sprint(100 + n) }

// isErr checks that a failed move's error is target.
func isErr(target error) func(*testing.T, model.Move) {
	return func(t *testing.T, mv model.Move) {
		if !errors.Is(mv.Err, target) {
			t.Errorf("error %v, want %v", mv.Err, target)
		}
	}
}
