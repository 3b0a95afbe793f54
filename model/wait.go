package model

import "time"

// Waits. A held slot is released when its holder has ended, and most ends
// reach the plugin as its own events: the watcher's answer shows the
// holder complete, or gone. Two do not, and each needs a clock of its own,
// or the slot stays held until some unrelated allocation moves the node's
// list (seen on Nomad: `nomad job stop -purge` of a service whose task
// took seconds to die left its slot held for minutes, and for good on a
// quiet node):
//
//   - A stopping holder (desired stop, its client not done) may be
//     forgotten by the servers before its client reports the end (a
//     purge, `nomad system gc`). The node's blocking query does not
//     answer a deletion: its index is the highest ModifyIndex of what is
//     left, which a deletion never raises, so the watcher waits out its
//     five minutes while the plugin's snapshot still shows the holder
//     stopping.
//   - A holder the servers call lost or no longer know, which the local
//     client still runs: its end is the client's, and only asking the
//     client again tells when it came.
//
// The other waits have clocks already: a failed step (a busy dataset, a
// zfs error) or a slot whose lock a Reserve or a pull holds is retried by
// the Manager's retry timer; a Reserve waiting for a stopping predecessor
// asks again every step of its own, bounded by reserve_timeout; parked
// data waits for a Reserve (an event) or its expiry (the periodic pass).

// WaitKind is what a held slot waits for that no event of the plugin's
// own reports.
type WaitKind int

const (
	// WaitStopping: the holder is told to stop and its client has not
	// reported it ended. The clock asks the servers again (the node's
	// allocations, without blocking).
	WaitStopping WaitKind = iota + 1
	// WaitLocal: the servers call the holder lost or no longer know it, and
	// the local client still runs it. The clock asks the client again.
	WaitLocal
)

func (k WaitKind) String() string {
	switch k {
	case WaitStopping:
		return "its holder to stop: the servers may forget it before its client reports the end, and no blocking query answers that"
	case WaitLocal:
		return "its holder to end on this node: the servers no longer run it, the local client still does"
	}
	return "nothing"
}

// Wait is one held slot's wait: what for, and on which allocation.
type Wait struct {
	Kind  WaitKind
	Alloc string
}

// The clock's pace: the first look a second after the wait begins, each
// next one twice as late, never more than RecheckCeiling apart. The
// ceiling bounds the release's delay after the holder's end, and the
// requests a long kill costs (two a minute).
const (
	RecheckFirst   = time.Second
	RecheckCeiling = 30 * time.Second
)

// RecheckAfter is the pause before look number looks+1 of one wait (looks
// counts the looks already taken, 0 when the wait begins).
func RecheckAfter(looks int) time.Duration {
	return min(RecheckFirst<<min(looks, 16), RecheckCeiling)
}

// StoppingWaits finds the held slots of v whose holder snap shows told to
// stop and not yet ended on its client (WaitStopping), by slot ID. Their
// release is otherwise planned only when an answer shows the holder's
// end, which a purge never brings.
func StoppingWaits(v *View, snap *Snapshot) map[string]Wait {
	out := map[string]Wait{}
	if v == nil || snap == nil {
		return out
	}
	// The stopping allocations by ID: one pass over the snapshot, not one
	// per slot (thousands of each on a large node).
	stopping := map[string]bool{}
	for _, as := range [][]Alloc{snap.Allocs, snap.Others} {
		for _, a := range as {
			if live, _ := Judge(a, true); live == MayRun && a.ServerTerminal() {
				stopping[a.ID] = true
			}
		}
	}
	if len(stopping) == 0 {
		return out
	}
	for _, cvs := range [][]ClassView{v.Classes, v.Removed} {
		for ci := range cvs {
			for _, slots := range [][]Slot{cvs[ci].Slots, cvs[ci].Orphans} {
				for _, s := range slots {
					// A holder gone from the list is StepCheckGone's, then
					// WaitLocal's if the local client still runs it.
					if s.Exists && (s.State == StateHeld || s.State == StateParked) && stopping[s.Holder] {
						out[s.ID] = Wait{Kind: WaitStopping, Alloc: s.Holder}
					}
				}
			}
		}
	}
	return out
}
