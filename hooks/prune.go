package hooks

import (
	"context"

	hclog "github.com/hashicorp/go-hclog"

	"github.com/nomad-device-zfs/nomad-device-zfs/model"
)

// The data kept aside below a class, and removed classes: each pass
// finishes what a crash left, prunes what is due and retires what is empty,
// as the model plans it.

// pruneRetained destroys retained data past its expiry, and the oldest past
// the class's RetainMax (model.PlanPrunes). It reports whether it
// destroyed anything.
func (m *Manager) pruneRetained(ctx context.Context, cv *model.ClassView) bool {
	plans, kept := model.PlanPrunes(m.cfg, cv, m.now())
	for _, k := range kept {
		m.logger.Error("cannot prune retained data", "dataset", k.Dataset, "error", k.Why)
	}
	return m.runEach(ctx, plans, "cannot prune retained data")
}

// retireClasses destroys the class datasets of removed classes that have
// nothing left below them (model.PlanRetireClasses). It reports whether it
// destroyed anything.
func (m *Manager) retireClasses(ctx context.Context, v *model.View) bool {
	return m.runEach(ctx, model.PlanRetireClasses(v), "cannot destroy the dataset of a removed class")
}

// finishRenamed completes retained data a crash left between the rename
// and the rewrite of its owner mark (model.PlanFinishRetained). It reports
// whether it changed anything.
func (m *Manager) finishRenamed(ctx context.Context, cv *model.ClassView) bool {
	return m.runEach(ctx, model.PlanFinishRetained(cv, m.now()), "cannot finish retained data")
}

// runEach runs independent plans, logging each failure; it reports whether
// any of them finished.
func (m *Manager) runEach(ctx context.Context, plans []model.Plan, failed string) bool {
	done := false
	for _, p := range plans {
		if err := m.run(ctx, p); err != nil {
			m.logger.Error(failed, "error", err)
			continue
		}
		done = true
	}
	return done
}

// DestroyRetained destroys retained data r, as a scan read it
// (model.PlanDestroyRetained): for the operator's gc, which holds none of
// the plugin's locks. Every command counts what is gone already as done,
// so the plugin and an operator may race on it.
func DestroyRetained(ctx context.Context, cfg *model.Config, z ZFS, r model.Retained) error {
	p, err := model.PlanDestroyRetained(cfg, r)
	if err != nil {
		return err
	}
	return runPlan(ctx, z, hclog.NewNullLogger(), p, model.Seen{})
}
