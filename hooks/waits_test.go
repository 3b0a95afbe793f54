package hooks

import (
	"strings"
	"testing"
	"time"

	hclog "github.com/hashicorp/go-hclog"

	"github.com/nomad-device-zfs/nomad-device-zfs/internal/testrig"
	"github.com/nomad-device-zfs/nomad-device-zfs/model"
)

// TestWaitingSlotsHaveTheirOwnClock: a held slot whose holder's end no
// news of the watcher will bring is released once the holder has ended,
// with no other allocation moving the node's list: the watcher delivers
// once, then nothing (issue 31: `nomad job stop -purge` of a service whose
// task takes seconds to die; the servers forget the allocation first, and
// the node's blocking query does not answer a deletion). The scan interval
// is an hour, so only the slot's own clock can look again.
func TestWaitingSlotsHaveTheirOwnClock(t *testing.T) {
	cases := []struct {
		name string
		// seen is the holder as the watcher's one delivery shows it.
		seen model.Alloc
		// forgotten: the servers no longer know the holder after that.
		forgotten bool
		// endsAfter: the local client runs the holder for this long after
		// the delivery (0: it has already ended).
		endsAfter time.Duration
	}{
		{name: "purged while stopping, its task already ended", seen: alloc("A", 10, "running", "stop", "scratch-1"),
			forgotten: true},
		{name: "purged while stopping, its task ends seconds later", seen: alloc("A", 10, "running", "stop", "scratch-1"),
			forgotten: true, endsAfter: 3 * time.Second},
		{name: "collected by system gc while stopping (pending)", seen: alloc("A", 10, "pending", "stop", "scratch-1"),
			forgotten: true, endsAfter: time.Second},
		{name: "lost, the local client runs it for seconds more", seen: alloc("A", 10, "lost", "stop", "scratch-1"),
			endsAfter: 3 * time.Second},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			r := newRig(t, model.Release{Policy: model.PolicyDestroy})
			logs := &testrig.LockedBuffer{}
			r.m.logger = hclog.New(&hclog.LoggerOptions{Output: logs, Level: hclog.Info})
			r.sync(alloc("A", 10, "running", "run", "scratch-1"))
			r.wantState(model.StateHeld, "A", 1)
			r.write("secret", "A's data")

			r.allocs.mu.Lock()
			r.allocs.running["A"] = true
			r.allocs.mu.Unlock()
			r.allocs.set(tc.seen)
			r.m.OnAllocs(r.allocs.snap()) // the watcher's last news
			if tc.forgotten {
				r.allocs.mu.Lock()
				r.allocs.allocs, r.allocs.gone["A"] = nil, true
				r.allocs.mu.Unlock()
			}
			ended := time.Now().Add(tc.endsAfter)
			time.AfterFunc(tc.endsAfter, func() {
				r.allocs.mu.Lock()
				r.allocs.running["A"] = false
				r.allocs.mu.Unlock()
			})
			runManager(t, r.m)

			// Held while the holder may run: checked whenever the test looks.
			waitUntil(t, 20*time.Second, "the slot to be ready once the holder ended", func() bool {
				s, _ := r.m.current("scratch-1")
				if s == nil {
					return false
				}
				if time.Now().Before(ended) && s.State != model.StateHeld {
					t.Fatalf("slot %s while its holder still runs", s.State)
				}
				return s.State == model.StateReady && s.Generation == 2
			})
			if late := time.Since(ended); late > 2*model.RecheckCeiling {
				t.Errorf("released %s after the holder ended", late)
			}
			if r.exists("secret") {
				t.Error("the ready slot still has A's data")
			}
			if tc.endsAfter > 0 {
				if n := strings.Count(logs.String(), "slot waits; asking again"); n != 1 {
					t.Errorf("said %d times what the slot waits for, want once:\n%s", n, logs.String())
				}
			}
		})
	}
}

// TestStoppingHolderIsAskedBackedOff: a holder that keeps stopping (a long
// kill_timeout) is looked at again on a clock that backs off, not in a
// loop, and its slot is kept.
func TestStoppingHolderIsAskedBackedOff(t *testing.T) {
	r := newRig(t, model.Release{Policy: model.PolicyDestroy})
	r.sync(alloc("A", 10, "running", "run", "scratch-1"))
	r.allocs.set(alloc("A", 10, "running", "stop", "scratch-1"))
	r.m.OnAllocs(r.allocs.snap())
	r.allocs.mu.Lock()
	before := r.allocs.refresh
	r.allocs.mu.Unlock()
	runManager(t, r.m)
	time.Sleep(4 * time.Second)
	r.allocs.mu.Lock()
	asked := r.allocs.refresh - before
	r.allocs.mu.Unlock()
	// Looks at 1 s and 3 s (then 7 s): two, maybe three with a slow start.
	if asked < 1 || asked > 3 {
		t.Errorf("the servers were asked %d times in 4 s; want 1-3 (1 s, then doubling)", asked)
	}
	r.wantState(model.StateHeld, "A", 1)
}

// TestRecheckAfter pins the clock's pace.
func TestRecheckAfter(t *testing.T) {
	s := time.Second
	cases := []struct {
		name  string
		looks int
		want  time.Duration
	}{
		{"the first look a second after the wait begins", 0, s},
		{"each next one twice as late", 3, 8 * s},
		{"never more than the ceiling apart", 5, model.RecheckCeiling},
		{"however long it waits", 1000, model.RecheckCeiling},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			if got := model.RecheckAfter(tc.looks); got != tc.want {
				t.Errorf("RecheckAfter(%d) = %s, want %s", tc.looks, got, tc.want)
			}
		})
	}
}
