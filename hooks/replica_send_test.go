package hooks

import (
	"bytes"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/nomad-device-zfs/nomad-device-zfs/model"
	"github.com/nomad-device-zfs/nomad-device-zfs/zfs"
)

// TestSendReplica: the holder's answer to replica pulls (Sender.SendReplica),
// streamed on the zfs fake into a replica as a replica node receives it:
// a whole first copy, then increments from the holder's bookmarks, the
// replica holding the holder's data each time; the holder keeps one
// replica snapshot, marked and held, and its bookmarks; an allocation that
// does not hold the slot, or a class that keeps no replicas, gets no data;
// a busy slot asks the peer to ask again. Below the seams: the Manager's
// driver and reads, the zfs fake.
func TestSendReplica(t *testing.T) {
	keeps := func(c *model.Class) { c.Replicate = model.Replicate{Copies: 1, Every: time.Minute} }
	ctx := t.Context()
	r := newRig(t, model.Release{Policy: model.PolicyDestroy}, keeps)
	r.sync(alloc("A", 10, "running", "run", "scratch-1"))
	s := r.m.Sender()
	const replica = "tank/nomad/scratch/replica-A-scratch-1"
	have := uint64(0)
	for i, content := range []string{"one", "two", "three"} {
		r.write("data", content)
		d, err := s.SendReplica(ctx, model.ReplicaSendRequest{Alloc: "A", Slot: "scratch-1", HaveGUID: have})
		if err != nil {
			t.Fatalf("pull %d: %v", i+1, err)
		}
		n := i + 1
		from := ""
		if n > 1 {
			from = slot1 + "#" + model.ReplicaSnapshot(n-1)
		}
		if d.Options.Snapshot != slot1+"@"+model.ReplicaSnapshot(n) || d.Options.From != from || d.ToGUID == 0 || d.FromGUID != have {
			t.Fatalf("pull %d: send %+v, want replica-%d from %q (%d)", n, d, n, from, have)
		}
		var stream bytes.Buffer
		must(t, r.c.Send(ctx, d.Options, &stream))
		must(t, r.c.Receive(ctx, zfs.ReceiveOptions{Target: replica, Resumable: true, NoMount: true}, &stream))
		have = d.ToGUID

		rows, err := r.c.List(ctx, "tank/nomad", model.UserProps)
		must(t, err)
		var snaps, marks []string
		for _, row := range rows {
			switch {
			case strings.HasPrefix(row.Name, slot1+"@replica-"):
				snaps = append(snaps, row.Name)
				if row.User.Get(model.PropOwner) != row.Name {
					t.Errorf("%s without its own mark", row.Name)
				}
			case strings.HasPrefix(row.Name, slot1+"#"):
				marks = append(marks, row.Name)
			}
		}
		if len(snaps) != 1 || snaps[0] != d.Options.Snapshot || len(marks) != n {
			t.Errorf("pull %d: the holder keeps %v and %v, want the snapshot sent and %d bookmarks", n, snaps, marks, n)
		}
		holds, err := r.c.Holds(ctx, d.Options.Snapshot)
		must(t, err)
		if len(holds) != 1 || holds[0].Tag != model.HoldTag {
			t.Errorf("pull %d: holds %+v on %s", n, holds, d.Options.Snapshot)
		}
		must(t, r.c.Mount(ctx, replica))
		got, err := os.ReadFile(filepath.Join(r.f.Mountpoint(replica), "data"))
		must(t, err)
		if string(got) != content {
			t.Errorf("pull %d: the replica holds %q, want %q", n, got, content)
		}
		_, err = r.f.Run(ctx, "zfs", "unmount", replica)
		must(t, err)
	}
	if s := r.slot(); s.State != model.StateHeld || s.Holder != "A" {
		t.Errorf("the slot after the pulls: %s by %q", s.State, s.Holder)
	}

	for _, tc := range []struct {
		name string
		req  model.ReplicaSendRequest
		lock bool
		want error
	}{
		{name: "another allocation: no data", req: model.ReplicaSendRequest{Alloc: "B", Slot: "scratch-1"}, want: model.ErrNoData},
		{name: "a slot the configuration has not: no data", req: model.ReplicaSendRequest{Alloc: "A", Slot: "scratch-9"}, want: model.ErrNoData},
		{name: "the slot busy: ask again", req: model.ReplicaSendRequest{Alloc: "A", Slot: "scratch-1"}, lock: true, want: model.ErrPeerBusy},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if tc.lock {
				l := r.m.locks.get(tc.req.Slot)
				l.Lock()
				defer l.Unlock()
			}
			if _, err := s.SendReplica(ctx, tc.req); !errors.Is(err, tc.want) {
				t.Errorf("err %v, want %v", err, tc.want)
			}
		})
	}
	t.Run("a class that keeps no replicas: no data", func(t *testing.T) {
		r := newRig(t, model.Release{Policy: model.PolicyDestroy})
		r.sync(alloc("A", 10, "running", "run", "scratch-1"))
		if _, err := r.m.Sender().SendReplica(ctx, model.ReplicaSendRequest{Alloc: "A", Slot: "scratch-1"}); !errors.Is(err, model.ErrNoData) {
			t.Errorf("err %v, want no data", err)
		}
		if r.zfsHas(slot1 + "@replica-1") {
			t.Error("a replica snapshot taken for a class that keeps none")
		}
	})
}
