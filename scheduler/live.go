package scheduler

import (
	"fmt"
	"sort"

	hclog "github.com/hashicorp/go-hclog"
	"github.com/hashicorp/nomad/nomad/state"
	"github.com/hashicorp/nomad/nomad/structs"
	nsched "github.com/hashicorp/nomad/scheduler"
)

// Live is a cluster as a Nomad HTTP API shows it, in Nomad's own types
// (the API serializes structs, so its JSON decodes into them): what
// PlanLive loads into a fresh state store to plan against.
type Live struct {
	// Nodes are the client nodes, with NodeResources.Devices.
	Nodes []*structs.Node
	// Allocs are the allocations on those nodes, each with its Job, as
	// /v1/node/<id>/allocations returns them. Allocations in namespaces
	// the caller cannot read are missing, and their devices look free.
	Allocs []*structs.Allocation
	// Current is the planned job's version the servers hold, nil for a new
	// job: against it the reconciler tells an in-place from a destructive
	// update, as `nomad job plan` does.
	Current *structs.Job
	// Deployment is the planned job's latest deployment, nil if none: a
	// paused or failed one, or unhealthy allocations in a running one,
	// hold back a rolling update, as on the servers.
	Deployment *structs.Deployment
	// Config is the scheduler configuration; nil is Nomad's default
	// (binpack, preemption for system jobs only).
	Config *structs.SchedulerConfiguration
}

// LivePlan is what the servers' scheduler would do with a job now.
type LivePlan struct {
	// Placed are the new allocations, in name order, with their
	// AllocatedResources (device instances per task).
	Placed []*structs.Allocation
	// Stopped and Preempted are the allocations the plan would stop or
	// evict.
	Stopped, Preempted []*structs.Allocation
	// Failed is Nomad's account of each group it could not place in full,
	// by group name: the metrics `nomad job plan` prints.
	Failed map[string]*structs.AllocMetric
}

// PlanLive evaluates job against l with Nomad's scheduler for the job's
// type, in a state store of its own: nothing is sent anywhere. It is the
// server half of `nomad job plan` (Job.Plan also evaluates a snapshot with
// the real scheduler and discards the plan), run locally so that a
// read-only token suffices and the placements themselves — nodes and
// device instances — can be shown.
func PlanLive(l Live, job *structs.Job, logger hclog.Logger) (*LivePlan, error) {
	if job == nil {
		return nil, fmt.Errorf("no job to plan")
	}
	if logger == nil {
		logger = hclog.NewNullLogger()
	}
	store, err := state.NewStateStore(&state.StateStoreConfig{Logger: logger, Region: job.Region, JobTrackedVersions: 6})
	if err != nil {
		return nil, fmt.Errorf("nomad state store: %w", err)
	}
	// The store's own writes take indexes above every index the cluster
	// showed, so none is mistaken for one of the cluster's: the reconciler
	// tells an allocation of the current job version by its Job's
	// JobModifyIndex.
	index := liveMaxIndex(l) + 10
	next := func() uint64 { index++; return index }

	cfg := l.Config
	if cfg == nil {
		cfg = &structs.SchedulerConfiguration{
			SchedulerAlgorithm: structs.SchedulerAlgorithmBinpack,
			PreemptionConfig:   structs.PreemptionConfig{SystemSchedulerEnabled: true},
		}
	}
	if err := store.SchedulerSetConfig(next(), cfg); err != nil {
		return nil, fmt.Errorf("scheduler configuration: %w", err)
	}

	// The jobs the allocations run: the newest version of each.
	jobs := map[structs.NamespacedID]*structs.Job{}
	for _, a := range l.Allocs {
		if a.Job == nil {
			return nil, fmt.Errorf("allocation %s comes without its job", a.ID)
		}
		id := structs.NamespacedID{Namespace: a.Namespace, ID: a.JobID}
		if have := jobs[id]; have == nil || a.Job.Version > have.Version {
			jobs[id] = a.Job
		}
	}
	target := structs.NamespacedID{Namespace: job.Namespace, ID: job.ID}
	if l.Current != nil {
		jobs[target] = l.Current
	} else {
		delete(jobs, target)
	}
	if err := ensureParents(store, next, l.Nodes, jobs, job); err != nil {
		return nil, err
	}
	for _, n := range l.Nodes {
		sn := n.Copy()
		// The API never shows a node's secret, and the state store's
		// secret_id index drops a node without one, silently
		// (StateStore.UpsertNode returns nil on insert errors).
		if sn.SecretID == "" {
			sn.SecretID = sn.ID
		}
		if err := store.UpsertNode(structs.MsgTypeTestSetup, next(), sn); err != nil {
			return nil, fmt.Errorf("node %s: %w", n.ID, err)
		}
		if got, err := store.NodeByID(nil, sn.ID); err != nil || got == nil {
			return nil, fmt.Errorf("node %s: Nomad's state store did not take it (%v)", n.ID, err)
		}
	}
	ids := make([]structs.NamespacedID, 0, len(jobs))
	for id := range jobs {
		ids = append(ids, id)
	}
	sort.Slice(ids, func(i, j int) bool { return ids[i].String() < ids[j].String() })
	for _, id := range ids {
		if id == target {
			if err := upsertCurrent(store, jobs[id], next); err != nil {
				return nil, fmt.Errorf("job %s: %w", id, err)
			}
			continue
		}
		if err := store.UpsertJob(structs.MsgTypeTestSetup, next(), nil, jobs[id].Copy()); err != nil {
			return nil, fmt.Errorf("job %s: %w", id, err)
		}
	}
	if d := l.Deployment; d != nil {
		if err := store.UpsertDeployment(next(), d.Copy()); err != nil {
			return nil, fmt.Errorf("deployment %s: %w", d.ID, err)
		}
	}
	allocs := make([]*structs.Allocation, 0, len(l.Allocs))
	for _, a := range l.Allocs {
		allocs = append(allocs, a.Copy())
	}
	if len(allocs) > 0 {
		if err := store.UpsertAllocs(structs.MsgTypeTestSetup, next(), allocs); err != nil {
			return nil, fmt.Errorf("allocations: %w", err)
		}
	}

	// As the servers' Job.Plan does: an unchanged job is not inserted, so
	// its deployment and allocations stay current; a changed one goes in
	// at a new index, a new version.
	if l.Current == nil || l.Current.SpecChanged(job) {
		if err := store.UpsertJob(structs.MsgTypeTestSetup, next(), nil, job.Copy()); err != nil {
			return nil, fmt.Errorf("job %s: %w", job.ID, err)
		}
	}
	ev := &structs.Evaluation{
		ID: "00000000-0000-4000-8000-00000000e0a1", Namespace: job.Namespace, Priority: job.Priority,
		Type: job.Type, TriggeredBy: structs.EvalTriggerJobRegister, JobID: job.ID,
		Status: structs.EvalStatusPending, AnnotatePlan: true,
	}
	if err := store.UpsertEvals(structs.MsgTypeTestSetup, next(), []*structs.Evaluation{ev}); err != nil {
		return nil, err
	}
	snap, err := store.Snapshot()
	if err != nil {
		return nil, err
	}
	pb := newPlanBuilder(store, next())
	sched, err := nsched.NewScheduler(job.Type, logger, nil, snap, pb)
	if err != nil {
		return nil, err
	}
	if err := sched.Process(ev); err != nil {
		return nil, fmt.Errorf("evaluating job %s: %w", job.ID, err)
	}
	return livePlan(pb, snap), nil
}

// livePlan collects the placements of every plan the evaluation submitted
// and the failures of its last status update.
func livePlan(pb planBuilder, before *state.StateSnapshot) *LivePlan {
	out := &LivePlan{Failed: map[string]*structs.AllocMetric{}}
	for _, plan := range pb.Plans {
		for _, list := range plan.NodeAllocation {
			for _, a := range list {
				if old, _ := before.AllocByID(nil, a.ID); old != nil {
					continue // an in-place update keeps what it has
				}
				out.Placed = append(out.Placed, a)
			}
		}
		for _, list := range plan.NodeUpdate {
			out.Stopped = append(out.Stopped, list...)
		}
		for _, list := range plan.NodePreemptions {
			out.Preempted = append(out.Preempted, list...)
		}
	}
	if n := len(pb.Evals); n > 0 {
		for tg, m := range pb.Evals[n-1].FailedTGAllocs {
			out.Failed[tg] = m
		}
	}
	sort.Slice(out.Placed, func(i, j int) bool { return out.Placed[i].Name < out.Placed[j].Name })
	return out
}

// upsertCurrent puts the job's current version in the store with the
// cluster's CreateIndex, JobModifyIndex and Version: the reconciler tells
// its allocations by JobModifyIndex and its deployment by JobCreateIndex
// and JobVersion. The store sets all three indexes on a new job and bumps
// the version of an existing one unless it is higher, hence two writes.
func upsertCurrent(store *state.StateStore, cur *structs.Job, next func() uint64) error {
	if cur.JobModifyIndex == 0 {
		return store.UpsertJob(structs.MsgTypeTestSetup, next(), nil, cur.Copy())
	}
	if cur.CreateIndex == 0 || cur.CreateIndex >= cur.JobModifyIndex || cur.Version == 0 {
		return store.UpsertJob(structs.MsgTypeTestSetup, cur.JobModifyIndex, nil, cur.Copy())
	}
	first := cur.Copy()
	first.Version--
	if err := store.UpsertJob(structs.MsgTypeTestSetup, cur.CreateIndex, nil, first); err != nil {
		return err
	}
	return store.UpsertJob(structs.MsgTypeTestSetup, cur.JobModifyIndex, nil, cur.Copy())
}

// liveMaxIndex is the highest Raft index l shows.
func liveMaxIndex(l Live) uint64 {
	var m uint64
	for _, n := range l.Nodes {
		m = max(m, n.ModifyIndex)
	}
	for _, a := range l.Allocs {
		m = max(m, a.ModifyIndex, a.AllocModifyIndex)
		if a.Job != nil {
			m = max(m, a.Job.ModifyIndex, a.Job.JobModifyIndex)
		}
	}
	if l.Current != nil {
		m = max(m, l.Current.ModifyIndex, l.Current.JobModifyIndex)
	}
	return m
}

// ensureParents creates the namespaces and node pools the nodes and jobs
// name: the state store refuses a job in a namespace or pool it lacks.
func ensureParents(store *state.StateStore, next func() uint64, nodes []*structs.Node, jobs map[structs.NamespacedID]*structs.Job, job *structs.Job) error {
	nss := map[string]bool{job.Namespace: true}
	pools := map[string]bool{job.NodePool: true}
	for _, j := range jobs {
		nss[j.Namespace] = true
		pools[j.NodePool] = true
	}
	for _, n := range nodes {
		pools[n.NodePool] = true
	}
	for ns := range nss {
		if ns == "" || ns == structs.DefaultNamespace {
			continue
		}
		if err := store.UpsertNamespaces(next(), []*structs.Namespace{{Name: ns}}); err != nil {
			return fmt.Errorf("namespace %s: %w", ns, err)
		}
	}
	for p := range pools {
		if p == "" || p == structs.NodePoolDefault || p == structs.NodePoolAll {
			continue
		}
		if err := store.UpsertNodePools(structs.MsgTypeTestSetup, next(), []*structs.NodePool{{Name: p}}); err != nil {
			return fmt.Errorf("node pool %s: %w", p, err)
		}
	}
	return nil
}
