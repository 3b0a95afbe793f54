package model

import (
	"strings"
	"testing"
)

// onScratch is an allocation naming scratch slot id, placed at index.
func onScratch(id string, index uint64, client, desired, slot string) Alloc {
	return Alloc{ID: id, NodeID: "node", CreateIndex: index, ModifyIndex: index, ClientStatus: client, DesiredStatus: desired,
		Devices: []Device{{Task: "t", Vendor: Vendor, Type: DeviceType, Name: "scratch", IDs: []string{slot}}}}
}

// TestIndexesStartOver: a ready slot whose holder_index was written before
// the cluster's indexes started over (rebuilt, restored from an older
// snapshot, another cluster) is neither refused to the allocation Nomad
// now places on it, with the token blamed, nor released for allocations
// whose data went long ago; within one history nothing changes.
func TestIndexesStartOver(t *testing.T) {
	const recorded = 5000 // holder_index, from the old history
	ready := Slot{ID: "scratch-1", Class: "scratch", Exists: true, Healthy: true, State: StateReady, HolderIndex: recorded}
	cases := []struct {
		name   string
		allocs []Alloc
		// reserve is DecideReserve's kind and the allocation it names;
		// plan is PlanSlot's step ("" for none).
		reserve ReserveKind
		alloc   string
		plan    string
	}{
		{name: "rebuilt: a new allocation far below holder_index",
			allocs:  []Alloc{onScratch("B", 12, "pending", "run", "scratch-1")},
			reserve: ReserveGrant, alloc: "B", plan: "record holder B"},
		{name: "restored: an allocation that ended before the snapshot reappears",
			allocs:  []Alloc{onScratch("A", 40, "failed", "run", "scratch-1"), onScratch("B", 60, "pending", "run", "scratch-1")},
			reserve: ReserveGrant, alloc: "B", plan: "record holder B"},
		{name: "restored: an allocation that ended after the snapshot runs again",
			allocs:  []Alloc{onScratch("A", 40, "pending", "run", "scratch-1")},
			reserve: ReserveGrant, alloc: "A", plan: "record holder A"},
		{name: "another cluster, indexes above holder_index",
			allocs:  []Alloc{onScratch("B", 90000, "pending", "run", "scratch-1")},
			reserve: ReserveGrant, alloc: "B", plan: "record holder B"},
		{name: "one history: a stopping allocation older than the last holder is waited for",
			allocs:  []Alloc{onScratch("X", 4000, "pending", "stop", "scratch-1"), onScratch("B", 6000, "pending", "run", "scratch-1")},
			reserve: ReserveWait, alloc: "X", plan: "record holder X"},
		{name: "rebuilt: the caller, stopped while its Reserve waited, below holder_index beside a new one",
			allocs:  []Alloc{onScratch("X", 12, "pending", "stop", "scratch-1"), onScratch("B", 13, "pending", "run", "scratch-1")},
			reserve: ReserveWait, alloc: "X", plan: "record holder X"},
		{name: "one history: an unrecorded holder's data goes first",
			allocs:  []Alloc{onScratch("D", 5500, "failed", "run", "scratch-1"), onScratch("B", 6000, "pending", "run", "scratch-1")},
			reserve: ReserveReleaseFirst, alloc: "D", plan: "release D"},
		{name: "two allocations that may both run: refused whatever their index",
			allocs:  []Alloc{onScratch("B", 12, "pending", "run", "scratch-1"), onScratch("C", 13, "pending", "run", "scratch-1")},
			reserve: ReserveFail, plan: "record holder B"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			snap := &Snapshot{NodeID: "node", Index: 100, Allocs: tc.allocs}
			d := DecideReserve(Class{Name: "scratch"}, ready, snap, true)
			if d.Kind != tc.reserve || d.Alloc.ID != tc.alloc {
				t.Errorf("DecideReserve: kind %d alloc %q (%s), want kind %d alloc %q", d.Kind, d.Alloc.ID, d.Reason, tc.reserve, tc.alloc)
			}
			if strings.Contains(d.Reason, "read-job") {
				t.Errorf("DecideReserve blames the token, and the caller is in Nomad's answer: %s", d.Reason)
			}
			plan := ""
			if st, ok := PlanSlot(Class{Name: "scratch"}, ready, snap); ok {
				plan = st.Kind.String() + " " + st.Alloc.ID
			}
			if plan != tc.plan {
				t.Errorf("PlanSlot: %q, want %q", plan, tc.plan)
			}
		})
	}
}

// TestStoppingOnlyNamesBothCauses: a Reserve refused because the only
// allocation Nomad shows on the slot is stopping names both causes: the
// caller itself stopped while its Reserve waited (a job update stops an
// allocation whose task is still starting), or a caller the token cannot
// see. Seed 3795: only the token was blamed, and it could see everything.
func TestStoppingOnlyNamesBothCauses(t *testing.T) {
	cases := []struct {
		name string
		slot Slot
	}{
		{name: "ready slot", slot: Slot{ID: "scratch-1", Class: "scratch", Exists: true, Healthy: true, State: StateReady, HolderIndex: 5}},
		{name: "held by the stopping allocation", slot: Slot{ID: "scratch-1", Class: "scratch", Exists: true, Healthy: true, State: StateHeld, Holder: "B", HolderIndex: 20}},
	}
	snap := &Snapshot{NodeID: "node", Allocs: []Alloc{onScratch("B", 20, "pending", "stop", "scratch-1")}}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			d := DecideReserve(Class{Name: "scratch"}, tc.slot, snap, true)
			if d.Kind != ReserveFail || !strings.Contains(d.Reason, "stopped while its Reserve waited") || !strings.Contains(d.Reason, "read-job") {
				t.Errorf("kind %d, reason %q: want a refusal naming both the stopped caller and the token", d.Kind, d.Reason)
			}
		})
	}
}
