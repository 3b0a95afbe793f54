package model

import "testing"

// TestStoppingWaits: which held slots wait for a stopping holder whose end
// no answer may bring (the servers forget it first), and which do not.
func TestStoppingWaits(t *testing.T) {
	held := func(state State, holder string) Slot {
		return Slot{ID: "scratch-1", Class: "scratch", Exists: true, Healthy: true, State: state, Holder: holder}
	}
	cases := []struct {
		name   string
		slot   Slot
		allocs []Alloc
		want   bool
	}{
		{name: "running, told to stop: waits",
			slot: held(StateHeld, "A"), allocs: []Alloc{onScratch("A", 10, "running", "stop", "scratch-1")}, want: true},
		{name: "pending, evicted: waits",
			slot: held(StateHeld, "A"), allocs: []Alloc{onScratch("A", 10, "pending", "evict", "scratch-1")}, want: true},
		{name: "unknown, told to stop: waits",
			slot: held(StateHeld, "A"), allocs: []Alloc{onScratch("A", 10, "unknown", "stop", "scratch-1")}, want: true},
		{name: "parked for a replacement, the holder stopping: waits",
			slot: held(StateParked, "A"), allocs: []Alloc{onScratch("A", 10, "running", "stop", "scratch-1")}, want: true},
		{name: "running, not told to stop: its end is the client's news",
			slot: held(StateHeld, "A"), allocs: []Alloc{onScratch("A", 10, "running", "run", "scratch-1")}},
		{name: "complete: released by the pass, nothing to wait for",
			slot: held(StateHeld, "A"), allocs: []Alloc{onScratch("A", 10, "complete", "stop", "scratch-1")}},
		{name: "lost: the pass asks the local client (WaitLocal if it still runs it)",
			slot: held(StateHeld, "A"), allocs: []Alloc{onScratch("A", 10, "lost", "stop", "scratch-1")}},
		{name: "gone from the list: the pass looks it up",
			slot: held(StateHeld, "A")},
		{name: "ready: no holder",
			slot: held(StateReady, ""), allocs: []Alloc{onScratch("A", 10, "running", "stop", "scratch-1")}},
		{name: "releasing: the pass finishes it",
			slot: held(StateReleasing, "A"), allocs: []Alloc{onScratch("A", 10, "running", "stop", "scratch-1")}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			v := &View{Classes: []ClassView{{Class: Class{Name: "scratch"}, Slots: []Slot{tc.slot}}}}
			got := StoppingWaits(v, &Snapshot{NodeID: "node", Allocs: tc.allocs})
			w, waits := got["scratch-1"]
			if waits != tc.want {
				t.Fatalf("waits = %v (%+v), want %v", waits, got, tc.want)
			}
			if waits && (w.Kind != WaitStopping || w.Alloc != "A") {
				t.Errorf("wait %+v, want stopping on A", w)
			}
		})
	}
}
