package scheduler

import (
	version "github.com/hashicorp/go-version"
	"github.com/hashicorp/nomad/nomad/state"
	nsched "github.com/hashicorp/nomad/scheduler"
)

// planBuilder applies an evaluation's plans to a state store as the leader's
// plan applier would, on Nomad's own nsched.Harness (v1.6.2 keeps it in the
// scheduler package; it needs no testing.TB for SubmitPlan, UpdateEval and
// the index).
type planBuilder struct {
	*nsched.Harness
}

var _ nsched.Planner = planBuilder{}

// newPlanBuilder returns a builder over store whose first write is at
// nextIndex (Harness starts at 1 and offers no other start, so its counter
// is advanced: a few thousand increments at most, once per Cluster).
func newPlanBuilder(store *state.StateStore, nextIndex uint64) planBuilder {
	h := nsched.NewHarnessWithState(nil, store)
	for i := uint64(2); i < nextIndex; i++ {
		h.NextIndex()
	}
	return planBuilder{Harness: h}
}

// ServersMeetMinimumVersion: every server is as new as the scheduler.
// Harness answers false unless built for a test; the schedulers then turn
// off what needs newer servers (max_client_disconnect's unknown state).
func (planBuilder) ServersMeetMinimumVersion(*version.Version, bool) bool { return true }
