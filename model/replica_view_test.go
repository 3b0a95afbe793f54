package model

import (
	"testing"
	"time"

	"github.com/nomad-device-zfs/nomad-device-zfs/zfs"
)

// TestTodaysViewLeavesAReplicaAlone: a replica beside the slots (issue
// 30; no plugin makes one yet) is none of the things a scan acts on: not a
// slot, an orphan, parked or retained data, and no problem of its class's.
// docs/node-loss.md says so; this holds it while nothing else lists them.
func TestTodaysViewLeavesAReplicaAlone(t *testing.T) {
	name := testCfg.ReplicaName("scratch", "aaaaaaaa-0000-4000-8000-000000000001", "scratch-1")
	props := ReplicaProps(testCfg.Class("scratch"), name, Alloc{ID: "aaaaaaaa-0000-4000-8000-000000000001", NodeID: "n1"}, "scratch-1", time.Unix(1_800_000_000, 0))
	user := map[string]string{}
	for k, v := range props {
		if k != "canmount" && k != "quota" {
			user[k] = v
		}
	}
	replica := fsRow(name, user)
	replica.Mounted = false
	snap := zfs.Dataset{Name: name + "@" + ReplicaSnapshot(1), Type: zfs.DatasetSnapshot, GUID: "101", User: replica.User}
	sets := []zfs.Dataset{
		fsRow("tank/nomad", nil),
		ownedRow("tank/nomad/scratch", ""),
		ownedRow("tank/nomad/scratch/scratch-1", StateReady),
		ownedRow("tank/nomad/scratch/scratch-2", StateHeld),
		replica, snap,
	}
	v := BuildView(testCfg, Scan{Pools: onlinePool(), Sets: sets}, nil)
	cv := v.Classes[0]
	if cv.Problem != "" || len(cv.Slots) != 2 || len(cv.Orphans) != 0 || len(cv.Parked) != 0 || len(cv.Retained) != 0 {
		t.Fatalf("class view %+v", cv)
	}
	for _, s := range cv.Slots {
		if !s.Healthy || len(s.Strangers) != 0 {
			t.Errorf("%s: healthy %v (%s), strangers %v", s.ID, s.Healthy, s.Reason, s.Strangers)
		}
	}
}
