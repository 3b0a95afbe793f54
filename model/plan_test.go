package model_test

import (
	"errors"
	"fmt"
	"os"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/nomad-device-zfs/nomad-device-zfs/model"
)

// crashCase is one lifecycle step whose plan a crash may cut anywhere.
type crashCase struct {
	name string
	// setup brings a fresh world to the moment before the step: the plan
	// under test is the first step the next pass (or Reserve) makes.
	setup func(t *testing.T) *world
	// step makes the plan under test; nil: the next pass's plans.
	step func(w *world) model.Plan
	// plan is the golden plan, in short (show).
	plan string
	// crashes are, for a crash after 1, 2, ... len-1 of its commands, the
	// plans the next pass makes from the state the crash left (showAll).
	crashes []string
	// after is what the node's allocations are once the step is done (for
	// the passes that settle it), and then the Reserve's retry, if any.
	after func(w *world)
	// end is the node once settled, the same after every crash (state);
	// crashEnds, where a crash after k commands settles otherwise (each
	// says why).
	end       string
	crashEnds map[int]string
}

// TestPlansFinishWhateverTheCrash: every lifecycle plan, and for a crash
// after each of its commands, the plan the next pass makes from what the
// crash left; that plan then finishes what the whole one would have done:
// the node settles to the same end, the holder's data kept or gone as the
// policy says, nothing leaked. (I4 of docs/lifecycle.md, for each policy
// and crash point.)
func TestPlansFinishWhateverTheCrash(t *testing.T) {
	for _, tc := range crashCases() {
		t.Run(tc.name, func(t *testing.T) {
			plan := func(w *world) model.Plan {
				if tc.step != nil {
					return tc.step(w)
				}
				plans := w.pass()
				if len(plans) != 1 {
					t.Fatalf("the pass planned %d steps, want 1:\n%s", len(plans), showAll(plans))
				}
				return plans[0]
			}
			w := tc.setup(t)
			whole := plan(w)
			if got := show(whole); got != tc.plan {
				t.Errorf("plan:\n got %s\nwant %s", got, tc.plan)
			}
			if _, err := w.apply(whole, -1, model.Seen{}); err != nil {
				t.Fatalf("the whole plan: %v", err)
			}
			tc.after(w)
			if got := w.state(); got != tc.end {
				t.Errorf("end:\n got %s\nwant %s", indent(got), indent(tc.end))
			}

			if os.Getenv("PLAN_GOLDEN") != "" {
				var b strings.Builder
				fmt.Fprintf(&b, "GOLDEN %s\nplan: %q,\nend: %q,\ncrashes: []string{\n", tc.name, show(whole), w.state())
				for k := 1; k < len(whole.Ops); k++ {
					w := tc.setup(t)
					w.apply(plan(w), k, model.Seen{})
					fmt.Fprintf(&b, "\t%q,\n", showAll(w.pass()))
				}
				fmt.Printf("%s},\nEND\n", b.String())
			}
			if len(tc.crashes) != len(whole.Ops)-1 {
				t.Fatalf("%d crash goldens for a plan of %d commands, want %d", len(tc.crashes), len(whole.Ops), len(whole.Ops)-1)
			}
			for k := 1; k < len(whole.Ops); k++ {
				w := tc.setup(t)
				if ran, err := w.apply(plan(w), k, model.Seen{}); !errors.Is(err, errCrash) || ran != k {
					t.Fatalf("crash after %d: ran %d, %v", k, ran, err)
				}
				if got := showAll(w.pass()); got != tc.crashes[k-1] {
					t.Errorf("after a crash after %d (%s), the next pass plans:\n got %s\nwant %s", k,
						show(model.Plan{Ops: whole.Ops[k-1 : k]}), indent(got), indent(tc.crashes[k-1]))
				}
				tc.after(w)
				end := tc.end
				if e, ok := tc.crashEnds[k]; ok {
					end = e
				}
				if got := w.state(); got != end {
					t.Errorf("after a crash after %d, the end:\n got %s\nwant %s", k, indent(got), indent(end))
				}
			}
		})
	}
}

func indent(s string) string { return strings.ReplaceAll(s, "\n", "\n     ") }

// heldBy is a world with class c's slots, allocation a recorded as the
// holder of its slots (a pass saw it running) and its data written.
func heldBy(c model.Class, a model.Alloc) func(t *testing.T) *world {
	return func(t *testing.T) *world {
		w := newWorld(t, c)
		w.settle(snapshot(a), 5)
		for _, id := range a.Devices[0].IDs {
			w.write(w.cfg.SlotDataset(c.Name, id), "data", a.ID)
		}
		return w
	}
}

// ended returns a with its client status; the desired status stays run.
func ended(a model.Alloc, client string) model.Alloc {
	a.ClientStatus = client
	return a
}

func running(a model.Alloc) model.Alloc {
	a.ClientStatus = "running"
	return a
}

// endsThen sets the node's allocations for the step's passes.
func endsThen(allocs ...model.Alloc) func(w *world) {
	return func(w *world) {
		w.settle(snapshot(allocs...), 10)
	}
}

func crashCases() []crashCase {
	destroy := model.Class{Name: "scratch", Slots: 1}
	rollback := model.Class{Name: "scratch", Slots: 1, Release: model.Release{Policy: model.PolicyRollback}}
	keep := model.Class{Name: "scratch", Slots: 1, Release: model.Release{Policy: model.PolicySnapshot, Retain: time.Hour, RetainMax: 10}}
	keepFailed := model.Class{Name: "scratch", Slots: 1, Release: model.Release{Policy: model.PolicyRollback, OnFailure: model.PolicySnapshot, Retain: time.Hour}}
	golden := model.Class{Name: "scratch", Slots: 1, FromSnapshot: "tank/golden@seed"}
	a := alloc("A", 10, "running", "run", "scratch", "scratch-1")

	a2 := alloc("A", 10, "running", "run", "scratch", "scratch-2")
	twoSlots := func(c model.Class) model.Class { c.Slots = 2; return c }
	sticky := model.Class{Name: "pg", Slots: 2, Sticky: true, StickyWait: time.Hour}
	stickyKeep := sticky
	stickyKeep.Release = model.Release{Policy: model.PolicySnapshot, Retain: time.Hour}
	pgA := alloc("A", 10, "running", "run", "pg", "pg-1")
	pgB := alloc("B", 20, "pending", "run", "pg", "pg-2")
	pgA.NextAllocation, pgB.PreviousAllocation = "B", "A"
	stopped := ended(pgA, "complete")
	stopped.DesiredStatus = "stop"
	replaced := []model.Alloc{stopped, pgB}
	// parkedFor is a world where A's data is parked for B, not yet started.
	parkedFor := func(c model.Class) func(t *testing.T) *world {
		return func(t *testing.T) *world {
			w := heldBy(c, pgA)(t)
			w.settle(snapshot(replaced...), 5)
			return w
		}
	}
	claim := func(w *world) model.Plan {
		v := w.view()
		if len(v.Classes[0].Parked) == 0 {
			w.t.Fatalf("no parked data left to claim:\n%s", w.state())
		}
		return model.PlanClaim(w.slot("pg", "pg-2"), pgB, v.Classes[0].Parked[0], w.now)
	}
	// claimed is the end of a claim: the Reserve fails on a crash, the
	// task's restart reserves again and claims what is still parked, and
	// B runs.
	claimed := func(w *world) {
		endsThen(replaced...)(w)
		if s := w.slot("pg", "pg-2"); s.State == model.StateReady {
			if p, err := w.apply(claim(w), -1, model.Seen{}); err != nil {
				w.t.Fatalf("the Reserve's retry: ran %d: %v", p, err)
			}
		}
		endsThen(ended(pgA, "complete"), running(pgB))(w)
	}
	migrating := sticky
	migrating.Migrate = model.Migrate{Enabled: true, Timeout: time.Minute, OnTimeout: model.MigrateFail}
	// A, on another node, replaced by B here (pgB), whose Reserve claims
	// A's data from the copy.
	remoteA := stopped
	remoteA.NodeID = "node-1"
	fromRemote := func(as ...model.Alloc) *model.Snapshot {
		snap := snapshot(as...)
		snap.Others = []model.Alloc{remoteA}
		return snap
	}
	claimCopy := func(w *world) model.Plan {
		v := w.view()
		if len(v.Classes[0].Parked) == 0 {
			w.t.Fatalf("no copy left to claim:\n%s", w.state())
		}
		return model.PlanClaim(w.slot("pg", "pg-2"), pgB, v.Classes[0].Parked[0], w.now)
	}
	claimedCopy := func(w *world) {
		w.settle(fromRemote(pgB), 10)
		if s := w.slot("pg", "pg-2"); s.State == model.StateReady {
			if p, err := w.apply(claimCopy(w), -1, model.Seen{}); err != nil {
				w.t.Fatalf("the Reserve's retry: ran %d: %v", p, err)
			}
		}
		w.settle(fromRemote(running(pgB)), 10)
	}
	endOf := func(w *world, as ...model.Alloc) *world {
		w.snap = snapshot(as...)
		return w
	}
	lostA := alloc("A", 10, "lost", "stop", "pg", "pg-2")
	lostA.NodeID, lostA.NextAllocation = "node-1", "B"
	takerB := alloc("B", 20, "pending", "run", "pg", "pg-1")
	takerB.PreviousAllocation = "A"
	return []crashCase{
		{
			// The replica's snapshots go before the rename (received, they
			// would be a stranger's below the slot); the claim mounts it.
			name: "takeover: the replacement's Reserve takes over the local replica of a lost allocation, then claims it",
			plan: "set pg/replica-A-pg-2 {canmount,outcome,retain_as}; destroy pg/replica-A-pg-2@replica-1,replica-2; rename pg/replica-A-pg-2 pg/parked-A-pg-2; set pg/parked-A-pg-2 {expires,owner,since,state}",
			end:  "pg owned files=[]\npg/pg-1 state=held holder=B holder_index=20 outcome=migrated generation=2 retain_as=pg/pg-1 owned files=[data:A-replica-2]\npg/pg-2 state=ready generation=1 owned files=[]",
			crashes: []string{
				"", // still a replica, marked: the Reserve's retry takes it over
				"", // its snapshots gone: the mark says it is the one
				"set pg/parked-A-pg-2 {expires,owner,since,state}",
			},
			setup: withReplicaOf(replicating, lostA, "pg-2", snapshot(takerB)),
			step:  takeReplica(replicating, lostA, "pg-2"),
			after: tookOver(replicating, lostA, takerB, "pg-2"),
		},
		{
			name: "destroy",
			plan: "destroy scratch/scratch-1; create scratch/scratch-1 {generation,holder_index,owner,since,state}",
			end:  "scratch owned files=[]\nscratch/scratch-1 state=ready holder_index=10 generation=2 owned files=[]",
			crashes: []string{
				"create scratch/scratch-1 {generation,owner,since,state}",
			},
			setup: func(t *testing.T) *world { return endOf(heldBy(destroy, a)(t), ended(a, "complete")) },
			after: endsThen(ended(a, "complete")),
		},
		{
			name: "rollback",
			plan: "rollback scratch/scratch-1@pristine; set scratch/scratch-1 {generation,holder_index,since,state}; inherit scratch/scratch-1 holder",
			end:  "scratch owned files=[]\nscratch/scratch-1 state=ready holder_index=10 generation=2 owned files=[]\nscratch/scratch-1@pristine ",
			crashes: []string{
				"rollback scratch/scratch-1@pristine; set scratch/scratch-1 {generation,holder_index,since,state}; inherit scratch/scratch-1 holder",
				"inherit scratch/scratch-1 holder",
			},
			setup: func(t *testing.T) *world { return endOf(heldBy(rollback, a)(t), ended(a, "complete")) },
			after: endsThen(ended(a, "complete")),
		},
		{
			name: "snapshot keeps the data aside",
			plan: "set scratch/scratch-1 {holder,holder_index,outcome,since,state}; set scratch/scratch-1 {expires,retain_as}; snapshot scratch/scratch-1@retained; hold scratch/scratch-1@retained nomad-device-zfs; rename scratch/scratch-1 scratch/retained-A; create scratch/scratch-1 {generation,holder_index,owner,since,state}; set scratch/retained-A {owner,since,state}",
			end:  "scratch owned files=[]\nscratch/retained-A state=retained holder=A holder_index=10 outcome=complete generation=1 retain_as=scratch/retained-A owned files=[data:A]\nscratch/retained-A@retained  hold=nomad-device-zfs\nscratch/scratch-1 state=ready holder_index=10 generation=2 owned files=[]",
			crashes: []string{
				"set scratch/scratch-1 {expires,retain_as}; snapshot scratch/scratch-1@retained; hold scratch/scratch-1@retained nomad-device-zfs; rename scratch/scratch-1 scratch/retained-A; create scratch/scratch-1 {generation,holder_index,owner,since,state}; set scratch/retained-A {owner,since,state}",
				"set scratch/scratch-1 {expires,retain_as}; snapshot scratch/scratch-1@retained; hold scratch/scratch-1@retained nomad-device-zfs; rename scratch/scratch-1 scratch/retained-A; create scratch/scratch-1 {generation,holder_index,owner,since,state}; set scratch/retained-A {owner,since,state}",
				"set scratch/scratch-1 {expires,retain_as}; snapshot scratch/scratch-1@retained; hold scratch/scratch-1@retained nomad-device-zfs; rename scratch/scratch-1 scratch/retained-A; create scratch/scratch-1 {generation,holder_index,owner,since,state}; set scratch/retained-A {owner,since,state}",
				"set scratch/scratch-1 {expires,retain_as}; snapshot scratch/scratch-1@retained; hold scratch/scratch-1@retained nomad-device-zfs; rename scratch/scratch-1 scratch/retained-A; create scratch/scratch-1 {generation,holder_index,owner,since,state}; set scratch/retained-A {owner,since,state}",
				"create scratch/scratch-1 {generation,holder_index,owner,since,state}\nset scratch/retained-A {owner,since,state}",
				"set scratch/retained-A {owner,since,state}",
			},
			setup: func(t *testing.T) *world { return endOf(heldBy(keep, a)(t), ended(a, "complete")) },
			after: endsThen(ended(a, "complete")),
		},
		{
			name: "on_failure snapshot, failed: keeps it",
			plan: "set scratch/scratch-1 {holder,holder_index,outcome,since,state}; set scratch/scratch-1 {expires,retain_as}; snapshot scratch/scratch-1@retained; hold scratch/scratch-1@retained nomad-device-zfs; rename scratch/scratch-1 scratch/retained-A; create scratch/scratch-1 {generation,holder_index,owner,since,state}; snapshot scratch/scratch-1@pristine; set scratch/retained-A {owner,since,state}",
			end:  "scratch owned files=[]\nscratch/retained-A state=retained holder=A holder_index=10 outcome=failed generation=1 retain_as=scratch/retained-A owned files=[data:A]\nscratch/retained-A@pristine \nscratch/retained-A@retained  hold=nomad-device-zfs\nscratch/scratch-1 state=ready holder_index=10 generation=2 owned files=[]\nscratch/scratch-1@pristine ",
			crashes: []string{
				"set scratch/scratch-1 {expires,retain_as}; snapshot scratch/scratch-1@retained; hold scratch/scratch-1@retained nomad-device-zfs; rename scratch/scratch-1 scratch/retained-A; create scratch/scratch-1 {generation,holder_index,owner,since,state}; snapshot scratch/scratch-1@pristine; set scratch/retained-A {owner,since,state}",
				"set scratch/scratch-1 {expires,retain_as}; snapshot scratch/scratch-1@retained; hold scratch/scratch-1@retained nomad-device-zfs; rename scratch/scratch-1 scratch/retained-A; create scratch/scratch-1 {generation,holder_index,owner,since,state}; snapshot scratch/scratch-1@pristine; set scratch/retained-A {owner,since,state}",
				"set scratch/scratch-1 {expires,retain_as}; snapshot scratch/scratch-1@retained; hold scratch/scratch-1@retained nomad-device-zfs; rename scratch/scratch-1 scratch/retained-A; create scratch/scratch-1 {generation,holder_index,owner,since,state}; snapshot scratch/scratch-1@pristine; set scratch/retained-A {owner,since,state}",
				"set scratch/scratch-1 {expires,retain_as}; snapshot scratch/scratch-1@retained; hold scratch/scratch-1@retained nomad-device-zfs; rename scratch/scratch-1 scratch/retained-A; create scratch/scratch-1 {generation,holder_index,owner,since,state}; snapshot scratch/scratch-1@pristine; set scratch/retained-A {owner,since,state}",
				"create scratch/scratch-1 {generation,holder_index,owner,since,state}; snapshot scratch/scratch-1@pristine\nset scratch/retained-A {owner,since,state}",
				"snapshot scratch/scratch-1@pristine\nset scratch/retained-A {owner,since,state}",
				"set scratch/retained-A {owner,since,state}",
			},
			setup: func(t *testing.T) *world { return endOf(heldBy(keepFailed, a)(t), ended(a, "failed")) },
			after: endsThen(ended(a, "failed")),
		},
		{
			name: "on_failure snapshot, complete: rolls back after a mark",
			plan: "set scratch/scratch-1 {holder,holder_index,outcome,since,state}; rollback scratch/scratch-1@pristine; set scratch/scratch-1 {generation,holder_index,since,state}; inherit scratch/scratch-1 holder; inherit scratch/scratch-1 outcome",
			end:  "scratch owned files=[]\nscratch/scratch-1 state=ready holder_index=10 generation=2 owned files=[]\nscratch/scratch-1@pristine ",
			crashes: []string{
				"rollback scratch/scratch-1@pristine; set scratch/scratch-1 {generation,holder_index,since,state}; inherit scratch/scratch-1 holder; inherit scratch/scratch-1 outcome",
				"rollback scratch/scratch-1@pristine; set scratch/scratch-1 {generation,holder_index,since,state}; inherit scratch/scratch-1 holder; inherit scratch/scratch-1 outcome",
				"inherit scratch/scratch-1 holder; inherit scratch/scratch-1 outcome",
				"inherit scratch/scratch-1 outcome",
			},
			setup: func(t *testing.T) *world { return endOf(heldBy(keepFailed, a)(t), ended(a, "complete")) },
			after: endsThen(ended(a, "complete")),
		},
		{
			name:    "an orphan is destroyed and not made again",
			plan:    "destroy scratch/scratch-2",
			end:     "scratch owned files=[]\nscratch/scratch-1 state=ready generation=1 owned files=[]",
			crashes: []string{},
			setup: func(t *testing.T) *world {
				w := heldBy(twoSlots(destroy), a2)(t)
				w.cfg.Classes[0].Slots = 1
				return endOf(w, ended(a2, "complete"))
			},
			after: endsThen(ended(a2, "complete")),
		},
		{
			name: "an orphan's data kept aside",
			plan: "set scratch/scratch-2 {holder,holder_index,outcome,since,state}; set scratch/scratch-2 {expires,retain_as}; snapshot scratch/scratch-2@retained; hold scratch/scratch-2@retained nomad-device-zfs; rename scratch/scratch-2 scratch/retained-A; set scratch/retained-A {owner,since,state}",
			end:  "scratch owned files=[]\nscratch/retained-A state=retained holder=A holder_index=10 outcome=complete generation=1 retain_as=scratch/retained-A owned files=[data:A]\nscratch/retained-A@retained  hold=nomad-device-zfs\nscratch/scratch-1 state=ready generation=1 owned files=[]",
			crashes: []string{
				"set scratch/scratch-2 {expires,retain_as}; snapshot scratch/scratch-2@retained; hold scratch/scratch-2@retained nomad-device-zfs; rename scratch/scratch-2 scratch/retained-A; set scratch/retained-A {owner,since,state}",
				"set scratch/scratch-2 {expires,retain_as}; snapshot scratch/scratch-2@retained; hold scratch/scratch-2@retained nomad-device-zfs; rename scratch/scratch-2 scratch/retained-A; set scratch/retained-A {owner,since,state}",
				"set scratch/scratch-2 {expires,retain_as}; snapshot scratch/scratch-2@retained; hold scratch/scratch-2@retained nomad-device-zfs; rename scratch/scratch-2 scratch/retained-A; set scratch/retained-A {owner,since,state}",
				"set scratch/scratch-2 {expires,retain_as}; snapshot scratch/scratch-2@retained; hold scratch/scratch-2@retained nomad-device-zfs; rename scratch/scratch-2 scratch/retained-A; set scratch/retained-A {owner,since,state}",
				"set scratch/retained-A {owner,since,state}",
			},
			setup: func(t *testing.T) *world {
				w := heldBy(twoSlots(keep), a2)(t)
				w.cfg.Classes[0].Slots = 1
				return endOf(w, ended(a2, "complete"))
			},
			after: endsThen(ended(a2, "complete")),
		},
		{
			name: "sticky: parked for the replacement",
			// The releasing mark and the parked name in one zfs set.
			plan: "set pg/pg-1 {holder,holder_index,outcome,retain_as,since,state}; rename pg/pg-1 pg/parked-A-pg-1; create pg/pg-1 {generation,holder_index,owner,since,state}; set pg/parked-A-pg-1 {expires,owner,since,state}",
			end:  "pg owned files=[]\npg/parked-A-pg-1 state=parked holder=A holder_index=10 outcome=complete generation=1 retain_as=pg/parked-A-pg-1 owned files=[data:A]\npg/pg-1 state=ready holder_index=10 generation=2 owned files=[]\npg/pg-2 state=ready generation=1 owned files=[]",
			crashes: []string{
				"set pg/pg-1 {retain_as}; rename pg/pg-1 pg/parked-A-pg-1; create pg/pg-1 {generation,holder_index,owner,since,state}; set pg/parked-A-pg-1 {expires,owner,since,state}",
				"create pg/pg-1 {generation,holder_index,owner,since,state}\nset pg/parked-A-pg-1 {expires,owner,since,state}",
				"set pg/parked-A-pg-1 {expires,owner,since,state}",
			},
			setup: func(t *testing.T) *world { return endOf(heldBy(sticky, pgA)(t), replaced...) },
			after: endsThen(replaced...),
		},
		{
			name: "sticky: the replacement's Reserve claims the parked data",
			plan: "destroy pg/pg-2; set pg/parked-A-pg-1 {owner,retain_as,state}; rename pg/parked-A-pg-1 pg/pg-2; set pg/pg-2 {generation,holder,holder_index,owner,since,state}",
			end:  "pg owned files=[]\npg/pg-1 state=ready holder_index=10 generation=2 owned files=[]\npg/pg-2 state=held holder=B holder_index=20 outcome=complete generation=2 retain_as=pg/pg-2 owned files=[data:A]",
			crashes: []string{
				"create pg/pg-2 {generation,owner,since,state}",
				"create pg/pg-2 {generation,owner,since,state}",
				"set pg/pg-2 {generation,holder,holder_index,owner,since,state}",
			},
			setup: parkedFor(sticky),
			step:  claim,
			after: claimed,
		},
		{
			// Seed 960546 of the simulation: the park's last command (the
			// parked data's own marks) did not run, and the replacement's
			// Reserve claimed the data as it was; a failed rename then left
			// it nobody's, for good, before ClaimAsProps wrote its owner.
			name: "sticky: the replacement's Reserve claims data a crash left half-parked",
			plan: "destroy pg/pg-2; set pg/parked-A-pg-1 {owner,retain_as,state}; rename pg/parked-A-pg-1 pg/pg-2; set pg/pg-2 {generation,holder,holder_index,owner,since,state}",
			end:  "pg owned files=[]\npg/pg-1 state=ready holder_index=10 generation=2 owned files=[]\npg/pg-2 state=held holder=B holder_index=20 outcome=complete generation=2 retain_as=pg/pg-2 owned files=[data:A]",
			crashes: []string{
				"create pg/pg-2 {generation,owner,since,state}\nset pg/parked-A-pg-1 {expires,owner,since,state}",
				"create pg/pg-2 {generation,owner,since,state}",
				"set pg/pg-2 {generation,holder,holder_index,owner,since,state}",
			},
			setup: func(t *testing.T) *world {
				w := endOf(heldBy(sticky, pgA)(t), replaced...)
				park := w.pass()[0]
				if ran, err := w.apply(park, len(park.Ops)-1, model.Seen{}); !errors.Is(err, errCrash) {
					t.Fatalf("the park: ran %d: %v", ran, err)
				}
				if p := w.view().Classes[0].Parked; len(p) != 1 || p[0].State != model.StateReleasing {
					t.Fatalf("want A's data half-parked, have %+v", p)
				}
				return w
			},
			step:  claim,
			after: claimed,
		},
		{
			// A copy from another node, marked for B's slot by its pull
			// (PlanReceived): renamed without a set of the claim's own.
			name: "migration: the replacement's Reserve claims the copy its pull marked for the slot",
			plan: "destroy pg/parked-A-pg-1@migrate-1,migrate-final; destroy pg/pg-2; rename pg/parked-A-pg-1 pg/pg-2; set pg/pg-2 {generation,holder,holder_index,owner,since,state}; mount pg/pg-2",
			end:  "pg owned files=[]\npg/pg-1 state=ready generation=1 owned files=[]\npg/pg-2 state=held holder=B holder_index=20 outcome=migrated generation=2 retain_as=pg/pg-2 owned files=[data:A]",
			crashes: []string{
				"",
				"create pg/pg-2 {generation,owner,since,state}",
				"",
				"mount pg/pg-2",
			},
			// A copy carries no generation of its own: the pass that
			// records B on it after a crash after the rename counts from
			// 0, not from the fresh slot's. The same with the claim's set
			// before the rename (the plan before PlanReceived marked the
			// slot): the generation only names a retained dataset's tag.
			crashEnds: map[int]string{3: "pg owned files=[]\npg/pg-1 state=ready generation=1 owned files=[]\npg/pg-2 state=held holder=B holder_index=20 outcome=migrated generation=1 retain_as=pg/pg-2 owned files=[data:A]"},
			setup:     receivedFor(migrating, pgB),
			step:      claimCopy,
			after:     claimedCopy,
		},
		{
			name: "sticky: parked data no replacement claimed in time, kept by the snapshot policy",
			plan: "snapshot pg/parked-A-pg-1@retained; hold pg/parked-A-pg-1@retained nomad-device-zfs; set pg/parked-A-pg-1 {expires,owner,since,state}",
			end:  "pg owned files=[]\npg/parked-A-pg-1 state=retained holder=A holder_index=10 outcome=complete generation=1 retain_as=pg/parked-A-pg-1 owned files=[data:A]\npg/parked-A-pg-1@retained  hold=nomad-device-zfs\npg/pg-1 state=ready holder_index=10 generation=2 owned files=[]\npg/pg-2 state=ready generation=1 owned files=[]",
			crashes: []string{
				"snapshot pg/parked-A-pg-1@retained; hold pg/parked-A-pg-1@retained nomad-device-zfs; set pg/parked-A-pg-1 {expires,owner,since,state}",
				"snapshot pg/parked-A-pg-1@retained; hold pg/parked-A-pg-1@retained nomad-device-zfs; set pg/parked-A-pg-1 {expires,owner,since,state}",
			},
			setup: func(t *testing.T) *world {
				w := parkedFor(stickyKeep)(t)
				w.now = w.now.Add(2 * time.Hour) // past sticky_wait
				return w
			},
			after: endsThen(replaced...),
		},
		{
			name: "retained data past its retention is pruned",
			plan: "release scratch/retained-A@retained nomad-device-zfs; destroy scratch/retained-A@retained; destroy scratch/retained-A",
			end:  "scratch owned files=[]\nscratch/scratch-1 state=ready holder_index=10 generation=2 owned files=[]",
			crashes: []string{
				"release scratch/retained-A@retained nomad-device-zfs; destroy scratch/retained-A@retained; destroy scratch/retained-A",
				"destroy scratch/retained-A",
			},
			setup: func(t *testing.T) *world {
				w := endOf(heldBy(keep, a)(t), ended(a, "complete"))
				w.settle(w.snap, 5)
				w.now = w.now.Add(2 * time.Hour)
				return w
			},
			after: endsThen(ended(a, "complete")),
		},
		{
			name: "destroy: the replica snapshot dropped, the bookmarks go with the slot",
			plan: "release scratch/scratch-1@replica-2 nomad-device-zfs; destroy scratch/scratch-1@replica-2; destroy scratch/scratch-1; create scratch/scratch-1 {generation,holder_index,owner,since,state}",
			end:  "scratch owned files=[]\nscratch/scratch-1 state=ready holder_index=10 generation=2 owned files=[]",
			crashes: []string{
				"release scratch/scratch-1@replica-2 nomad-device-zfs; destroy scratch/scratch-1@replica-2; destroy scratch/scratch-1; create scratch/scratch-1 {generation,holder_index,owner,since,state}",
				"destroy scratch/scratch-1; create scratch/scratch-1 {generation,holder_index,owner,since,state}",
				"create scratch/scratch-1 {generation,owner,since,state}",
			},
			setup: func(t *testing.T) *world { return endOf(withReplicaBases(heldBy(destroy, a))(t), ended(a, "complete")) },
			after: endsThen(ended(a, "complete")),
		},
		{
			name: "rollback: the replica snapshot and bookmarks dropped first",
			plan: "release scratch/scratch-1@replica-2 nomad-device-zfs; destroy scratch/scratch-1@replica-2; destroy scratch/scratch-1#replica-1; destroy scratch/scratch-1#replica-2; rollback scratch/scratch-1@pristine; set scratch/scratch-1 {generation,holder_index,since,state}; inherit scratch/scratch-1 holder",
			end:  "scratch owned files=[]\nscratch/scratch-1 state=ready holder_index=10 generation=2 owned files=[]\nscratch/scratch-1@pristine ",
			crashes: []string{
				"release scratch/scratch-1@replica-2 nomad-device-zfs; destroy scratch/scratch-1@replica-2; destroy scratch/scratch-1#replica-1; destroy scratch/scratch-1#replica-2; rollback scratch/scratch-1@pristine; set scratch/scratch-1 {generation,holder_index,since,state}; inherit scratch/scratch-1 holder",
				"destroy scratch/scratch-1#replica-1; destroy scratch/scratch-1#replica-2; rollback scratch/scratch-1@pristine; set scratch/scratch-1 {generation,holder_index,since,state}; inherit scratch/scratch-1 holder",
				"destroy scratch/scratch-1#replica-2; rollback scratch/scratch-1@pristine; set scratch/scratch-1 {generation,holder_index,since,state}; inherit scratch/scratch-1 holder",
				"rollback scratch/scratch-1@pristine; set scratch/scratch-1 {generation,holder_index,since,state}; inherit scratch/scratch-1 holder",
				"rollback scratch/scratch-1@pristine; set scratch/scratch-1 {generation,holder_index,since,state}; inherit scratch/scratch-1 holder",
				"inherit scratch/scratch-1 holder",
			},
			setup: func(t *testing.T) *world {
				return endOf(withReplicaBases(heldBy(rollback, a))(t), ended(a, "complete"))
			},
			after: endsThen(ended(a, "complete")),
		},
		{
			name: "snapshot: the replica snapshot and bookmarks dropped before the rename",
			plan: "set scratch/scratch-1 {holder,holder_index,outcome,since,state}; set scratch/scratch-1 {expires,retain_as}; release scratch/scratch-1@replica-2 nomad-device-zfs; destroy scratch/scratch-1@replica-2; destroy scratch/scratch-1#replica-1; destroy scratch/scratch-1#replica-2; snapshot scratch/scratch-1@retained; hold scratch/scratch-1@retained nomad-device-zfs; rename scratch/scratch-1 scratch/retained-A; create scratch/scratch-1 {generation,holder_index,owner,since,state}; set scratch/retained-A {owner,since,state}",
			end:  "scratch owned files=[]\nscratch/retained-A state=retained holder=A holder_index=10 outcome=complete generation=1 retain_as=scratch/retained-A owned files=[data:A]\nscratch/retained-A@retained  hold=nomad-device-zfs\nscratch/scratch-1 state=ready holder_index=10 generation=2 owned files=[]",
			crashes: []string{
				"set scratch/scratch-1 {expires,retain_as}; release scratch/scratch-1@replica-2 nomad-device-zfs; destroy scratch/scratch-1@replica-2; destroy scratch/scratch-1#replica-1; destroy scratch/scratch-1#replica-2; snapshot scratch/scratch-1@retained; hold scratch/scratch-1@retained nomad-device-zfs; rename scratch/scratch-1 scratch/retained-A; create scratch/scratch-1 {generation,holder_index,owner,since,state}; set scratch/retained-A {owner,since,state}",
				"set scratch/scratch-1 {expires,retain_as}; release scratch/scratch-1@replica-2 nomad-device-zfs; destroy scratch/scratch-1@replica-2; destroy scratch/scratch-1#replica-1; destroy scratch/scratch-1#replica-2; snapshot scratch/scratch-1@retained; hold scratch/scratch-1@retained nomad-device-zfs; rename scratch/scratch-1 scratch/retained-A; create scratch/scratch-1 {generation,holder_index,owner,since,state}; set scratch/retained-A {owner,since,state}",
				"set scratch/scratch-1 {expires,retain_as}; release scratch/scratch-1@replica-2 nomad-device-zfs; destroy scratch/scratch-1@replica-2; destroy scratch/scratch-1#replica-1; destroy scratch/scratch-1#replica-2; snapshot scratch/scratch-1@retained; hold scratch/scratch-1@retained nomad-device-zfs; rename scratch/scratch-1 scratch/retained-A; create scratch/scratch-1 {generation,holder_index,owner,since,state}; set scratch/retained-A {owner,since,state}",
				"set scratch/scratch-1 {expires,retain_as}; destroy scratch/scratch-1#replica-1; destroy scratch/scratch-1#replica-2; snapshot scratch/scratch-1@retained; hold scratch/scratch-1@retained nomad-device-zfs; rename scratch/scratch-1 scratch/retained-A; create scratch/scratch-1 {generation,holder_index,owner,since,state}; set scratch/retained-A {owner,since,state}",
				"set scratch/scratch-1 {expires,retain_as}; destroy scratch/scratch-1#replica-2; snapshot scratch/scratch-1@retained; hold scratch/scratch-1@retained nomad-device-zfs; rename scratch/scratch-1 scratch/retained-A; create scratch/scratch-1 {generation,holder_index,owner,since,state}; set scratch/retained-A {owner,since,state}",
				"set scratch/scratch-1 {expires,retain_as}; snapshot scratch/scratch-1@retained; hold scratch/scratch-1@retained nomad-device-zfs; rename scratch/scratch-1 scratch/retained-A; create scratch/scratch-1 {generation,holder_index,owner,since,state}; set scratch/retained-A {owner,since,state}",
				"set scratch/scratch-1 {expires,retain_as}; snapshot scratch/scratch-1@retained; hold scratch/scratch-1@retained nomad-device-zfs; rename scratch/scratch-1 scratch/retained-A; create scratch/scratch-1 {generation,holder_index,owner,since,state}; set scratch/retained-A {owner,since,state}",
				"set scratch/scratch-1 {expires,retain_as}; snapshot scratch/scratch-1@retained; hold scratch/scratch-1@retained nomad-device-zfs; rename scratch/scratch-1 scratch/retained-A; create scratch/scratch-1 {generation,holder_index,owner,since,state}; set scratch/retained-A {owner,since,state}",
				"create scratch/scratch-1 {generation,holder_index,owner,since,state}\nset scratch/retained-A {owner,since,state}",
				"set scratch/retained-A {owner,since,state}",
			},
			setup: func(t *testing.T) *world { return endOf(withReplicaBases(heldBy(keep, a))(t), ended(a, "complete")) },
			after: endsThen(ended(a, "complete")),
		},
		{
			name: "sticky: parked without the replica snapshot and bookmarks",
			plan: "set pg/pg-1 {holder,holder_index,outcome,retain_as,since,state}; release pg/pg-1@replica-2 nomad-device-zfs; destroy pg/pg-1@replica-2; destroy pg/pg-1#replica-1; destroy pg/pg-1#replica-2; rename pg/pg-1 pg/parked-A-pg-1; create pg/pg-1 {generation,holder_index,owner,since,state}; set pg/parked-A-pg-1 {expires,owner,since,state}",
			end:  "pg owned files=[]\npg/parked-A-pg-1 state=parked holder=A holder_index=10 outcome=complete generation=1 retain_as=pg/parked-A-pg-1 owned files=[data:A]\npg/pg-1 state=ready holder_index=10 generation=2 owned files=[]\npg/pg-2 state=ready generation=1 owned files=[]",
			crashes: []string{
				"set pg/pg-1 {retain_as}; release pg/pg-1@replica-2 nomad-device-zfs; destroy pg/pg-1@replica-2; destroy pg/pg-1#replica-1; destroy pg/pg-1#replica-2; rename pg/pg-1 pg/parked-A-pg-1; create pg/pg-1 {generation,holder_index,owner,since,state}; set pg/parked-A-pg-1 {expires,owner,since,state}",
				"set pg/pg-1 {retain_as}; release pg/pg-1@replica-2 nomad-device-zfs; destroy pg/pg-1@replica-2; destroy pg/pg-1#replica-1; destroy pg/pg-1#replica-2; rename pg/pg-1 pg/parked-A-pg-1; create pg/pg-1 {generation,holder_index,owner,since,state}; set pg/parked-A-pg-1 {expires,owner,since,state}",
				"set pg/pg-1 {retain_as}; destroy pg/pg-1#replica-1; destroy pg/pg-1#replica-2; rename pg/pg-1 pg/parked-A-pg-1; create pg/pg-1 {generation,holder_index,owner,since,state}; set pg/parked-A-pg-1 {expires,owner,since,state}",
				"set pg/pg-1 {retain_as}; destroy pg/pg-1#replica-2; rename pg/pg-1 pg/parked-A-pg-1; create pg/pg-1 {generation,holder_index,owner,since,state}; set pg/parked-A-pg-1 {expires,owner,since,state}",
				"set pg/pg-1 {retain_as}; rename pg/pg-1 pg/parked-A-pg-1; create pg/pg-1 {generation,holder_index,owner,since,state}; set pg/parked-A-pg-1 {expires,owner,since,state}",
				"create pg/pg-1 {generation,holder_index,owner,since,state}\nset pg/parked-A-pg-1 {expires,owner,since,state}",
				"set pg/parked-A-pg-1 {expires,owner,since,state}",
			},
			setup: func(t *testing.T) *world { return endOf(withReplicaBases(heldBy(sticky, pgA))(t), replaced...) },
			after: endsThen(replaced...),
		},
		{
			name: "an orphan with replica bases is destroyed",
			plan: "release scratch/scratch-2@replica-2 nomad-device-zfs; destroy scratch/scratch-2@replica-2; destroy scratch/scratch-2",
			end:  "scratch owned files=[]\nscratch/scratch-1 state=ready generation=1 owned files=[]",
			crashes: []string{
				"release scratch/scratch-2@replica-2 nomad-device-zfs; destroy scratch/scratch-2@replica-2; destroy scratch/scratch-2",
				"destroy scratch/scratch-2",
			},
			setup: func(t *testing.T) *world {
				w := withReplicaBases(heldBy(twoSlots(destroy), a2))(t)
				w.cfg.Classes[0].Slots = 1
				return endOf(w, ended(a2, "complete"))
			},
			after: endsThen(ended(a2, "complete")),
		},
		{
			name: "golden clone",
			plan: "destroy scratch/scratch-1; clone scratch/scratch-1 tank/golden@seed {generation,holder_index,owner,since,state}",
			end:  "scratch owned files=[]\nscratch/scratch-1 state=ready holder_index=10 generation=2 owned files=[seed:golden]",
			crashes: []string{
				"clone scratch/scratch-1 tank/golden@seed {generation,owner,since,state}",
			},
			setup: func(t *testing.T) *world { return endOf(heldBy(golden, a)(t), ended(a, "complete")) },
			after: endsThen(ended(a, "complete")),
		},
	}
}

// TestRetainedNameTaken: an allocation holding two slots of a class that
// keeps its data ends; the second slot's rename finds the holder's name
// taken by the first's data, and the plan made again with that name seen
// keeps the second beside it under a name of its own, without taking the
// snapshot again. (Finding 6 of docs/lifecycle.md.)
func TestRetainedNameTaken(t *testing.T) {
	keep := model.Class{Name: "scratch", Slots: 2, Release: model.Release{Policy: model.PolicySnapshot, Retain: time.Hour}}
	a := alloc("A", 10, "running", "run", "scratch", "scratch-1", "scratch-2")
	w := heldBy(keep, a)(t)
	w.snap = snapshot(ended(a, "failed"))
	steps := w.steps()
	if len(steps) != 2 {
		t.Fatalf("the pass planned %d steps, want the two releases:\n%s", len(steps), showAll(w.pass()))
	}
	w.carryOut(steps[0])

	seen := model.Seen{}
	if _, err := w.apply(steps[1].plan, -1, seen); !errors.Is(err, errAgain) {
		t.Fatalf("the second release: %v, want it to ask to plan again", err)
	}
	if !seen.Taken(parent + "/scratch/retained-A") {
		t.Fatalf("seen %v, want the taken name", seen)
	}
	again := steps[1].again(seen)
	const want = "set scratch/scratch-2 {expires,retain_as}; rename scratch/scratch-2 scratch/retained-A-scratch-2-1800000002; " +
		"create scratch/scratch-2 {generation,holder_index,owner,since,state}; set scratch/retained-A-scratch-2-1800000002 {owner,since,state}"
	if got := show(again); got != want {
		t.Errorf("the plan made again:\n got %s\nwant %s", got, want)
	}
	if _, err := w.apply(again, -1, seen); err != nil {
		t.Fatal(err)
	}
	w.settle(w.snap, 5)
	const end = "scratch owned files=[]\n" +
		"scratch/retained-A state=retained holder=A holder_index=10 outcome=failed generation=1 retain_as=scratch/retained-A owned files=[data:A]\n" +
		"scratch/retained-A@retained  hold=nomad-device-zfs\n" +
		"scratch/retained-A-scratch-2-1800000002 state=retained holder=A holder_index=10 outcome=failed generation=1 retain_as=scratch/retained-A-scratch-2-1800000002 owned files=[data:A]\n" +
		"scratch/retained-A-scratch-2-1800000002@retained  hold=nomad-device-zfs\n" +
		"scratch/scratch-1 state=ready holder_index=10 generation=2 owned files=[]\n" +
		"scratch/scratch-2 state=ready holder_index=10 generation=2 owned files=[]"
	if got := w.state(); got != end {
		t.Errorf("end:\n got %s\nwant %s", indent(got), indent(end))
	}
}

// TestParkedAgainAfterTheHolderRanAgain: seed 902768 of the simulation. A's
// data was parked for B; the servers' state was then restored from before
// B, so A ran again on the fresh pg-1 the park had left, and was replaced
// by C. C's Reserve waits for A's newer data in pg-1 instead of claiming
// the older parked data, and the park of pg-1 for C destroys the older
// parked data under the name first: C gets A's last life's data.
func TestParkedAgainAfterTheHolderRanAgain(t *testing.T) {
	sticky := model.Class{Name: "pg", Slots: 2, Sticky: true, StickyWait: time.Hour}
	a := alloc("A", 10, "running", "run", "pg", "pg-1")
	b := alloc("B", 20, "pending", "run", "pg", "pg-2")
	a.NextAllocation, b.PreviousAllocation = "B", "A"
	stopped := ended(a, "complete")
	stopped.DesiredStatus = "stop"
	w := heldBy(sticky, a)(t)
	w.settle(snapshot(stopped, b), 5)

	// The servers' state restored from before B: A runs again, on the
	// fresh pg-1, and writes its second life's data.
	again := alloc("A", 10, "running", "run", "pg", "pg-1")
	w.settle(snapshot(again), 5)
	w.write(w.cfg.SlotDataset("pg", "pg-1"), "data", "A again")
	replaced := ended(again, "failed")
	c := alloc("C", 30, "pending", "run", "pg", "pg-2")
	replaced.NextAllocation, c.PreviousAllocation = "C", "A"

	inherit := func() model.InheritKind {
		parked := w.view().Classes[0].Parked
		if len(parked) != 1 {
			t.Fatalf("want A's parked data, have %+v", parked)
		}
		prevSlot := w.slot("pg", "pg-1")
		d := model.DecideInherit(model.InheritInput{Class: sticky, Slot: w.slot("pg", "pg-2"), Caller: c, Prev: replaced,
			PrevSlot: &prevSlot, Parked: &parked[0]})
		return d.Kind
	}
	if got := inherit(); got != model.InheritWait {
		t.Fatalf("C's Reserve while A's newer data is in pg-1: %v, want it to wait", got)
	}
	w.settle(snapshot(replaced, c), 5)
	const end = "pg owned files=[]\n" +
		"pg/parked-A-pg-1 state=parked holder=A holder_index=10 outcome=failed generation=2 retain_as=pg/parked-A-pg-1 owned files=[data:A again]\n" +
		"pg/pg-1 state=ready holder_index=10 generation=3 owned files=[]\n" +
		"pg/pg-2 state=ready generation=1 owned files=[]"
	if got := w.state(); got != end {
		t.Errorf("after the park for C:\n got %s\nwant %s", indent(got), indent(end))
	}
	if got := inherit(); got != model.InheritClaim {
		t.Errorf("C's Reserve once pg-1 is parked: %v, want the claim", got)
	}
}

// TestRecordOfAnOlderAllocationKeepsTheIndex: a slot's holder_index only
// grows within one history. B, placed after A to replace it, ended before
// A started, on a ready slot: a pass takes it for an unrecorded holder and
// parks the slot as B's, writing B's index. A pass then records A (placed
// before B, still pending) on the fresh slot. Had the record written A's
// lower index, B would look newer than the slot's last holder once A
// ended, and the next pass would release the fresh, empty slot for B over
// B's parked data (seed 7740037 of the two-node world: the parked data
// destroyed as "older", an empty slot renamed into its place).
func TestRecordOfAnOlderAllocationKeepsTheIndex(t *testing.T) {
	sticky := model.Class{Name: "pg", Slots: 1, Sticky: true, StickyWait: time.Hour}
	a := alloc("A", 18, "pending", "stop", "pg", "pg-1")
	b := ended(alloc("B", 21, "pending", "run", "pg", "pg-1"), "complete")
	a.NextAllocation, b.PreviousAllocation = "B", "A"
	b.NextAllocation = "C" // placed on another node
	w := newWorld(t, sticky)
	w.settle(snapshot(b), 5)
	w.write(w.cfg.ParkedName("pg", "B", "pg-1"), "data", "B's")
	w.settle(snapshot(a, b), 5)
	if got := w.slot("pg", "pg-1"); got.Holder != "A" || got.HolderIndex != 21 {
		t.Fatalf("A recorded on the fresh slot: holder %q index %d, want A at B's 21", got.Holder, got.HolderIndex)
	}
	w.settle(snapshot(ended(a, "complete"), b), 5)
	const end = "pg owned files=[]\n" +
		"pg/parked-B-pg-1 state=parked holder=B holder_index=21 outcome=complete generation=1 retain_as=pg/parked-B-pg-1 owned files=[data:B's]\n" +
		"pg/pg-1 state=ready holder_index=21 generation=3 owned files=[]"
	if got := w.state(); got != end {
		t.Errorf("after A's end: B's parked data kept, the fresh slot ready:\n got %s\nwant %s", indent(got), indent(end))
	}
}

// withReplicaBases is setup's world after two replica pulls of each held
// slot, as the holder answers them (DecideReplicaSend and its plans): the
// slot keeps @replica-2, marked and held, and the bookmarks #replica-1 and
// #replica-2.
func withReplicaBases(setup func(t *testing.T) *world) func(t *testing.T) *world {
	return func(t *testing.T) *world {
		w := setup(t)
		for _, cv := range w.view().Classes {
			for _, s := range cv.Slots {
				if s.State != model.StateHeld {
					continue
				}
				have := uint64(0)
				for range 2 {
					have = w.replicaPull(s.Dataset, have)
				}
			}
		}
		return w
	}
}

// replicaPull answers one replica pull of dataset from a receiver holding
// the snapshot of guid have, as the holder does, and returns the guid of
// the snapshot sent (the receiver's newest once received).
func (w *world) replicaPull(dataset string, have uint64) uint64 {
	w.t.Helper()
	rows, err := w.c.List(w.t.Context(), dataset, model.UserProps)
	must(w.t, err)
	marks, err := w.c.Bookmarks(w.t.Context(), dataset)
	must(w.t, err)
	rs, err := model.DecideReplicaSend(model.ReplicaSendInput{Dataset: dataset, Rows: rows, Bookmarks: marks, HaveGUID: have})
	must(w.t, err)
	if rs.Take != "" || rs.TakeBookmark != "" {
		if _, err := w.apply(model.PlanTakeReplicaSnapshot(rs), -1, model.Seen{}); err != nil {
			w.t.Fatal(err)
		}
	}
	if _, err := w.apply(model.PlanDropReplicaBases(rs.DropSnapshots, rs.DropBookmarks), -1, model.Seen{}); err != nil {
		w.t.Fatal(err)
	}
	after, err := w.c.List(w.t.Context(), dataset, model.UserProps)
	must(w.t, err)
	for _, r := range after {
		if r.Name == rs.Snapshot {
			g, err := strconv.ParseUint(r.GUID, 10, 64)
			must(w.t, err)
			return g
		}
	}
	w.t.Fatalf("%s: not there after the pull", rs.Snapshot)
	return 0
}
