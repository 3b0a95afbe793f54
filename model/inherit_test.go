package model

import (
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/nomad-device-zfs/nomad-device-zfs/zfs"
)

// TestInheritByRequest pins which slot's data a sticky replacement's
// devices inherit when its predecessor held several slots of the class:
// by request (task and position), through a chain of failed starts with
// the devices swapped between tasks (seed 713553). A (main: pg-1, side:
// pg-2) failed in its device hook; B (main: pg-2, side: pg-1) replaced it
// and failed; C (main: pg-3, side: pg-2) replaces B.
//
// ask is one decision: "reserve X id" (whose data X's Reserve of ready
// slot id inherits, and what DecideInherit does about it), "release id"
// (what a pass does to slot id, whose holder has ended: inherit in place,
// park, or the class's policy), "parked H id" (PlanParked on H's data
// parked from slot id).
func TestInheritByRequest(t *testing.T) {
	c := Class{Name: "pg", Sticky: true, StickyWait: time.Hour}
	cfg := &Config{Parent: "tank/nomad", Classes: []Class{c}}
	now := time.Unix(1_800_000_000, 0)
	alloc := func(id, client, prev, next string, tasks ...string) Alloc {
		a := Alloc{ID: id, NodeID: "node", ClientStatus: client, DesiredStatus: "run", PreviousAllocation: prev, NextAllocation: next}
		for _, tk := range tasks { // "main:pg-1"
			name, ids, _ := strings.Cut(tk, ":")
			a.Devices = append(a.Devices, Device{Task: name, Vendor: Vendor, Type: DeviceType, Name: "pg", IDs: strings.Split(ids, ",")})
		}
		return a
	}
	a := alloc("A", "failed", "", "B", "main:pg-1", "side:pg-2")
	b := alloc("B", "failed", "A", "C", "main:pg-2", "side:pg-1")
	cc := alloc("C", "pending", "B", "", "main:pg-3", "side:pg-2")
	ready := func(id string) Slot { return Slot{ID: id, Class: "pg", Exists: true, State: StateReady} }
	held := func(id, holder string) Slot {
		return Slot{ID: id, Class: "pg", Exists: true, State: StateHeld, Holder: holder}
	}
	parked := func(holder, from string) Retained {
		name := cfg.ParkedName("pg", holder, from)
		r := Retained{Dataset: name, State: StateParked, Holder: holder, Expires: now.Add(time.Hour)}
		r.Info.User = zfs.UserPropsOf(map[string]string{PropOwner: name})
		return r
	}
	cases := []struct {
		name   string
		allocs []Alloc
		slots  []Slot
		parked []Retained
		ask    string
		want   string
	}{
		// B replaces A, which held only side's slot (its Reserve of main's failed).
		{name: "a request the predecessor never held a slot for inherits nothing",
			allocs: []Alloc{a, b}, slots: []Slot{ready("pg-1"), ready("pg-2")}, parked: []Retained{parked("A", "pg-2")},
			ask: "reserve B pg-2", want: "A/pg-1 none"},
		{name: "the predecessor's side slot is parked for the replacement's side, not kept for its main placed on it",
			allocs: []Alloc{a, b}, slots: []Slot{ready("pg-1"), held("pg-2", "A")},
			ask: "release pg-2", want: "park"},
		{name: "the replacement's side claims the predecessor's side data from the other slot",
			allocs: []Alloc{a, b}, slots: []Slot{ready("pg-1"), held("pg-2", "B")}, parked: []Retained{parked("A", "pg-2")},
			ask: "reserve B pg-1", want: "A/pg-2 claim"},
		{name: "a predecessor that never held any slot hands nothing over",
			allocs: []Alloc{a, b}, slots: []Slot{ready("pg-1"), ready("pg-2")},
			ask: "reserve B pg-1", want: "A/pg-2 none"},
		{name: "the predecessor's data still in its slot is waited for",
			allocs: []Alloc{a, b}, slots: []Slot{ready("pg-1"), held("pg-2", "A")},
			ask: "reserve B pg-1", want: "A/pg-2 wait"},

		// C replaces B (main: pg-2, fresh; side: pg-1, A's side data).
		{name: "the next replacement's main claims its predecessor's main data",
			allocs: []Alloc{a, b, cc}, slots: []Slot{held("pg-1", "B"), ready("pg-2"), ready("pg-3")}, parked: []Retained{parked("B", "pg-2")},
			ask: "reserve C pg-3", want: "B/pg-2 claim"},
		{name: "the next replacement's side inherits the side data carried from the first",
			allocs: []Alloc{a, b, cc}, slots: []Slot{held("pg-1", "B"), ready("pg-2"), held("pg-3", "C")},
			ask: "reserve C pg-2", want: "B/pg-1 wait"},
		{name: "side data parks while the replacement's main already holds its claim (seed 713553)",
			allocs: []Alloc{a, b, cc}, slots: []Slot{held("pg-1", "B"), ready("pg-2"), held("pg-3", "C")},
			ask: "release pg-1", want: "park"},
		{name: "parked side data waits while the replacement's main already holds its claim",
			allocs: []Alloc{a, b, cc}, slots: []Slot{ready("pg-1"), ready("pg-2"), held("pg-3", "C")}, parked: []Retained{parked("B", "pg-1")},
			ask: "parked B pg-1", want: "keep"},
		{name: "side data gets the policy once the replacement's side slot is its own",
			allocs: []Alloc{a, b, cc}, slots: []Slot{held("pg-1", "B"), held("pg-2", "C"), held("pg-3", "C")},
			ask: "release pg-1", want: "policy"},
		{name: "parked side data is released once the replacement's side slot is its own",
			allocs: []Alloc{a, b, cc}, slots: []Slot{ready("pg-1"), held("pg-2", "C"), ready("pg-3")}, parked: []Retained{parked("B", "pg-1")},
			ask: "parked B pg-1", want: "release"},
		{name: "side data parks for a replacement not seen yet",
			allocs: []Alloc{a, b}, slots: []Slot{held("pg-1", "B"), ready("pg-2"), ready("pg-3")},
			ask: "release pg-1", want: "park"},
		{name: "side data gets the policy when the replacement asks no side device",
			allocs: []Alloc{a, b, alloc("C", "pending", "B", "", "main:pg-3")}, slots: []Slot{held("pg-1", "B"), ready("pg-2"), ready("pg-3")},
			ask: "release pg-1", want: "policy"},
		{name: "parked side data is released when the replacement asks no side device",
			allocs: []Alloc{a, b, alloc("C", "pending", "B", "", "main:pg-3")}, slots: []Slot{ready("pg-1"), ready("pg-2"), ready("pg-3")},
			parked: []Retained{parked("B", "pg-1")}, ask: "parked B pg-1", want: "release"},

		// In place or not: the same slot, the same request.
		{name: "a replacement's side placed on its predecessor's side slot inherits it in place",
			allocs: []Alloc{a, b, alloc("C", "pending", "B", "", "main:pg-3", "side:pg-1")}, slots: []Slot{held("pg-1", "B"), ready("pg-2"), ready("pg-3")},
			ask: "release pg-1", want: "in place to C"},
		{name: "a replacement's main placed on its predecessor's side slot does not inherit it in place",
			allocs: []Alloc{a, b, alloc("C", "pending", "B", "", "main:pg-1", "side:pg-3")}, slots: []Slot{held("pg-1", "B"), ready("pg-2"), ready("pg-3")},
			ask: "release pg-1", want: "park"},
		{name: "a device of a task the predecessor did not have inherits nothing",
			allocs: []Alloc{a, b, alloc("C", "pending", "B", "", "init:pg-3", "main:pg-1")}, slots: []Slot{ready("pg-1"), ready("pg-2"), ready("pg-3")},
			ask: "reserve C pg-3", want: "none"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			snap := &Snapshot{NodeID: "node", Allocs: tc.allocs}
			slot := slotIn(tc.slots)
			var got string
			switch f := strings.Fields(tc.ask); f[0] {
			case "reserve":
				caller, _ := findAlloc(snap, f[1])
				s, _ := slot(f[2])
				prev, from, ok := Predecessor(c, caller, s.ID, snap)
				if !ok {
					got = "none"
					break
				}
				in := InheritInput{Class: c, Slot: s, Caller: caller, Prev: prev, NodeID: "node"}
				if ps, ok := slot(from); ok && from != s.ID {
					in.PrevSlot = &ps
				}
				for _, p := range tc.parked {
					if p.Dataset == cfg.ParkedName("pg", prev.ID, from) {
						in.Parked = &p
					}
				}
				got = fmt.Sprintf("%s/%s %s", prev.ID, from, [...]string{"none", "claim", "wait", "fail"}[DecideInherit(in).Kind])
			case "release":
				s, _ := slot(f[1])
				st, ok := PlanSlot(c, s, snap)
				switch {
				case !ok:
					got = "keep"
				case st.Kind == StepRecord:
					got = "in place to " + st.Alloc.ID
				case st.Kind == StepRelease && c.Parks(s, st.Alloc, st.Outcome, snap, slot):
					got = "park"
				case st.Kind == StepRelease:
					got = "policy"
				default:
					got = st.Kind.String()
				}
			case "parked":
				p := parked(f[1], f[2])
				got = [...]string{"keep", "release", "lookup", "finish"}[PlanParked(c, p, tc.slots, snap, nil, now).Kind]
			}
			if got != tc.want {
				t.Errorf("%s: got %q, want %q", tc.ask, got, tc.want)
			}
		})
	}
}
