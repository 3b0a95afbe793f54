package allocwatch

import (
	"testing"
	"time"

	"github.com/hashicorp/nomad/api"
	"github.com/nomad-device-zfs/nomad-device-zfs/model"
)

func TestNextWaitIndex(t *testing.T) {
	t.Parallel()
	cases := []struct {
		name         string
		wait, last   uint64
		want         uint64
		wantTimedOut bool
	}{
		{name: "first query takes the index", wait: 0, last: 23, want: 23},
		{name: "higher index moves on", wait: 23, last: 31, want: 31},
		{name: "same index re-blocks", wait: 31, last: 31, want: 31, wantTimedOut: true},
		{name: "lower index resets to 0", wait: 31, last: 12, want: 0},
		{name: "index 1 after a rebuilt cluster resets", wait: 1000, last: 1, want: 0},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			got, timedOut := nextWaitIndex(tc.wait, tc.last)
			if got != tc.want || timedOut != tc.wantTimedOut {
				t.Errorf("nextWaitIndex(%d, %d) = %d, %t; want %d, %t", tc.wait, tc.last, got, timedOut, tc.want, tc.wantTimedOut)
			}
		})
	}
}

func TestBackoff(t *testing.T) {
	t.Parallel()
	cases := []struct {
		name     string
		attempt  int
		min, max time.Duration
	}{
		{name: "attempt 0 counts as the first", attempt: 0, min: 800 * time.Millisecond, max: time.Second},
		{name: "first retry about 1s", attempt: 1, min: 800 * time.Millisecond, max: time.Second},
		{name: "second retry about 2s", attempt: 2, min: 1600 * time.Millisecond, max: 2 * time.Second},
		{name: "sixth retry about 32s", attempt: 6, min: 25600 * time.Millisecond, max: 32 * time.Second},
		{name: "seventh retry capped at 1m", attempt: 7, min: 48 * time.Second, max: time.Minute},
		{name: "far retry capped at 1m", attempt: 1000, min: 48 * time.Second, max: time.Minute},
		{name: "shift overflow capped at 1m", attempt: 65, min: 48 * time.Second, max: time.Minute},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			seen := map[time.Duration]bool{}
			for range 1000 {
				d := backoff(tc.attempt)
				if d < tc.min || d > tc.max {
					t.Fatalf("backoff(%d) = %s, want within [%s, %s]", tc.attempt, d, tc.min, tc.max)
				}
				seen[d] = true
			}
			if len(seen) < 100 {
				t.Errorf("backoff(%d) gave %d distinct values in 1000 calls; want jitter", tc.attempt, len(seen))
			}
		})
	}
}

func TestShouldDeliver(t *testing.T) {
	t.Parallel()
	const resync = 5 * time.Minute
	cases := []struct {
		name            string
		deliveredBefore bool
		changed         bool
		sinceLast       time.Duration
		want            bool
	}{
		{name: "first answer always, even unchanged", deliveredBefore: false, changed: false, want: true},
		{name: "changed content", deliveredBefore: true, changed: true, sinceLast: time.Second, want: true},
		{name: "duplicate dropped", deliveredBefore: true, changed: false, sinceLast: time.Minute, want: false},
		{name: "duplicate just before resync dropped", deliveredBefore: true, sinceLast: resync - time.Nanosecond, want: false},
		{name: "duplicate at resync delivered", deliveredBefore: true, sinceLast: resync, want: true},
		{name: "duplicate long after delivered", deliveredBefore: true, sinceLast: time.Hour, want: true},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			if got := shouldDeliver(tc.deliveredBefore, tc.changed, tc.sinceLast, resync); got != tc.want {
				t.Errorf("shouldDeliver(%t, %t, %s) = %t, want %t", tc.deliveredBefore, tc.changed, tc.sinceLast, got, tc.want)
			}
		})
	}
}

func TestBlockingWait(t *testing.T) {
	t.Parallel()
	cases := []struct {
		name                      string
		waitTime, untilResync, fl time.Duration
		want                      time.Duration
	}{
		{name: "wait time when resync is far", waitTime: 5 * time.Minute, untilResync: 5 * time.Minute, fl: time.Second, want: 5 * time.Minute},
		{name: "shortened to the resync", waitTime: 5 * time.Minute, untilResync: 90 * time.Second, fl: time.Second, want: 90 * time.Second},
		{name: "resync overdue: floor, never 0", waitTime: 5 * time.Minute, untilResync: -time.Minute, fl: time.Second, want: time.Second},
		{name: "short wait time kept", waitTime: 2 * time.Second, untilResync: 5 * time.Minute, fl: time.Second, want: 2 * time.Second},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			if got := blockingWait(tc.waitTime, tc.untilResync, tc.fl); got != tc.want {
				t.Errorf("blockingWait = %s, want %s", got, tc.want)
			}
		})
	}
}

func TestSnapshotSameContent(t *testing.T) {
	t.Parallel()
	at := time.Unix(1000, 0)
	base := func(opts ...allocOpt) []*api.Allocation {
		a := apiAlloc(1, "running", withDevice("db", "zfs", "dataset", "fast", "tank/a", "tank/b"), withTaskState("db", "running"))
		for _, o := range opts {
			o(a)
		}
		return []*api.Allocation{a, apiAlloc(2, "pending")}
	}
	cases := []struct {
		name  string
		other model.Snapshot
		want  bool
	}{
		{name: "identical", other: newSnapshot(id(9), 5, base(), at), want: true},
		{name: "index and time are not content", other: newSnapshot(id(9), 77, base(), at.Add(time.Hour)), want: true},
		{name: "answer order is not content", other: newSnapshot(id(9), 5, reversed(base()), at), want: true},
		{name: "device ID order is not content", other: newSnapshot(id(9), 5, base(func(a *api.Allocation) {
			a.AllocatedResources = nil
			withDevice("db", "zfs", "dataset", "fast", "tank/b", "tank/a")(a)
		}), at), want: true},
		{name: "client status", other: newSnapshot(id(9), 5, base(func(a *api.Allocation) { a.ClientStatus = "complete" }), at), want: false},
		{name: "desired status", other: newSnapshot(id(9), 5, base(desired("stop")), at), want: false},
		{name: "task state", other: newSnapshot(id(9), 5, base(withTaskState("db", "dead")), at), want: false},
		{name: "device IDs", other: newSnapshot(id(9), 5, base(func(a *api.Allocation) {
			a.AllocatedResources = nil
			withDevice("db", "zfs", "dataset", "fast", "tank/a", "tank/c")(a)
		}), at), want: false},
		{name: "modify index", other: newSnapshot(id(9), 5, base(func(a *api.Allocation) { a.ModifyIndex = 99 }), at), want: false},
		{name: "allocation gone", other: newSnapshot(id(9), 5, base()[:1], at), want: false},
		{name: "other node", other: newSnapshot(id(8), 5, base(), at), want: false},
	}
	s := newSnapshot(id(9), 5, base(), at)
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			if got := sameContent(s, tc.other); got != tc.want {
				t.Errorf("sameContent = %t, want %t\n a: %+v\n b: %+v", got, tc.want, s.Allocs, tc.other.Allocs)
			}
		})
	}
}

func TestSnapshotCloneIsDeep(t *testing.T) {
	t.Parallel()
	s := newSnapshot(id(9), 5, []*api.Allocation{
		apiAlloc(1, "running", withDevice("db", "zfs", "dataset", "fast", "tank/a"), withTaskState("db", "running")),
	}, time.Unix(0, 0))
	c := cloneSnapshot(s)
	s.Allocs[0].Devices[0].IDs[0] = "tank/x"
	s.Allocs[0].TaskStates["db"] = "dead"
	s.Allocs[0].ClientStatus = "complete"
	if c.Allocs[0].Devices[0].IDs[0] != "tank/a" || c.Allocs[0].TaskStates["db"] != "running" || c.Allocs[0].ClientStatus != "running" {
		t.Errorf("clone changed with the original: %+v", c.Allocs[0])
	}
}

func reversed(in []*api.Allocation) []*api.Allocation {
	out := make([]*api.Allocation, len(in))
	for i, a := range in {
		out[len(in)-1-i] = a
	}
	return out
}
