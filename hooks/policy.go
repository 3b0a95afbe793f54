package hooks

import (
	"fmt"
	"time"
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
	// OutcomeUnknown: a ready slot held data of an allocation that was never
	// recorded (the plugin was down while it ran and ended).
	OutcomeUnknown = "unknown"
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

// pristine is the snapshot a rollback-policy slot returns to.
const pristine = "pristine"

// retainedSnapshot is the held snapshot of retained data.
const retainedSnapshot = "retained"

// holdTag is the zfs hold the plugin places on retained snapshots.
const holdTag = "nomad-device-zfs"
