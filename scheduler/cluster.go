package scheduler

import (
	"errors"
	"fmt"
	"sort"
	"time"

	hclog "github.com/hashicorp/go-hclog"
	"github.com/hashicorp/nomad/nomad/state"
	"github.com/hashicorp/nomad/nomad/structs"
	nsched "github.com/hashicorp/nomad/scheduler"
)

// Options configure a Cluster. The zero value places exactly as Nomad does,
// random choices included.
type Options struct {
	// Logger receives the schedulers' logs; nil discards them.
	Logger hclog.Logger
	// Pick, if set, chooses n of the free instances of one device ask for a
	// new allocation, in place of Nomad's map-order choice. free is sorted;
	// Pick must return n distinct members of it.
	Pick func(free []string, n int) []string
	// AllocID, if set, names each new allocation instead of a random UUID.
	// It must return a new UUID on every call.
	AllocID func() string
	// Preemption enables preemption for service and batch jobs (Nomad
	// enables it for system jobs only by default). Nomad then retries a
	// failed placement with preemption, and the reasons it reports are
	// those of that second pass ("computed class ineligible").
	Preemption bool
}

// Cluster is a Nomad region's scheduling state: nodes, jobs and
// allocations in Nomad's own state store, placed by Nomad's own schedulers.
// It is not safe for concurrent use.
type Cluster struct {
	opts    Options
	logger  hclog.Logger
	store   *state.StateStore
	planner *planner
	evals   int
}

// New returns an empty cluster with one region, one datacenter (dc1) and
// the default node pool.
func New(opts Options) (*Cluster, error) {
	logger := opts.Logger
	if logger == nil {
		logger = hclog.NewNullLogger()
	}
	store, err := state.NewStateStore(&state.StateStoreConfig{Logger: logger, Region: "global", JobTrackedVersions: 6})
	if err != nil {
		return nil, fmt.Errorf("nomad state store: %w", err)
	}
	c := &Cluster{opts: opts, logger: logger, store: store}
	c.planner = &planner{planBuilder: newPlanBuilder(store, 100), c: c}
	cfg := &structs.SchedulerConfiguration{
		SchedulerAlgorithm: structs.SchedulerAlgorithmBinpack,
		PreemptionConfig: structs.PreemptionConfig{
			SystemSchedulerEnabled:   true,
			SysBatchSchedulerEnabled: opts.Preemption,
			BatchSchedulerEnabled:    opts.Preemption,
			ServiceSchedulerEnabled:  opts.Preemption,
		},
	}
	if err := store.SchedulerSetConfig(c.nextIndex(), cfg); err != nil {
		return nil, fmt.Errorf("scheduler configuration: %w", err)
	}
	return c, nil
}

func (c *Cluster) nextIndex() uint64 { return c.planner.NextIndex() }

// Snapshot returns an independent copy of the cluster as it is now, as a
// snapshot of the servers' state (nomad operator snapshot save) keeps it.
// Using the copy in the original's place is restoring that snapshot: its
// jobs, nodes and allocations come back as they were, and its indexes go
// on from the snapshot's, below any the original reached since.
func (c *Cluster) Snapshot() (*Cluster, error) {
	snap, err := c.store.Snapshot()
	if err != nil {
		return nil, fmt.Errorf("nomad state snapshot: %w", err)
	}
	store := &snap.StateStore
	index, err := store.LatestIndex()
	if err != nil {
		return nil, err
	}
	cp := &Cluster{opts: c.opts, logger: c.logger, store: store, evals: c.evals}
	cp.planner = &planner{planBuilder: newPlanBuilder(store, index+1), c: cp}
	return cp, nil
}

// Index is the state store's latest Raft-like index: what Nomad sends as
// X-Nomad-Index.
func (c *Cluster) Index() uint64 {
	i, _ := c.store.LatestIndex()
	return i
}

// UpsertNode registers a node or updates its fingerprint, keeping its
// status (a new node is ready).
func (c *Cluster) UpsertNode(n Node) error {
	if err := n.validate(); err != nil {
		return err
	}
	old, err := c.store.NodeByID(nil, n.ID)
	if err != nil {
		return err
	}
	sn := n.toStructs()
	if old != nil {
		sn.Status = old.Status
	}
	return c.store.UpsertNode(structs.MsgTypeTestSetup, c.nextIndex(), sn)
}

// SetNodeStatus moves a node to ready, down or disconnected (what the
// servers do on missed heartbeats and on reconnect) and evaluates every job
// with allocations on it, as the heartbeat code does.
func (c *Cluster) SetNodeStatus(nodeID, status string) ([]Eval, error) {
	switch status {
	case structs.NodeStatusReady, structs.NodeStatusDown, structs.NodeStatusDisconnected:
	default:
		return nil, fmt.Errorf("node status %q is not ready, down or disconnected", status)
	}
	updatedAt := int64(c.nextIndex())
	if err := c.store.UpdateNodeStatus(structs.MsgTypeTestSetup, c.nextIndex(), nodeID, status, updatedAt, nil); err != nil {
		return nil, err
	}
	return c.evaluateNodeJobs(nodeID, structs.EvalTriggerNodeUpdate)
}

// evaluateNodeJobs evaluates each job with allocations on the node, in
// job order.
func (c *Cluster) evaluateNodeJobs(nodeID, trigger string) ([]Eval, error) {
	allocs, err := c.store.AllocsByNode(nil, nodeID)
	if err != nil {
		return nil, err
	}
	jobs := map[structs.NamespacedID]bool{}
	for _, a := range allocs {
		jobs[structs.NamespacedID{Namespace: a.Namespace, ID: a.JobID}] = true
	}
	ids := make([]structs.NamespacedID, 0, len(jobs))
	for id := range jobs {
		ids = append(ids, id)
	}
	sort.Slice(ids, func(i, j int) bool { return ids[i].String() < ids[j].String() })
	var out []Eval
	var errs []error
	for _, id := range ids {
		ev, err := c.Evaluate(id.Namespace, id.ID, trigger)
		if err != nil {
			errs = append(errs, err)
			continue
		}
		out = append(out, ev)
	}
	return out, errors.Join(errs...)
}

// Register submits a job (new or a new version) and evaluates it.
func (c *Cluster) Register(j Job) (Eval, error) {
	sj, err := j.toStructs()
	if err != nil {
		return Eval{}, err
	}
	if err := c.ensureNamespace(sj.Namespace); err != nil {
		return Eval{}, err
	}
	if err := c.store.UpsertJob(structs.MsgTypeTestSetup, c.nextIndex(), nil, sj); err != nil {
		return Eval{}, fmt.Errorf("registering job %s: %w", j.ID, err)
	}
	return c.Evaluate(sj.Namespace, sj.ID, structs.EvalTriggerJobRegister)
}

// Deregister stops a job (nomad job stop, without purge) and evaluates it:
// its allocations get desired status stop.
func (c *Cluster) Deregister(namespace, jobID string) (Eval, error) {
	j, err := c.store.JobByID(nil, namespace, jobID)
	if err != nil {
		return Eval{}, err
	}
	if j == nil {
		return Eval{}, fmt.Errorf("job %q not found in namespace %q", jobID, namespace)
	}
	j = j.Copy()
	j.Stop = true
	if err := c.store.UpsertJob(structs.MsgTypeTestSetup, c.nextIndex(), nil, j); err != nil {
		return Eval{}, err
	}
	return c.Evaluate(namespace, jobID, structs.EvalTriggerJobDeregister)
}

func (c *Cluster) ensureNamespace(ns string) error {
	if ns == "" || ns == structs.DefaultNamespace {
		return nil
	}
	if have, err := c.store.NamespaceByName(nil, ns); err != nil || have != nil {
		return err
	}
	return c.store.UpsertNamespaces(c.nextIndex(), []*structs.Namespace{{Name: ns}})
}

// Job returns the current version of a job, nil if unknown.
func (c *Cluster) Job(namespace, jobID string) *structs.Job {
	j, _ := c.store.JobByID(nil, namespace, jobID)
	return j
}

// UpdateAllocClient records what a client reports about an allocation: its
// client status and task states (Node.UpdateAlloc). It then evaluates the
// job when the allocation turned client-terminal, as the servers do, so a
// failed allocation is rescheduled and the freed device can be offered.
func (c *Cluster) UpdateAllocClient(allocID, clientStatus string, tasks map[string]string) (*Eval, error) {
	old, err := c.store.AllocByID(nil, allocID)
	if err != nil {
		return nil, err
	}
	if old == nil {
		return nil, fmt.Errorf("allocation %s not found", allocID)
	}
	upd := old.Copy()
	upd.ClientStatus = clientStatus
	upd.TaskStates = map[string]*structs.TaskState{}
	for name, st := range tasks {
		ts := &structs.TaskState{State: st}
		if st == structs.TaskStateDead {
			// Nomad's reconciler times a reschedule delay from the task's
			// finish by the wall clock; a caller in simulated time has none,
			// so the delay counts as passed at the next evaluation.
			ts.FinishedAt = time.Now().Add(-time.Hour)
			ts.Failed = clientStatus == structs.AllocClientStatusFailed
		}
		upd.TaskStates[name] = ts
	}
	if err := c.store.UpdateAllocsFromClient(structs.MsgTypeTestSetup, c.nextIndex(), []*structs.Allocation{upd}); err != nil {
		return nil, err
	}
	if !upd.ClientTerminalStatus() || old.ClientTerminalStatus() {
		return nil, nil
	}
	ev, err := c.Evaluate(old.Namespace, old.JobID, structs.EvalTriggerRetryFailedAlloc)
	return &ev, err
}

// LostSince rewrites when the servers recorded that allocation allocID
// turned lost (the Time of its first AllocStates entry saying so, which
// WaitClientStop counts stop_after_client_disconnect from) to d before the
// wall clock: Nomad's reconciler compares it with time.Now, and a caller in
// simulated time, where d of that time has passed since the loss, says so
// before it evaluates the job again. An allocation never marked lost is an
// error.
func (c *Cluster) LostSince(allocID string, d time.Duration) error {
	old, err := c.store.AllocByID(nil, allocID)
	if err != nil {
		return err
	}
	if old == nil {
		return fmt.Errorf("allocation %s not found", allocID)
	}
	upd := old.Copy()
	for _, st := range upd.AllocStates {
		if st.Field == structs.AllocStateFieldClientStatus && st.Value == structs.AllocClientStatusLost {
			st.Time = time.Now().Add(-d)
			return c.store.UpsertAllocs(structs.MsgTypeTestSetup, c.nextIndex(), []*structs.Allocation{upd})
		}
	}
	return fmt.Errorf("allocation %s was never marked lost", allocID)
}

// GC deletes allocations from the state, as the servers' garbage collector
// or `nomad system gc` does. Each must be terminal (Nomad GCs nothing
// else).
func (c *Cluster) GC(allocIDs ...string) error {
	return c.deleteAllocs(allocIDs, func(a *structs.Allocation) bool {
		return a.TerminalStatus() && (a.ClientTerminalStatus() || a.ClientStatus == structs.AllocClientStatusPending)
	}, "Nomad garbage-collects only terminal allocations")
}

// deleteAllocs deletes the allocations from the state once each exists
// and may go; the first that may not is an error saying why not.
func (c *Cluster) deleteAllocs(allocIDs []string, mayGo func(*structs.Allocation) bool, why string) error {
	for _, id := range allocIDs {
		a, err := c.store.AllocByID(nil, id)
		if err != nil {
			return err
		}
		if a == nil {
			return fmt.Errorf("allocation %s not found", id)
		}
		if !mayGo(a) {
			return fmt.Errorf("allocation %s is %s/%s: %s", id, a.DesiredStatus, a.ClientStatus, why)
		}
	}
	return c.store.DeleteEval(c.nextIndex(), nil, allocIDs, false)
}

// Forget deletes allocations the servers told to stop, whatever their
// client last reported: the servers forgetting a stopping allocation while
// its task is still being killed on its node (seen with `nomad job stop
// -purge` on Nomad 1.11.3, the allocation gone before its client reported
// it complete; GC cannot, since it refuses what the client runs). The
// client then hears of it from no answer: its task ends on its own.
func (c *Cluster) Forget(allocIDs ...string) error {
	return c.deleteAllocs(allocIDs, func(a *structs.Allocation) bool {
		return a.DesiredStatus != structs.AllocDesiredStatusRun
	}, "the servers forget only what they told to stop")
}

// Allocs returns the node's allocations sorted by CreateIndex, oldest
// first, as stored (do not modify them).
func (c *Cluster) Allocs(nodeID string) []*structs.Allocation {
	as, _ := c.store.AllocsByNode(nil, nodeID)
	sort.Slice(as, func(i, j int) bool { return as[i].CreateIndex < as[j].CreateIndex })
	return as
}

// Alloc returns one allocation, nil if unknown or garbage-collected.
func (c *Cluster) Alloc(id string) *structs.Allocation {
	a, _ := c.store.AllocByID(nil, id)
	return a
}

// Evaluate runs one evaluation of a job to completion with Nomad's
// scheduler for the job's type, and reports what it placed and what it
// could not place.
func (c *Cluster) Evaluate(namespace, jobID, trigger string) (Eval, error) {
	j, err := c.store.JobByID(nil, namespace, jobID)
	if err != nil {
		return Eval{}, err
	}
	if j == nil {
		return Eval{}, fmt.Errorf("job %q not found in namespace %q", jobID, namespace)
	}
	c.evals++
	ev := &structs.Evaluation{
		ID:          c.uuid(0xe, uint64(c.evals)),
		Namespace:   namespace,
		Priority:    j.Priority,
		Type:        j.Type,
		TriggeredBy: trigger,
		JobID:       jobID,
		Status:      structs.EvalStatusPending,
	}
	if err := c.store.UpsertEvals(structs.MsgTypeTestSetup, c.nextIndex(), []*structs.Evaluation{ev}); err != nil {
		return Eval{}, err
	}
	snap, err := c.store.Snapshot()
	if err != nil {
		return Eval{}, err
	}
	sched, err := nsched.NewScheduler(j.Type, c.logger, nil, snap, c.planner)
	if err != nil {
		return Eval{}, err
	}
	c.planner.begin()
	if err := sched.Process(ev); err != nil {
		return Eval{}, fmt.Errorf("evaluating job %s: %w", jobID, err)
	}
	return c.planner.result(), nil
}

// uuid makes a deterministic UUID-shaped ID: kind tells IDs of different
// objects apart.
func (c *Cluster) uuid(kind byte, n uint64) string {
	return fmt.Sprintf("%08x-0000-4000-8%03x-%012x", uint32(n>>48), kind, n&0xffffffffffff)
}
