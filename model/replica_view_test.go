package model

import (
	"reflect"
	"slices"
	"testing"
	"time"

	"github.com/nomad-device-zfs/nomad-device-zfs/zfs"
)

// replicaRows are a replica's rows as a scan reads them: the dataset with
// the marks ReplicaProps sets (canmount and the class's properties are
// not user properties), unmounted, and its snapshots @replica-<n>, each
// with the dataset's marks by inheritance only (a stream carries none).
func replicaRows(cfg *Config, class, source, slot string, snaps ...int) []zfs.Dataset {
	name := cfg.ReplicaName(class, source, slot)
	props := ReplicaProps(cfg.Class(class), name, Alloc{ID: source, NodeID: "n1", Namespace: "default", JobID: "pg", TaskGroup: "db"},
		slot, time.Unix(1_800_000_000, 0))
	user := map[string]string{}
	for k, v := range props {
		if k != "canmount" && k != "quota" {
			user[k] = v
		}
	}
	d := fsRow(name, user)
	d.Mounted, d.Used = false, 4096
	rows := []zfs.Dataset{d}
	for _, n := range snaps {
		rows = append(rows, zfs.Dataset{Name: name + "@" + ReplicaSnapshot(n), Type: zfs.DatasetSnapshot, GUID: "101", User: d.User})
	}
	return rows
}

// TestTodaysViewLeavesAReplicaAlone: a replica beside the slots (issue
// 30; no plugin makes one yet) is none of the things a scan acts on: not a
// slot, an orphan, parked or retained data, and no problem of its class's;
// the View lists it apart, in ClassView.Replicas, for status, doctor and
// the metrics to count. Only a dataset the plugin owns in state replica is
// one; a removed class's replicas are listed too, and keep its dataset.
func TestTodaysViewLeavesAReplicaAlone(t *testing.T) {
	const a1, a2 = "aaaaaaaa-0000-4000-8000-000000000001", "aaaaaaaa-0000-4000-8000-000000000002"
	base := []zfs.Dataset{
		fsRow("tank/nomad", nil),
		ownedRow("tank/nomad/scratch", ""),
		ownedRow("tank/nomad/scratch/scratch-1", StateReady),
		ownedRow("tank/nomad/scratch/scratch-2", StateHeld),
	}
	notOwned := replicaRows(testCfg, "scratch", a2, "scratch-2")
	notOwned[0].User = zfs.UserPropsOf(map[string]string{PropOwner: "tank/nomad/scratch", PropState: string(StateReplica)})
	heldNamed := replicaRows(testCfg, "scratch", a2, "scratch-2")
	heldNamed[0].User = zfs.UserPropsOf(map[string]string{PropOwner: heldNamed[0].Name, PropState: string(StateHeld)})
	tests := []struct {
		name  string
		rows  []zfs.Dataset
		want  []Replica // Dataset, Source, Slot, Group, Newest
		class string    // the only class configured; "" for scratch
	}{
		{name: "a replica with two increments: its newest",
			rows: replicaRows(testCfg, "scratch", a1, "scratch-1", 1, 2),
			want: []Replica{{Dataset: testCfg.ReplicaName("scratch", a1, "scratch-1"), Source: a1, Slot: "scratch-1", Group: "default/pg/db", Newest: 2}}},
		{name: "a first receive not finished: newest 0",
			rows: replicaRows(testCfg, "scratch", a1, "scratch-1"),
			want: []Replica{{Dataset: testCfg.ReplicaName("scratch", a1, "scratch-1"), Source: a1, Slot: "scratch-1", Group: "default/pg/db"}}},
		{name: "two, by name",
			rows: slices.Concat(replicaRows(testCfg, "scratch", a2, "scratch-1", 3), replicaRows(testCfg, "scratch", a1, "scratch-2", 1)),
			want: []Replica{{Dataset: testCfg.ReplicaName("scratch", a1, "scratch-2"), Source: a1, Slot: "scratch-2", Group: "default/pg/db", Newest: 1},
				{Dataset: testCfg.ReplicaName("scratch", a2, "scratch-1"), Source: a2, Slot: "scratch-1", Group: "default/pg/db", Newest: 3}}},
		{name: "not the plugin's (its mark names another): none", rows: notOwned},
		{name: "named replica-, another state: not a replica", rows: heldNamed},
		{name: "a removed class's replica: listed with the removed class", class: "other",
			rows: replicaRows(testCfg, "scratch", a1, "scratch-1", 1),
			want: []Replica{{Dataset: testCfg.ReplicaName("scratch", a1, "scratch-1"), Source: a1, Slot: "scratch-1", Group: "default/pg/db", Newest: 1}}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			cfg := testCfg
			if tc.class != "" {
				cfg = &Config{Parent: "tank/nomad", ScanInterval: time.Minute, Classes: []Class{{Name: tc.class, Slots: 1}}}
			}
			v := BuildView(cfg, Scan{Pools: onlinePool(), Sets: slices.Concat(base, tc.rows)}, nil)
			cv := v.Classes[0]
			if tc.class != "" {
				if len(v.Removed) != 1 || v.Removed[0].Empty {
					t.Fatalf("removed classes %+v: want scratch, not empty", v.Removed)
				}
				cv = v.Removed[0]
			} else {
				for _, s := range cv.Slots {
					if !s.Healthy || len(s.Strangers) != 0 {
						t.Errorf("%s: healthy %v (%s), strangers %v", s.ID, s.Healthy, s.Reason, s.Strangers)
					}
				}
				if cv.Problem != "" || len(cv.Slots) != 2 {
					t.Errorf("class problem %q, %d slots", cv.Problem, len(cv.Slots))
				}
			}
			if len(cv.Parked)+len(cv.Retained) != 0 || (tc.class == "" && len(cv.Orphans) != 0) {
				t.Errorf("orphans %v, parked %v, retained %v", cv.Orphans, cv.Parked, cv.Retained)
			}
			for _, o := range cv.Orphans {
				if o.Dataset != "tank/nomad/scratch/scratch-1" && o.Dataset != "tank/nomad/scratch/scratch-2" {
					t.Errorf("orphan %s", o.Dataset)
				}
			}
			var got []Replica
			for _, r := range cv.Replicas {
				if r.Info.Name != r.Dataset || r.Info.Used != 4096 {
					t.Errorf("%s: its row %+v", r.Dataset, r.Info)
				}
				got = append(got, Replica{Dataset: r.Dataset, Source: r.Source, Slot: r.Slot, Group: r.Group, Newest: r.Newest})
			}
			if !reflect.DeepEqual(got, tc.want) {
				t.Errorf("replicas %+v\nwant %+v", got, tc.want)
			}
			// Nothing of a pass is planned for it.
			acts, _ := PlanEnsure(v, time.Unix(1_800_000_000, 0))
			for _, a := range acts {
				for _, r := range tc.rows {
					if a.Dataset == r.Name {
						t.Errorf("planned %+v for %s", a, r.Name)
					}
				}
			}
		})
	}
}
