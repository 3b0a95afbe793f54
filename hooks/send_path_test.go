package hooks

import (
	"maps"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/nomad-device-zfs/nomad-device-zfs/model"
)

// TestSenderOnTheCutoversPath: the sending node's zfs commands for the
// replacement node's last two requests (docs/performance.md, the cutover
// against its floor). The final increment is answered as soon as the park
// has renamed A's data aside, while the park still creates the fresh slot
// under the slot's lock (not "busy" until it ends), from one listing; the
// "complete" answer is one listing and the rename that records it, the
// pre-copy snapshots left to the class's policy.
func TestSenderOnTheCutoversPath(t *testing.T) {
	class := model.Class{Name: "pg", Slots: 1, MountPath: "/data", Sticky: true, StickyWait: time.Hour,
		Migrate: model.Migrate{Enabled: true, Timeout: time.Minute, OnTimeout: model.MigrateFail}}
	c := &cluster{}
	n1 := newMigrationNode(t, c, "node-1", class)
	a, _ := placeReplacement(t, c, n1, "A's data")
	ctx := t.Context()
	req := model.SendRequest{Alloc: "A", Slot: "pg-1", Replacement: "B"}
	if _, err := n1.m.Sender().Send(ctx, req); err != nil { // the pre-copy, @migrate-1
		t.Fatalf("the pre-copy: %v", err)
	}
	const slot, parked = "tank/nomad/pg/pg-1", "tank/nomad/pg/parked-A-pg-1"
	// A ends; its park has marked the slot and renamed it aside, and runs
	// on (the fresh slot's create) under the slot's lock.
	a.ClientStatus = "complete"
	c.set(a)
	mark := model.ReleasingProps(a.ID, a.CreateIndex, model.OutcomeComplete, time.Now())
	maps.Copy(mark, model.ParkAsProps(parked))
	if err := n1.c.Set(ctx, slot, mark); err != nil {
		t.Fatal(err)
	}
	if err := n1.c.Rename(ctx, slot, parked); err != nil {
		t.Fatal(err)
	}
	park := n1.m.locks.get("pg-1")
	park.Lock()
	defer park.Unlock()

	guid := func(snap string) uint64 {
		rows, err := n1.c.List(ctx, parked, model.UserProps)
		if err != nil {
			t.Fatal(err)
		}
		for _, r := range rows {
			if r.Name == snap {
				g, _ := strconv.ParseUint(r.GUID, 10, 64)
				return g
			}
		}
		t.Fatalf("no %s in %v", snap, rows)
		return 0
	}
	cases := []struct {
		name     string
		have     string
		want     string // the snapshot sent, or "complete"
		commands []string
	}{
		{name: "the final increment, while the park creates the fresh slot",
			have: parked + "@migrate-1", want: parked + "@migrate-final",
			commands: []string{"list", "snapshot", "hold", "list"}},
		{name: "complete: the final snapshot recorded, the pre-copy left to the policy",
			have: parked + "@migrate-final", want: "complete",
			commands: []string{"list", "rename"}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			r := req
			r.HaveGUID = guid(tc.have)
			n1.f.ResetCalls()
			spec, err := n1.m.Sender().Send(ctx, r)
			if err != nil {
				t.Fatalf("Send: %v", err)
			}
			got := spec.Options.Snapshot
			if spec.Complete {
				got = "complete"
			}
			if got != tc.want {
				t.Errorf("sent %q, want %q", got, tc.want)
			}
			var verbs []string
			for _, call := range n1.f.Calls() {
				verbs = append(verbs, call[1])
			}
			if strings.Join(verbs, " ") != strings.Join(tc.commands, " ") {
				t.Errorf("zfs commands %q, want %q", n1.f.Calls(), tc.commands)
			}
		})
	}
	if guid(parked+"@migrate-1") == 0 {
		t.Error("the pre-copy snapshot is gone")
	}
}
