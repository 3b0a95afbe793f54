package hooks

import (
	"bytes"
	"crypto/rand"
	"errors"
	"testing"
	"time"

	"github.com/nomad-device-zfs/nomad-device-zfs/model"
	"github.com/nomad-device-zfs/nomad-device-zfs/zfs"
)

// TestReplicaFirstSnapshotBeside: a replica's first snapshot is received
// beside the replica (model.ReplicaBeside), as a whole stream is, and put
// in its place only by the round that checked its guid. A cut first
// stream leaves nothing in the replica's name and is resumed beside; a
// complete copy beside that no check passed (the plugin died between the
// receive and the check: seed 9730813, a liar's foreign data) is
// discarded, and the replica pulled again.
func TestReplicaFirstSnapshotBeside(t *testing.T) {
	tests := []struct {
		name string
		// before readies node b before its first round: nil, or a cut
		// first stream, or a liar's data left complete beside.
		before func(t *testing.T, w *replicaWorld, b *migrationNode, wr *wire, name string)
		// resumes: the round that swaps the replica in resumes a token.
		resumes bool
	}{
		{name: "a first pull: received beside, swapped in once verified"},
		{name: "a first stream cut: nothing in the replica's name, resumed beside", resumes: true,
			before: func(t *testing.T, w *replicaWorld, b *migrationNode, wr *wire, name string) {
				big := make([]byte, 512<<10)
				_, _ = rand.Read(big)
				write(t, w.a.f, "tank/nomad/pg/pg-1", "big", string(big))
				wr.mu.Lock()
				wr.cut = 200 << 10
				wr.mu.Unlock()
				if _, err := b.m.replicaRound(t.Context()); err != nil {
					t.Fatal(err)
				}
				if _, err := b.c.List(t.Context(), name, nil); !errors.Is(err, zfs.ErrNotExist) {
					t.Fatalf("after a cut first stream, the replica's name: %v, want nothing there", err)
				}
				if tok, err := b.c.ResumeToken(t.Context(), model.ReplicaBeside(name)); err != nil || tok == "" {
					t.Fatalf("no resume token beside the replica after the cut: %q, %v", tok, err)
				}
			}},
		{name: "a liar's first snapshot left beside unchecked: discarded, pulled again",
			before: func(t *testing.T, w *replicaWorld, b *migrationNode, _ *wire, name string) {
				// What a fetch leaves when the plugin dies after the
				// receive and before its check: the liar's data beside,
				// with the marks the receive sets.
				ctx := t.Context()
				const liar = "tank/liar"
				if err := b.c.Create(ctx, liar, nil); err != nil {
					t.Fatal(err)
				}
				write(t, b.f, liar, "data", "foreign")
				if err := b.c.Snapshot(ctx, liar+"@"+model.ReplicaSnapshot(1), nil); err != nil {
					t.Fatal(err)
				}
				var stream bytes.Buffer
				if err := b.c.Send(ctx, zfs.SendOptions{Snapshot: liar + "@" + model.ReplicaSnapshot(1)}, &stream); err != nil {
					t.Fatal(err)
				}
				beside := model.ReplicaBeside(name)
				a := pgAlloc(repAllocA, repNodeA, 10, "running", "run")
				if err := b.c.Receive(ctx, zfs.ReceiveOptions{Target: beside, NoMount: true,
					Props: model.ReplicaProps(w.class, beside, a, "pg-1", time.Now())}, &stream); err != nil {
					t.Fatal(err)
				}
			}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			w := newReplicaWorld(t)
			ctx := t.Context()
			b, wr, clock := w.replicaNode(t, w.chosen, repStubs(repNodeA, repNodeB, repNodeC))
			name := "tank/nomad/pg/replica-" + repAllocA + "-pg-1"
			write(t, w.a.f, "tank/nomad/pg/pg-1", "data", "one")
			if tc.before != nil {
				tc.before(t, w, b, wr, name)
				clock.Advance(2 * time.Second)
			}
			if _, err := b.m.replicaRound(ctx); err != nil {
				t.Fatal(err)
			}
			wr.mu.Lock()
			asked := len(wr.reqs)
			wr.mu.Unlock()
			if asked == 0 {
				t.Fatal("the round asked the holder nothing")
			}
			if r := wr.last(); r.HaveGUID != 0 || (r.ResumeToken != "") != tc.resumes {
				t.Fatalf("the round's request: %+v, want a first snapshot's (resumed: %v)", r, tc.resumes)
			}
			replicaHolds(t, b, name, "one")
			if got := snapshotsOf(t, b, name); len(got) != 1 || got[0] != model.ReplicaSnapshot(1) {
				t.Fatalf("the replica's snapshots: %v, want replica-1", got)
			}
			if rows, err := b.c.List(ctx, model.ReplicaBeside(name), nil); !errors.Is(err, zfs.ErrNotExist) {
				t.Fatalf("the copy beside is left: %v, %v", rows, err)
			}
		})
	}
}
