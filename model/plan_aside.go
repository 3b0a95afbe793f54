package model

import "time"

// Plans of the data kept aside below a class (retained and parked) and of
// the class datasets themselves, for the reconcile pass and the operator's
// gc.

// PlanFinishRetained completes the retained data of class view cv that a
// crash left between the rename and the rewrite of its owner mark (still in
// the slot's state, recognised by PropRetainAs).
func PlanFinishRetained(cv *ClassView, now time.Time) []Plan {
	var plans []Plan
	for _, r := range cv.Retained {
		if State(r.Info.User.Get(PropState)) == StateRetained {
			continue
		}
		plans = append(plans, Plan{
			Doing: "finishing retained data " + r.Dataset,
			Ops:   []Op{setOp(r.Dataset, RetainedProps(r.Dataset, now))},
			Done:  Note{Msg: "finished retained data after a crash", KV: []any{"dataset", r.Dataset}},
		})
	}
	return plans
}

// PlanPrunes destroys the retained data of class view cv that is due at now
// (RetainedDue): past its expiry, and the oldest past the class's
// RetainMax. Data with anything foreign below it is left, with the reason.
func PlanPrunes(cfg *Config, cv *ClassView, now time.Time) (plans []Plan, kept []Kept) {
	for _, due := range RetainedDue(cv.Class.Release, cv.Retained, now) {
		p, err := PlanDestroyRetained(cfg, due.Retained)
		if err != nil {
			kept = append(kept, Kept{Dataset: due.Retained.Dataset, Why: err})
			continue
		}
		p.Done = Note{Msg: "pruned retained data", KV: []any{"dataset", due.Retained.Dataset, "expired", due.Expired}}
		plans = append(plans, p)
	}
	return plans, kept
}

// Kept is retained data past its time that is not destroyed, and why
// (something foreign below it: CheckDestroyRetained).
type Kept struct {
	Dataset string
	Why     error
}

// PlanDestroyRetained destroys retained data r, as a scan read it: the
// plugin's hold on its snapshot is released, the snapshot destroyed, then
// the dataset, without -r, so ZFS itself refuses if anything foreign
// appeared below it since. Data with anything foreign below it is not
// touched at all. Every command counts what is gone already as done, so the
// plugin and an operator may race on it.
func PlanDestroyRetained(cfg *Config, r Retained) (Plan, error) {
	if err := CheckDestroyRetained(cfg, r); err != nil {
		return Plan{}, err
	}
	// @retained, and the @pristine that parked data took along.
	return Plan{
		Doing: "destroying " + r.Dataset,
		Ops:   append(dropSnapshots(r.OwnSnapshots), destroyOp(r.Dataset)),
	}, nil
}

// PlanRetireClasses destroys the class datasets of removed classes that
// have nothing left below them (their orphans released, their retained data
// expired), without -r: ZFS itself refuses if anything appeared since the
// scan. Nothing below a parent with a problem.
func PlanRetireClasses(v *View) []Plan {
	var plans []Plan
	for _, cv := range v.Removed {
		if !cv.Empty || v.ParentProblem(&cv) != "" {
			continue
		}
		plans = append(plans, Plan{
			Doing: "destroying the dataset of removed class " + cv.Class.Name,
			Ops:   []Op{destroyOp(cv.Dataset)},
			Done:  Note{Msg: "destroyed the dataset of a class the configuration no longer has", KV: []any{"dataset", cv.Dataset}},
		})
	}
	return plans
}
