package model

import (
	"fmt"
	"time"

	"github.com/nomad-device-zfs/nomad-device-zfs/zfs"
)

// Policy says what happens to a slot's data when its holder ends.
type Policy string

const (
	// PolicyDestroy destroys the slot and creates (or clones) a fresh one.
	PolicyDestroy Policy = "destroy"
	// PolicyRollback rolls the slot back to the pristine snapshot taken when
	// it was created.
	PolicyRollback Policy = "rollback"
	// PolicySnapshot keeps the holder's data: the slot is renamed aside with
	// a held snapshot until it expires, and a fresh slot takes its place.
	PolicySnapshot Policy = "snapshot"
	// PolicyPark is not a class's policy: it is what a sticky class's
	// release does when the holder has a replacement to claim the data
	// (Plan.Policy, the metrics' policy label).
	PolicyPark Policy = "park"
)

// ParsePolicy reads a policy name.
func ParsePolicy(s string) (Policy, error) {
	switch p := Policy(s); p {
	case PolicyDestroy, PolicyRollback, PolicySnapshot:
		return p, nil
	}
	return "", fmt.Errorf("%q is not a release policy (destroy, rollback or snapshot)", s)
}

// Outcomes of a holder, recorded in PropOutcome.
const (
	OutcomeComplete = "complete"
	OutcomeFailed   = "failed"
	OutcomeLost     = "lost"
	// OutcomeGone: the allocation was garbage-collected before the watcher
	// saw how it ended.
	OutcomeGone = "gone"
	// OutcomeOperator: an operator asked for the release (nomad-device-zfs
	// release). The class's Policy applies, not OnFailure.
	OutcomeOperator = "operator"
	// OutcomeRetired: an idle orphan (Slot.Orphan) with no holder's data in
	// it, destroyed because the configuration no longer has it.
	OutcomeRetired = "retired"
)

// Release is a class's release configuration.
type Release struct {
	// Policy applies to every outcome without an override.
	Policy Policy
	// OnFailure, if set, applies to failed and lost allocations, e.g. keep
	// a failed allocation's data for inspection, destroy a successful one's.
	OnFailure Policy
	// Retain is how long PolicySnapshot keeps data.
	Retain time.Duration
	// RetainMax bounds the retained datasets of the class; the oldest go
	// first.
	RetainMax int
}

// PolicyFor picks the policy for an outcome.
func (r Release) PolicyFor(outcome string) Policy {
	if r.OnFailure != "" && (outcome == OutcomeFailed || outcome == OutcomeLost) {
		return r.OnFailure
	}
	if r.Policy == "" {
		return PolicyDestroy
	}
	return r.Policy
}

// PolicyFor is the policy a release of slot s with this outcome carries
// out: the class's choice, except that a slot without its @pristine
// snapshot cannot roll back and is destroyed instead.
//
// An orphan is never made ready again: an idle one, and one whose policy
// rolls back, is destroyed; the snapshot policy still keeps its holder's
// data aside. A removed class has no policy left (Config.Class): destroy.
//
// In a class that keeps replicas, a lost holder's data is kept aside
// (KeepsLost) whatever the policy.
func (c Class) PolicyFor(s Slot, outcome string) Policy {
	p := c.Release.PolicyFor(outcome)
	switch {
	case s.Orphan && (outcome == OutcomeRetired || p == PolicyRollback):
		return PolicyDestroy
	case c.KeepsLost(outcome):
		return PolicySnapshot
	case p == PolicyRollback && !s.HasPristine:
		return PolicyDestroy
	}
	return p
}

// KeepsLost reports whether data whose holder ended with outcome is kept
// aside as retained data whatever the class's policy: the holder was
// lost, in a class that keeps replicas. Nomad may have replaced it on
// another node without naming it (Nomad 1.6.2 under
// stop_after_client_disconnect places a new allocation, PreviousAllocation
// empty: docs/node-loss.md), started from a replica or empty: this node,
// back, may hold the only copy of its last writes. The operator decides.
func (c Class) KeepsLost(outcome string) bool {
	return c.Replicate.Enabled() && outcome == OutcomeLost
}

// MarksRelease reports whether a release of s must first record itself on
// the slot (StateReleasing, with its holder and outcome), so that a crash
// midway resumes it as it began. A release whose first change removes the
// holder's data, by a destroy or a rollback whatever the outcome, need not:
// until that change the slot is as it was, and a resumed release decides
// the same, since the outcome makes no difference to the data; after it,
// the data is gone, and a release resumed with another outcome only
// destroys or rolls back a pristine slot. That spares the commonest
// releases a zfs process. A sticky class always marks: whether it parks
// depends on the outcome.
func (c Class) MarksRelease(s Slot) bool {
	if c.Sticky {
		return true
	}
	for _, o := range []string{OutcomeComplete, OutcomeFailed, OutcomeLost, OutcomeGone, OutcomeOperator, OutcomeRetired} {
		if p := c.PolicyFor(s, o); p != PolicyDestroy && p != PolicyRollback {
			return true
		}
	}
	return false
}

// NeedsPristine reports whether slots of c get a @pristine snapshot at
// creation: some outcome rolls back.
func (c Class) NeedsPristine() bool {
	return c.Release.Policy == PolicyRollback || c.Release.OnFailure == PolicyRollback
}

// RetainedName is where PolicySnapshot puts slot s's data: one dataset per
// holder, beside the slot (below its class dataset, wherever its parent).
func (c *Config) RetainedName(s Slot) string {
	tag := s.Holder
	if tag == "" {
		tag = fmt.Sprintf("%s-gen%d", s.ID, s.Generation)
	}
	return zfs.Parent(s.Dataset) + "/" + retainedPrefix + tag
}

// retainedPrefix starts the name of every retained dataset below its class.
const retainedPrefix = "retained-"

// Prune is one retained dataset that is due for destruction.
type Prune struct {
	Retained Retained
	// Expired: past its expiry; otherwise it is beyond the class's
	// RetainMax (the oldest go first).
	Expired bool
}

// RetainedDue decides which of a class's retained datasets (newest first,
// as ClassView.Retained lists them) are to be destroyed at now: those past
// their expiry, and those beyond r.RetainMax. The plugin's reconcile and
// the operator's `gc` both prune by it.
func RetainedDue(r Release, retained []Retained, now time.Time) []Prune {
	var out []Prune
	keep := r.RetainMax
	for i, ret := range retained {
		expired := !ret.Expires.IsZero() && now.After(ret.Expires)
		if !expired && (keep <= 0 || i < keep) {
			continue
		}
		out = append(out, Prune{Retained: ret, Expired: expired})
	}
	return out
}
