package hooks

import (
	"context"
	"errors"
	"path"
	"sync"
	"time"

	"golang.org/x/sync/errgroup"

	"github.com/nomad-device-zfs/nomad-device-zfs/model"
	"github.com/nomad-device-zfs/nomad-device-zfs/zfs"
)

// createConcurrency bounds the zfs processes that create or mount slots at
// once. Each is short and mostly CPU-bound; more than a few only queue on
// the host's cores.
const createConcurrency = 4

// publishEvery paces the partial views published while slots are created:
// a node with many new slots offers them a batch at a time, each batch read
// back with one zfs list, without re-registering the node for every one.
// The first batch waits as long: the agent registers the node with a device
// plugin's first fingerprint, and a device added after that reaches the
// servers only with the client's next node update, seconds later, so a
// node whose slots are all made within it offers them all at once.
const publishEvery = time.Second

// apply runs the planned actions and returns a reason for each dataset it
// could not create. Class datasets go first, in order; a class that failed
// skips its slots. Slots are then created and mounted, up to concurrency at
// once, taking the classes in turn; every publishEvery, those done since
// are read back (one zfs list) and published over v, once every class has a
// slot to offer.
func (m *Manager) apply(ctx context.Context, v *model.View, acts []model.Action) map[string]string {
	failed := map[string]string{}
	badClass := map[string]string{}
	var slots []model.Action
	for _, a := range acts {
		if a.Kind != model.CreateClass && a.Kind != model.MountClass {
			slots = append(slots, a)
			continue
		}
		err := m.run(ctx, model.Plan{Ops: a.Ops})
		if reason := m.logAction(a, true, err); reason != "" {
			failed[a.Dataset] = reason
			badClass[a.Class] = "class dataset " + a.Dataset + ": " + reason
		}
	}

	// A failed class's slots are recorded before any create runs: the
	// creates write failed too.
	var work []model.Action
	for _, a := range interleave(slots) {
		if reason, bad := badClass[a.Class]; bad {
			failed[a.Dataset] = reason
			continue
		}
		work = append(work, a)
	}
	var mu sync.Mutex // guards failed, done and lastPublish
	var done []model.Action
	lastPublish := time.Now()
	var g errgroup.Group
	g.SetLimit(m.concurrency)
	for _, a := range work {
		g.Go(func() error {
			ok, err := m.slotAction(ctx, a)
			mu.Lock()
			defer mu.Unlock()
			if reason := m.logAction(a, ok, err); reason != "" {
				failed[a.Dataset] = reason
				return nil
			}
			if ok {
				done = append(done, a)
			}
			if len(done) > 0 && time.Since(lastPublish) >= publishEvery {
				m.rereadMany(ctx, v, done)
				m.publishPartial(v)
				done, lastPublish = nil, time.Now()
			}
			return nil
		})
	}
	_ = g.Wait() // every error is recorded in failed
	return failed
}

// interleave orders slot actions by taking the classes in turn, so every
// class has a slot early.
func interleave(acts []model.Action) []model.Action {
	var order []string
	byClass := map[string][]model.Action{}
	for _, a := range acts {
		if _, ok := byClass[a.Class]; !ok {
			order = append(order, a.Class)
		}
		byClass[a.Class] = append(byClass[a.Class], a)
	}
	out := make([]model.Action, 0, len(acts))
	for len(out) < len(acts) {
		for _, c := range order {
			if q := byClass[c]; len(q) > 0 {
				out = append(out, q[0])
				byClass[c] = q[1:]
			}
		}
	}
	return out
}

// offersEveryClass reports whether publishing v is safe while slots are
// still being created: a healthy slot in every class whose parent has no
// problem (below one that has, nothing will change soon). A class shown
// with no healthy instance makes Nomad mark the node's class ineligible for
// a job evaluated then, and device health is not part of the computed
// class, so the job would stay blocked after the slots turn healthy.
func offersEveryClass(v *model.View) bool {
	for ci := range v.Classes {
		if v.ParentProblem(&v.Classes[ci]) != "" {
			continue
		}
		healthy := false
		for si := range v.Classes[ci].Slots {
			healthy = healthy || v.Classes[ci].Slots[si].Healthy
		}
		if !healthy {
			return false
		}
	}
	return true
}

// slotAction creates or mounts one slot. A slot a Reserve
// is fencing may be between the destroy and the re-create of a release:
// creating it here would lose what the release records, so it is left to
// the Reserve (done false); the next pass looks again.
func (m *Manager) slotAction(ctx context.Context, a model.Action) (done bool, err error) {
	id := path.Base(a.Dataset)
	lock := m.locks.get(id)
	if !lock.TryLock() {
		return false, nil
	}
	defer lock.Unlock()
	err = m.run(ctx, model.Plan{Ops: a.Ops})
	return err == nil, err
}

// logAction logs what an action did and returns why it failed, "" if it
// did not.
func (m *Manager) logAction(a model.Action, done bool, err error) string {
	switch {
	case err == nil && done:
		m.logger.Info(a.Kind.String(), "dataset", a.Dataset)
		return ""
	case err == nil:
		m.logger.Debug(a.Kind.String()+": slot busy in Reserve; next pass", "dataset", a.Dataset)
		return ""
	}
	reason := err.Error()
	if errors.Is(err, zfs.ErrNoSpace) {
		reason = "pool out of space for another slot: " + reason
	}
	m.logger.Error("cannot "+a.Kind.String(), "dataset", a.Dataset, "error", err)
	return reason
}
