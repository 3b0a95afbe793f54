// Package scheduler places allocations the way Nomad's servers do, with
// Nomad's own code: the real service and batch schedulers of
// github.com/hashicorp/nomad/scheduler (reconciler, feasibility checks,
// the bin-packing ranker with its device allocator, preemption) over an
// in-memory state store (nomad/state), with plans applied by the
// scheduler package's Harness, the applier Nomad's own scheduler tests
// use. It is Nomad v1.6.2's code, the newest under the MPL-2.0. Nothing
// here is a model of Nomad's placement: what a Cluster places is what a
// Nomad 1.6.2 leader would place, given the same nodes, jobs and
// allocation states.
//
// That matters for this plugin because of facts the plugin cannot change
// and must survive (see docs/lifecycle.md):
//
//   - a device instance is free for a new placement as soon as its
//     allocation is client-terminal (structs.DeviceAccounter skips
//     complete, failed and lost allocations), before its task may have
//     exited on the node (a lost allocation keeps running while cut off);
//   - a plan that stops an allocation may give its device to a new one in
//     the same plan (EvalContext.ProposedAllocs drops what the plan stops
//     or preempts), so a destructive update's replacement can be offered
//     the very slot its predecessor still uses;
//   - only healthy instances are offered, and offers inside one plan
//     account for each other.
//
// Two things are not Nomad's and are said here so nobody mistakes them:
//
//   - Determinism. Nomad picks a free instance by map order and names
//     allocations with random UUIDs. Options.Pick and Options.AllocID let
//     a caller (the seeded simulation in ../sim) make both reproducible.
//     The planner wrapper checks Nomad's own choice against
//     structs.DeviceAccounter before replacing it with another free
//     instance, so a replacement never hides a collision Nomad made.
//   - Evaluation brokering. There is no eval broker, no blocked-eval
//     tracker and no plan queue: Evaluate runs one evaluation to the end,
//     synchronously. A caller that wants a blocked job placed once
//     capacity frees evaluates it again (Nomad's blocked-evals tracker does
//     that on node and allocation updates).
//
// One thing Nomad gets wrong, pinned by a test: with preemption enabled,
// when the second task of a group asking the same device finds none free,
// Nomad's retry with preemption builds a fresh device allocator that
// forgets the instance the first task just got, and may offer it again
// (scheduler/feasible/rank.go, devAllocatorEvict). Cluster refuses such a
// plan with ErrDeviceCollision rather than apply it.
//
// The package runs no process and opens no socket (scripts/check-imports.sh).
package scheduler
