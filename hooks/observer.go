package hooks

import (
	"time"

	"github.com/nomad-device-zfs/nomad-device-zfs/model"
)

// Observer hears of what the Manager did that its published View cannot
// show afterwards: how each release ended and how long it took, and how
// long each scan took. Everything else an operator watches (slots by
// state, held slots' sizes, retained data, pool health) is read from the
// View when asked, so the Manager keeps no numbers of its own. The
// metrics endpoint implements it; the default does nothing. Methods are
// called on the Manager's goroutines, under a slot's lock for a release:
// they must return at once.
type Observer interface {
	ReleaseDone(ReleaseEvent)
	ScanDone(ScanEvent)
}

// ReleaseEvent is one release attempt, successful or not.
type ReleaseEvent struct {
	// Slot is the slot as the release found it (its ID, class and dataset).
	Slot model.Slot
	// Holder is the allocation whose data was released, as the watcher or
	// the servers last showed it.
	Holder  model.Alloc
	Outcome string
	// Policy is what the release carried out: a model.Policy, "park" for
	// sticky data parked for a replacement, "" when it was refused before
	// anything was decided (something foreign below the slot).
	Policy string
	// Started and Done bound the release's own work (its zfs commands).
	Started, Done time.Time
	// Err is why it failed, nil when the slot is ready again (or retired).
	Err error
}

// PolicyPark is ReleaseEvent.Policy for sticky data parked for its holder's
// replacement.
const PolicyPark = string(model.PolicyPark)

// ScanEvent is one parent's part of a scan: its zfs process, and the
// zpool process the scan runs once for all parents.
type ScanEvent struct {
	// Pool is the parent's pool; Parent the dataset listed.
	Pool, Parent string
	// Took is the two processes' time, one after the other.
	Took time.Duration
	// Err is the scan's failure (the pools' or the parent's listing), nil
	// if both answered.
	Err error
}

type nopObserver struct{}

func (nopObserver) ReleaseDone(ReleaseEvent) {}
func (nopObserver) ScanDone(ScanEvent)       {}
