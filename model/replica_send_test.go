package model_test

import (
	"fmt"
	"reflect"
	"strings"
	"testing"

	"github.com/nomad-device-zfs/nomad-device-zfs/model"
	"github.com/nomad-device-zfs/nomad-device-zfs/zfs"
)

func TestDecideReplicaSend(t *testing.T) {
	const ds = "tank/nomad/pg/pg-1"
	// snaps lists the slot and its snapshots named short with guids
	// 100+n for replica-<n>; marks its bookmarks #replica-<n>, with the
	// same guid as the snapshot they were made of.
	snaps := func(shorts ...string) []zfs.Dataset {
		rows := []zfs.Dataset{{Name: ds, Type: zfs.DatasetFilesystem, GUID: "1"}}
		for _, s := range shorts {
			g := "7"
			if n, ok := model.ReplicaNumber(s); ok {
				g = fmt.Sprint(100 + n)
			}
			rows = append(rows, replicaSnapRow(ds+"@"+s, g))
		}
		return rows
	}
	marks := func(ns ...int) []zfs.Bookmark {
		var out []zfs.Bookmark
		for _, n := range ns {
			out = append(out, zfs.Bookmark{Name: ds + "#" + model.ReplicaSnapshot(n), GUID: uint64(100 + n)})
		}
		return out
	}
	at := func(sep string, n int) string { return ds + sep + model.ReplicaSnapshot(n) }
	tests := []struct {
		name string
		in   model.ReplicaSendInput
		want model.ReplicaSend
	}{
		{name: "a first pull: take replica-1, bookmark it, send it whole",
			in:   model.ReplicaSendInput{Rows: snaps()},
			want: model.ReplicaSend{Take: at("@", 1), TakeBookmark: at("#", 1), Snapshot: at("@", 1)}},
		{name: "the receiver has the newest: take the next, from its bookmark; the old snapshot goes",
			in: model.ReplicaSendInput{Rows: snaps("replica-1"), Bookmarks: marks(1), HaveGUID: 101},
			want: model.ReplicaSend{Take: at("@", 2), TakeBookmark: at("#", 2), Snapshot: at("@", 2), From: at("#", 1), FromGUID: 101,
				DropSnapshots: []string{at("@", 1)}}},
		{name: "the steady state: one snapshot, its bookmark and the older bookmarks",
			in: model.ReplicaSendInput{Rows: snaps("replica-5"), Bookmarks: marks(3, 4, 5), HaveGUID: 105},
			want: model.ReplicaSend{Take: at("@", 6), TakeBookmark: at("#", 6), Snapshot: at("@", 6), From: at("#", 5), FromGUID: 105,
				DropSnapshots: []string{at("@", 5)}}},
		{name: "a receiver behind (another replica node): the newest snapshot there is, from its bookmark; nothing taken",
			in:   model.ReplicaSendInput{Rows: snaps("replica-5"), Bookmarks: marks(3, 4, 5), HaveGUID: 103},
			want: model.ReplicaSend{Snapshot: at("@", 5), From: at("#", 3), FromGUID: 103}},
		{name: "its interrupted stream of that snapshot from that base: resumed",
			in: model.ReplicaSendInput{Rows: snaps("replica-5"), Bookmarks: marks(3, 4, 5), HaveGUID: 103,
				Token: &model.Resume{ToGUID: 105, FromGUID: 103}},
			want: model.ReplicaSend{Snapshot: at("@", 5), From: at("#", 3), FromGUID: 103, Resume: true}},
		{name: "a token of a snapshot gone (another pull dropped it): not resumed, the newest sent",
			in: model.ReplicaSendInput{Rows: snaps("replica-6"), Bookmarks: marks(3, 4, 5, 6), HaveGUID: 103,
				Token: &model.Resume{ToGUID: 105, FromGUID: 103}},
			want: model.ReplicaSend{Snapshot: at("@", 6), From: at("#", 3), FromGUID: 103}},
		{name: "a token from another base: not resumed",
			in: model.ReplicaSendInput{Rows: snaps("replica-5"), Bookmarks: marks(3, 4, 5), HaveGUID: 103,
				Token: &model.Resume{ToGUID: 105, FromGUID: 104}},
			want: model.ReplicaSend{Snapshot: at("@", 5), From: at("#", 3), FromGUID: 103}},
		{name: "an interrupted whole stream: resumed",
			in:   model.ReplicaSendInput{Rows: snaps("replica-1"), Bookmarks: marks(1), Token: &model.Resume{ToGUID: 101}},
			want: model.ReplicaSend{Snapshot: at("@", 1), Resume: true}},
		{name: "a base the holder does not know: a whole stream of the newest, started over",
			in:   model.ReplicaSendInput{Rows: snaps("replica-5"), Bookmarks: marks(4, 5), HaveGUID: 999},
			want: model.ReplicaSend{Snapshot: at("@", 5), StartOver: true}},
		{name: "a crash between the snapshot and its bookmark: sent again, bookmarked now",
			in:   model.ReplicaSendInput{Rows: snaps("replica-2"), Bookmarks: marks(1), HaveGUID: 101},
			want: model.ReplicaSend{TakeBookmark: at("#", 2), Snapshot: at("@", 2), From: at("#", 1), FromGUID: 101}},
		{name: "a base whose bookmark a crash kept from being made: from the snapshot, kept",
			in:   model.ReplicaSendInput{Rows: snaps("replica-2"), Bookmarks: marks(1), HaveGUID: 102},
			want: model.ReplicaSend{Take: at("@", 3), TakeBookmark: at("#", 3), Snapshot: at("@", 3), From: at("@", 2), FromGUID: 102}},
		{name: "other snapshots are not the replicas': untouched",
			in: model.ReplicaSendInput{Rows: snaps("replica-1", "pristine", "migrate-1", "replica-07"), Bookmarks: marks(1), HaveGUID: 101},
			want: model.ReplicaSend{Take: at("@", 2), TakeBookmark: at("#", 2), Snapshot: at("@", 2), From: at("#", 1), FromGUID: 101,
				DropSnapshots: []string{at("@", 1)}}},
		{name: "a stranger's @replica-2 (the slot's inherited mark, none of its own): not a base, a whole stream of the plugin's newest",
			in:   model.ReplicaSendInput{Rows: append(snaps("replica-1"), strangerReplicaRow(ds, 2)), Bookmarks: marks(1), HaveGUID: 102},
			want: model.ReplicaSend{Snapshot: at("@", 1), StartOver: true}},
		{name: "a stranger's @replica-2: never sent nor dropped, and the next is taken above its name",
			in: model.ReplicaSendInput{Rows: append(snaps("replica-1"), strangerReplicaRow(ds, 2)), Bookmarks: marks(1), HaveGUID: 101},
			want: model.ReplicaSend{Take: at("@", 3), TakeBookmark: at("#", 3), Snapshot: at("@", 3), From: at("#", 1), FromGUID: 101,
				DropSnapshots: []string{at("@", 1)}}},
		{name: "bookmarks older than the newest 16 go",
			in: model.ReplicaSendInput{Rows: snaps("replica-20"), Bookmarks: marks(3, 4, 5, 6, 20), HaveGUID: 120},
			want: model.ReplicaSend{Take: at("@", 21), TakeBookmark: at("#", 21), Snapshot: at("@", 21), From: at("#", 20), FromGUID: 120,
				DropSnapshots: []string{at("@", 20)}, DropBookmarks: []string{at("#", 3), at("#", 4), at("#", 5)}}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			tc.in.Dataset = ds
			got, err := model.DecideReplicaSend(tc.in)
			if err != nil {
				t.Fatal(err)
			}
			if !reflect.DeepEqual(got, tc.want) {
				t.Errorf("got  %+v\nwant %+v", got, tc.want)
			}
		})
	}
	t.Run("a guid that is not a number is an error", func(t *testing.T) {
		rows := []zfs.Dataset{replicaSnapRow(ds+"@replica-1", "x")}
		if _, err := model.DecideReplicaSend(model.ReplicaSendInput{Dataset: ds, Rows: rows}); err == nil ||
			!strings.Contains(err.Error(), "replica-1") {
			t.Errorf("err %v", err)
		}
	})
}

// TestReplicaSendSteadyState: pull after pull by two replica nodes, one
// always behind, the holder never keeps more than the snapshot last sent
// (and one being taken) and ReplicaBookmarksKept bookmarks, and each pull
// is an increment from the receiver's newest.
func TestReplicaSendSteadyState(t *testing.T) {
	const ds = "tank/nomad/pg/pg-1"
	snaps := map[string]uint64{}
	marks := map[string]uint64{}
	next := uint64(1000)
	have := map[string]uint64{"r1": 0, "r2": 0}
	for i := range 60 {
		node := "r1"
		if i%3 == 2 {
			node = "r2" // pulls a third as often
		}
		rs, err := model.DecideReplicaSend(replicaSendInput(ds, have[node], snaps, marks))
		if err != nil {
			t.Fatal(err)
		}
		if have[node] != 0 && rs.From == "" {
			t.Fatalf("pull %d by %s: a whole stream though it has a base (%+v)", i, node, rs)
		}
		if rs.Take != "" {
			next++
			snaps[rs.Take] = next
		}
		if rs.TakeBookmark != "" {
			marks[rs.TakeBookmark] = snaps[rs.Snapshot]
		}
		have[node] = snaps[rs.Snapshot]
		for _, s := range rs.DropSnapshots {
			delete(snaps, s)
		}
		for _, b := range rs.DropBookmarks {
			delete(marks, b)
		}
		if len(snaps) > 2 || len(marks) > model.ReplicaBookmarksKept {
			t.Fatalf("pull %d: the holder keeps %d snapshots and %d bookmarks", i, len(snaps), len(marks))
		}
	}
}

// TestReplicaSendPlans: the plans of a replica's send are commands zfs/
// builds, in order: the snapshot, its hold, its bookmark; the drops each
// release the hold before the destroy.
func TestReplicaSendPlans(t *testing.T) {
	const ds = "tank/nomad/pg/pg-1"
	rs, err := model.DecideReplicaSend(model.ReplicaSendInput{Dataset: ds,
		Rows:      []zfs.Dataset{replicaSnapRow(ds+"@replica-4", "104")},
		Bookmarks: []zfs.Bookmark{{Name: ds + "#replica-4", GUID: 104}}, HaveGUID: 104})
	if err != nil {
		t.Fatal(err)
	}
	tests := []struct {
		name string
		plan model.Plan
		want []string
	}{
		{name: "take", plan: model.PlanTakeReplicaSnapshot(rs), want: []string{
			"snapshot " + ds + "@replica-5 {nomad-device-zfs:owner}", "hold " + ds + "@replica-5 nomad-device-zfs", "bookmark " + ds + "@replica-5 " + ds + "#replica-5"}},
		{name: "only the bookmark a crash kept from being made",
			plan: model.PlanTakeReplicaSnapshot(model.ReplicaSend{Snapshot: ds + "@replica-5", TakeBookmark: ds + "#replica-5"}),
			want: []string{"bookmark " + ds + "@replica-5 " + ds + "#replica-5"}},
		{name: "drop", plan: model.PlanDropReplicaBases(rs.DropSnapshots, []string{ds + "#replica-1"}), want: []string{
			"release " + ds + "@replica-4 nomad-device-zfs", "destroy " + ds + "@replica-4", "destroy " + ds + "#replica-1"}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			var got []string
			for _, op := range tc.plan.Ops {
				if _, err := op.Args(); err != nil {
					t.Errorf("%s: %v", op.Command, err)
				}
				got = append(got, op.Command.String())
			}
			if !reflect.DeepEqual(got, tc.want) {
				t.Errorf("ops %q, want %q", got, tc.want)
			}
		})
	}
}

// replicaSendInput is what the holder reads for a pull of dataset ds from
// a receiver holding have: its snapshots and bookmarks, by name and guid.
func replicaSendInput(ds string, have uint64, snaps, marks map[string]uint64) model.ReplicaSendInput {
	in := model.ReplicaSendInput{Dataset: ds, HaveGUID: have}
	for name, g := range snaps {
		in.Rows = append(in.Rows, replicaSnapRow(name, fmt.Sprint(g)))
	}
	for name, g := range marks {
		in.Bookmarks = append(in.Bookmarks, zfs.Bookmark{Name: name, GUID: g})
	}
	return in
}

// replicaSnapRow is a replica snapshot's row as the holder's listing shows
// it: the plugin's mark naming the snapshot itself (ReplicaSnapshotProps).
func replicaSnapRow(name, guid string) zfs.Dataset {
	return zfs.Dataset{Name: name, Type: zfs.DatasetSnapshot, GUID: guid, User: zfs.UserPropsOf(model.ReplicaSnapshotProps(name))}
}

// strangerReplicaRow is someone else's @replica-<n> of slot ds: it has the
// slot's mark only by inheritance.
func strangerReplicaRow(ds string, n int) zfs.Dataset {
	return zfs.Dataset{Name: ds + "@" + model.ReplicaSnapshot(n), Type: zfs.DatasetSnapshot, GUID: fmt.Sprint(100 + n),
		User: zfs.UserPropsOf(map[string]string{model.PropOwner: ds})}
}
