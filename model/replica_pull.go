package model

import (
	"errors"
	"fmt"
	"path"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/nomad-device-zfs/nomad-device-zfs/zfs"
)

// The replica node's side (issue 30): each round, the node finds the
// allocations of other nodes that hold slots of its classes that keep
// replicas and for which it is among ReplicaNodes (ReplicaTargets), decides
// each replica's fate (ReplicaWork: DecideReplica), and pulls each due
// replica once on the driver (DecideReplicaPullMove): the migration's
// receive rules (ReplicaProps set by the receiver, the plugin's own and
// the host's properties never taken from the stream, a volume or
// datasets below refused), resumed from a partial receive's token.

// ReplicaTarget is one replica this node is to keep now: allocation
// Source's slot Slot of class Class, on Source's node, kept as Name.
type ReplicaTarget struct {
	Class, Slot, Name string
	Source            Alloc
}

// ReplicaTargets are the replicas self is to keep: for each allocation of
// another node that runs (allocs: desired run, pending or running) and
// holds slots of a class of c that keeps replicas, each slot for which
// self is among ReplicaNodes over nodes[class] (the node list as that
// class reads it). Sorted by Name.
func ReplicaTargets(c *Config, self string, allocs []Alloc, nodes map[string][]ReplicaNode) []ReplicaTarget {
	var out []ReplicaTarget
	for _, a := range allocs {
		if a.NodeID == self || a.NodeID == "" || !replicaLive(a) {
			continue
		}
		for _, d := range a.Devices {
			cl := c.Class(d.Name)
			if d.Vendor != Vendor || d.Type != DeviceType || !c.HasClass(d.Name) || !cl.Replicate.Enabled() {
				continue
			}
			if !IsReplicaNode(self, a.ID, a.NodeID, cl.Replicate.Copies, nodes[cl.Name]) {
				continue
			}
			for _, id := range d.IDs {
				if _, ok := SlotNumber(cl.Name, id); !ok {
					continue
				}
				t := ReplicaTarget{Class: cl.Name, Slot: id, Name: c.ReplicaName(cl.Name, a.ID, id), Source: a}
				if !slices.ContainsFunc(out, func(o ReplicaTarget) bool { return o.Name == t.Name }) {
					out = append(out, t)
				}
			}
		}
	}
	slices.SortFunc(out, func(a, b ReplicaTarget) int { return strings.Compare(a.Name, b.Name) })
	return out
}

// replicaLive: a's holder serves a pull (transfer.DecideReplica's own
// rule): desired run, client pending or running.
func replicaLive(a Alloc) bool {
	return a.DesiredStatus == DesiredRun && (a.ClientStatus == ClientPending || a.ClientStatus == ClientRunning)
}

// ReplicasIn reads the replicas of class dataset classDS back from one
// listing of it (rows, `zfs list -r` with UserProps): as replicaFromRows,
// and NewestAt, when this node last received an increment of it (the
// `since` mark each receive sets, ReplicaProps): the holder takes the
// snapshot as it answers the pull, so this is the snapshot's time, give
// or take one transfer. A whole copy received beside a replica
// (ReplicaBeside) is that replica's, not one of its own: its round swaps
// or drops it; one whose replica a crash left gone stands for it, with no
// snapshot yet.
func ReplicasIn(classDS string, rows []zfs.Dataset) []Replica {
	var out []Replica
	var besides []Replica
	for i := range rows {
		d := &rows[i]
		if path.Dir(d.Name) != classDS || d.IsSnapshot() || d.IsBookmark() {
			continue
		}
		if main, beside := strings.CutSuffix(d.Name, besideSuffix); beside {
			if besideOurs(main, d) && d.User.Get(PropHolder) != "" {
				besides = append(besides, Replica{Dataset: main, Source: d.User.Get(PropHolder), Info: *d,
					Slot: strings.TrimPrefix(path.Base(main), replicaPrefix+d.User.Get(PropHolder)+"-")})
			}
			continue
		}
		var below []*zfs.Dataset
		for j := range rows {
			if strings.HasPrefix(rows[j].Name, d.Name+"@") {
				below = append(below, &rows[j])
			}
		}
		r, ok := replicaFromRows(d, below)
		if !ok {
			continue
		}
		if secs, err := strconv.ParseInt(d.User.Get(PropSince), 10, 64); err == nil && r.Newest > 0 {
			r.NewestAt = time.Unix(secs, 0)
		}
		out = append(out, r)
	}
	for _, b := range besides {
		if !slices.ContainsFunc(out, func(r Replica) bool { return r.Dataset == b.Dataset }) {
			out = append(out, b)
		}
	}
	slices.SortFunc(out, func(a, b Replica) int { return strings.Compare(a.Dataset, b.Dataset) })
	return out
}

// besideSuffix ends the name of a whole copy received beside a replica.
const besideSuffix = ".whole"

// ReplicaBeside is where a whole stream for replica name is received
// while the replica is kept (the holder no longer has its base:
// ReplicaSend.StartOver), and its first snapshot, until the round that
// verified it swaps them (PlanSwapReplica).
// The suffix makes no slot's ID (<class>-<n>), so no replica's name.
func ReplicaBeside(name string) string { return name + besideSuffix }

// besideOurs reports whether d, at ReplicaBeside(main), is the plugin's:
// marked for itself, or for main (the swap marks it so before its rename,
// PlanSwapReplica), in state replica.
func besideOurs(main string, d *zfs.Dataset) bool {
	owner := d.User.Get(PropOwner)
	return (owner == d.Name || owner == main) && State(d.User.Get(PropState)) == StateReplica
}

// ReplicaAct is what a round does with one replica (ReplicaWork).
type ReplicaAct struct {
	// Name is the replica's dataset; Target what it is of (for a replica
	// no longer a target, its source as last known).
	Name   string
	Target ReplicaTarget
	ReplicaDecision
}

// ReplicaRound is what ReplicaWork decides on.
type ReplicaRound struct {
	Config *Config
	// Targets are ReplicaTargets; Held the replicas this node keeps
	// (ReplicasIn, every class).
	Targets []ReplicaTarget
	Held    []Replica
	// Sources are the allocations of held replicas that are no target,
	// as the servers answer (found only): a missing one is unknown to
	// Nomad.
	Sources map[string]Alloc
	Now     time.Time
}

// ReplicaWork decides the fate of every replica of a round, by
// DecideReplica: a target is pulled when due (at once when it has no
// snapshot yet); a held replica that is no target is this node's no more,
// or its allocation no longer runs: kept, or dropped. A node no longer
// chosen has no view of the others' replicas yet (the replicas attribute
// is not published): it keeps its copy while the allocation runs. The
// takeover's time is not read yet either: an ended allocation's replica
// is kept sticky_wait from its end. Sorted by Name.
func ReplicaWork(in ReplicaRound) []ReplicaAct {
	held := map[string]Replica{}
	for _, r := range in.Held {
		held[r.Dataset] = r
	}
	var out []ReplicaAct
	for _, t := range in.Targets {
		r, ok := held[t.Name]
		if !ok {
			r = Replica{Dataset: t.Name, Source: t.Source.ID, Slot: t.Slot}
		}
		delete(held, t.Name)
		cl := in.Config.Class(t.Class)
		d := DecideReplica(r, ReplicaInput{Replica: cl.Replicate, StickyWait: cl.StickyWait, Source: t.Source, Found: true,
			Chosen: true, Now: in.Now})
		out = append(out, ReplicaAct{Name: t.Name, Target: t, ReplicaDecision: d})
	}
	for name, r := range held {
		cl := in.Config.Class(path.Base(path.Dir(name)))
		src, found := in.Sources[r.Source]
		d := DecideReplica(r, ReplicaInput{Replica: cl.Replicate, StickyWait: cl.StickyWait, Source: src, Found: found, Now: in.Now})
		t := ReplicaTarget{Class: cl.Name, Slot: r.Slot, Name: name, Source: src}
		if !found {
			t.Source = Alloc{ID: r.Source}
		}
		out = append(out, ReplicaAct{Name: name, Target: t, ReplicaDecision: d})
	}
	slices.SortFunc(out, func(a, b ReplicaAct) int { return strings.Compare(a.Name, b.Name) })
	return out
}

// A replica pull's phases.
const (
	// ReplicaPullList, ReplicaPullFetch: the replica listed (volumes too,
	// and a partial receive's token), the holder's node asked.
	ReplicaPullList Phase = iota + 300
	ReplicaPullFetch
	// ReplicaPullRelist, ReplicaPullDropOlder: after an increment, the
	// replica as it is now, and its older snapshots dropped: the next
	// increment needs only the newest as its base.
	ReplicaPullRelist
	ReplicaPullDropOlder
	// ReplicaPullAbort: a resume refused; the partial receive discarded.
	ReplicaPullAbort
	// ReplicaPullRecount, ReplicaPullStartOver: the replica no longer
	// lines up with the holder's data; listed again and dropped, so the
	// next round pulls it whole.
	ReplicaPullRecount
	ReplicaPullStartOver
	// ReplicaPullDropRefused: a replica refused whole (a volume) dropped.
	ReplicaPullDropRefused
	// ReplicaPullDrop: a replica DecideReplica drops, destroyed.
	ReplicaPullDrop
	// ReplicaPullListBeside, ReplicaPullRelistBeside: the whole copy
	// beside the replica listed, before the fetch and after it.
	ReplicaPullListBeside
	ReplicaPullRelistBeside
	// ReplicaPullSwap: the whole copy beside, complete, put in the
	// replica's place.
	ReplicaPullSwap
	// ReplicaPullRebase, ReplicaPullRollback: an increment that came
	// unverified, or found the replica changed here; the replica listed
	// again, then rolled back to its base (what came after it dropped),
	// and kept: the next round asks for the increment again.
	ReplicaPullRebase
	ReplicaPullRollback
	// ReplicaPullDiscard: a complete copy beside the replica that no
	// check of this round verified (a crash came between its receive and
	// the check), or a first receive into the replica's own name,
	// dropped; the round goes on from the listing beside.
	ReplicaPullDiscard
	// ReplicaPullUnverified: a fetch's check failed (or its receive met
	// the replica changed); the copy beside listed, and what the fetch
	// received there dropped (ReplicaPullDiscard) before the replica is
	// rebased or started over.
	ReplicaPullUnverified
	// ReplicaPullSwapResumed: a swap an earlier process began (a crash
	// before its rename), done; the round then pulls the increment the
	// holder has since, as any round does.
	ReplicaPullSwapResumed
)

// ReplicaPullLoop is what one replica's round decides its next step from
// (DecideReplicaPullMove).
type ReplicaPullLoop struct {
	Target ReplicaTarget
	Class  Class
	// Drop: the round destroys the replica (DecideReplica's ReplicaDrop)
	// instead of pulling.
	Drop bool
	// Now is the time of the decision: the replica's marks.
	Now  time.Time
	Last Result
	// aborted: this round discarded a refused resume token already (kept
	// by After); a second refusal ends the round.
	aborted bool
}

// After is the loop once last has been done.
func (p ReplicaPullLoop) After(last Result) ReplicaPullLoop {
	p.Last = last
	if last.Step.Phase == ReplicaPullAbort {
		p.aborted = true
	}
	return p
}

// DecideReplicaPullMove is one round of a replica, under its lock: one
// increment pulled (MoveDone), or a failure the next round tries again
// (MoveFail with Err), or a refusal (MoveFail, Refused: not pulled again).
// Its rules, which pull_move's are:
//
//   - the replica's name holds the plugin's replica of the target's
//     allocation, or nothing, and so does the name beside it
//     (ReplicaBeside): anything else there is refused, never received
//     into nor destroyed;
//   - the increment is from the replica's newest @replica-<n>; a partial
//     receive is resumed from its token; a token the holder refuses is
//     discarded, and the round asks again, from the newest snapshot;
//   - a holder that no longer has that base sends the whole, which is
//     received beside the replica (the replica kept meanwhile: the newest
//     there is here), resumed there, and once complete put in its place
//     (PlanSwapReplica); so is a replica's first snapshot (fetch);
//   - the replica's own name only ever holds what a check of the guid
//     passed: a complete copy beside is put in its place only in the
//     round whose fetch verified it (or once its swap began, the copy
//     marked for the replica: only a verified copy is); any other, found
//     by a round's first listing, is discarded, and pulled again
//     (settleBeside), and what a fetch whose check failed received
//     beside is discarded in that round;
//   - every receive sets ReplicaProps (-o) and takes none of the plugin's
//     own properties nor readonly from the stream (-x, ReceiveExclude);
//     the transport adds the host's (transfer.HostProps);
//   - a replica that is not one filesystem after a receive is refused (a
//     volume dropped, datasets below left to the operator), as a copy is;
//   - an increment that came unverified (not the snapshot the holder
//     named), or met the replica changed here, is undone: the replica is
//     rolled back to its base, kept, and the increment asked again (a
//     lie, or one corrupt stream, must not cost a replica while its
//     allocation runs); a replica whose base no longer lines up with the
//     holder's stream (zfs.ErrIncrementalMismatch), or that has no base,
//     is dropped whole, and the next round pulls it whole;
//   - once an increment is in, the older snapshots go: only the newest is
//     a base (the holder keeps its bookmark);
//   - a drop destroys the replica and what is beside it.
func DecideReplicaPullMove(p ReplicaPullLoop) Move {
	last, name, beside := p.Last, p.Target.Name, ReplicaBeside(p.Target.Name)
	switch last.Step.Phase {
	case 0:
		return p.move(Move{Kind: MoveList, Phase: ReplicaPullList})
	case ReplicaPullList, ReplicaPullRelist:
		if last.Err != nil && !errors.Is(last.Err, zfs.ErrNotExist) {
			return Move{Kind: MoveFail, Err: last.Err}
		}
		if why := p.notOurs(last.Rows); why != "" {
			return Move{Kind: MoveFail, Refused: true, Reason: why}
		}
		if mv, refused := p.refuseShape(name, last.Rows); refused && !p.Drop {
			return mv
		}
		next := ReplicaPullListBeside
		if last.Step.Phase == ReplicaPullRelist {
			next = ReplicaPullRelistBeside
		}
		return Move{Kind: MoveList, Phase: next, Dataset: beside, Volumes: true, Class: p.Class, Rows: last.Rows}
	case ReplicaPullListBeside, ReplicaPullRelistBeside:
		if last.Err != nil && !errors.Is(last.Err, zfs.ErrNotExist) {
			return Move{Kind: MoveFail, Err: last.Err}
		}
		rows, brows := last.Step.Rows, last.Rows
		if why := p.notOursBeside(brows); why != "" {
			return Move{Kind: MoveFail, Refused: true, Reason: why}
		}
		switch {
		case p.Drop:
			plan := Plan{Doing: "dropping the replica " + name,
				Ops: slices.Concat(planDropBeside(name, brows).Ops, PlanDropCopy(name, rows).Ops)}
			if len(rows)+len(brows) == 0 {
				return Move{Kind: MoveDone}
			}
			return p.move(Move{Kind: MoveRun, Act: ActPlan, Phase: ReplicaPullDrop, Plan: &plan})
		case len(brows) > 0 && NewestReplica(beside, brows) != 0:
			// Verified only just now: the relisting follows only a fetch
			// that passed its check.
			return p.settleBeside(rows, brows, last.Step.Phase == ReplicaPullRelistBeside)
		case last.Step.Phase == ReplicaPullRelistBeside:
			if older := OlderReplicas(name, rows); len(older) > 0 {
				plan := PlanDropSnapshots(older)
				return p.move(Move{Kind: MoveRun, Act: ActPlan, Phase: ReplicaPullDropOlder, Plan: &plan})
			}
			return Move{Kind: MoveDone}
		case len(brows) > 0 && resumeToken(beside, brows) == "":
			// Complete, yet with no @replica-<n>: a lying holder's
			// stream whose check failed, its discard cut by a crash.
			// Every later receive would meet it there, and the
			// replica would never come again (seed 9765364).
			return p.discardBeside(rows, brows)
		case len(brows) > 0:
			// A whole copy coming beside: resumed from its token, which
			// its listing carries (zfs.Dataset.ResumeToken).
			return p.fetch(rows, resumeToken(beside, brows))
		case len(rows) > 0 && NewestReplica(name, rows) == 0:
			// A first receive into the replica's own name (a plugin
			// before first snapshots went beside): no base to keep.
			return p.discard(name, rows, nil, nil)
		case len(rows) == 0:
			return p.fetch(nil, "")
		}
		return p.fetch(rows, resumeToken(name, rows))
	case ReplicaPullFetch:
		return p.fetched()
	case ReplicaPullDropOlder, ReplicaPullDrop, ReplicaPullSwap:
		if last.Err != nil {
			return Move{Kind: MoveFail, Err: last.Err}
		}
		return Move{Kind: MoveDone}
	case ReplicaPullSwapResumed:
		if last.Err != nil {
			return Move{Kind: MoveFail, Err: last.Err}
		}
		// What was swapped in is as old as the round that received it,
		// before the crash; ended here, the replica would stay that old
		// until the next round (seed 9783720: XR6).
		return p.move(Move{Kind: MoveList, Phase: ReplicaPullList})
	case ReplicaPullRebase:
		if last.Err != nil {
			return Move{Kind: MoveFail, Err: last.Err}
		}
		return p.rebase(last.Step.Rows, last.Rows, last.Step.Retry)
	case ReplicaPullAbort:
		if last.Err != nil {
			return Move{Kind: MoveFail, Err: last.Err}
		}
		// The token went with the partial receive: asked again at once,
		// without it. The next round may come late, and the holder's
		// bases move on meanwhile (seed 9740540: a first stream cut,
		// its token refused, and no replica for another round).
		return p.move(Move{Kind: MoveList, Phase: ReplicaPullList})
	case ReplicaPullStartOver, ReplicaPullRollback:
		if last.Err != nil {
			return Move{Kind: MoveFail, Err: last.Err}
		}
		return Move{Kind: MoveFail, Err: last.Step.Retry}
	case ReplicaPullUnverified:
		if last.Err != nil && !errors.Is(last.Err, zfs.ErrNotExist) {
			return Move{Kind: MoveFail, Err: last.Err}
		}
		if len(last.Rows) > 0 {
			return p.discard(beside, last.Rows, last.Step.Rows, last.Step.Retry)
		}
		return p.startOver(last.Step.Rows, last.Step.Retry)
	case ReplicaPullDiscard:
		if last.Err != nil {
			return Move{Kind: MoveFail, Err: last.Err}
		}
		if last.Step.Retry != nil {
			return p.startOver(last.Step.Rows, last.Step.Retry)
		}
		return Move{Kind: MoveList, Phase: ReplicaPullListBeside, Dataset: beside, Volumes: true, Class: p.Class, Rows: last.Step.Rows}
	case ReplicaPullRecount:
		if last.Err != nil {
			return Move{Kind: MoveFail, Err: last.Err}
		}
		plan := PlanDropCopy(name, last.Rows)
		return p.move(Move{Kind: MoveRun, Act: ActPlan, Phase: ReplicaPullStartOver, Plan: &plan, Retry: last.Step.Retry})
	case ReplicaPullDropRefused:
		if last.Err != nil {
			return Move{Kind: MoveFail, Err: fmt.Errorf("%s; dropping it: %w", last.Step.Reason, last.Err)}
		}
		return Move{Kind: MoveFail, Refused: true, Reason: last.Step.Reason}
	}
	return Move{Kind: MoveFail, Err: fmt.Errorf("replica pull: no move after %s", last.Step.Kind)}
}

// planDropBeside drops the copy beside replica name (brows): the
// plugin's marked for itself, or for the replica once its swap began
// (besideOurs), which PlanDropCopy alone would leave: a crash before the
// swap's rename, then the replica's drop, kept it for good (seed
// 9740435).
func planDropBeside(name string, brows []zfs.Dataset) Plan {
	return dropCopy(ReplicaBeside(name), brows, func(d *zfs.Dataset) bool { return besideOurs(name, d) })
}

// notOurs says why the dataset at the replica's name is not the plugin's
// replica of the target's allocation ("" when it is, or when there is
// none).
func (p ReplicaPullLoop) notOurs(rows []zfs.Dataset) string {
	for i := range rows {
		if d := &rows[i]; d.Name == p.Target.Name {
			return p.notReplica(d, Owned(d))
		}
	}
	return ""
}

// notOursBeside is notOurs for the whole copy beside the replica.
func (p ReplicaPullLoop) notOursBeside(rows []zfs.Dataset) string {
	for i := range rows {
		if d := &rows[i]; d.Name == ReplicaBeside(p.Target.Name) {
			return p.notReplica(d, besideOurs(p.Target.Name, d) || Owned(d))
		}
	}
	return ""
}

// notReplica says why d, owned or not, is not the plugin's replica of
// the target's allocation.
func (p ReplicaPullLoop) notReplica(d *zfs.Dataset, owned bool) string {
	switch {
	case !owned:
		return d.Name + " is not the plugin's: neither received into nor destroyed"
	case State(d.User.Get(PropState)) != StateReplica || d.User.Get(PropHolder) != p.Target.Source.ID:
		return fmt.Sprintf("%s is the plugin's but not a replica of allocation %s (state %q, holder %q)",
			d.Name, p.Target.Source.ID, d.User.Get(PropState), d.User.Get(PropHolder))
	}
	return ""
}

// move fills in what every step names: the replica, listed with volumes.
func (p ReplicaPullLoop) move(mv Move) Move {
	mv.Dataset, mv.Volumes, mv.Class = p.Target.Name, true, p.Class
	return mv
}

// fetch asks the holder's node for the increment from the replica's
// newest snapshot (rows), resuming token if any (the replica's, or the
// whole copy's beside it); a whole stream goes beside the replica.
//
// So does the replica's first snapshot (no base: Target is the copy
// beside). Received into the replica's own name, a crash between the
// receive and the check of its guid (transfer.Client.Fetch's verify)
// left a lying holder's data standing as the replica, marked as the
// plugin's, for a takeover to claim (seed 9730813). Beside, what a crash
// leaves is no replica: settleBeside discards it. That rule is in one
// place, and the swap is already crash-safe; recording the guid the
// sender named (-o) instead would have every reader of a replica (the
// round, ReplicasIn, the takeover, status) check it.
func (p ReplicaPullLoop) fetch(rows []zfs.Dataset, token string) Move {
	t := p.Target
	have, into, beside := NewestReplica(t.Name, rows), t.Name, ReplicaBeside(t.Name)
	if have == 0 {
		into = beside
	}
	props := ReplicaProps(p.Class, into, t.Source, t.Slot, p.Now)
	besideProps := ReplicaProps(p.Class, beside, t.Source, t.Slot, p.Now)
	f := Fetch{Replica: true, Alloc: t.Source.ID, Slot: t.Slot, HaveGUID: have, ResumeToken: token,
		Target: into, Props: props, Exclude: ReceiveExclude(props), At: p.Now,
		Beside: beside, BesideProps: besideProps, BesideExclude: ReceiveExclude(besideProps)}
	return p.move(Move{Kind: MoveFetch, Phase: ReplicaPullFetch, Fetch: &f, Rows: rows})
}

// fetched decides on the holder's answer.
func (p ReplicaPullLoop) fetched() Move {
	err := p.Last.Err
	switch {
	case err == nil && p.Last.Complete:
		return Move{Kind: MoveFail, Err: errors.New("the holder's node says a replica is complete: a replica never is")}
	case err == nil:
		return p.move(Move{Kind: MoveList, Phase: ReplicaPullRelist})
	case errors.Is(err, ErrNotFilesystem):
		return Move{Kind: MoveFail, Refused: true, Reason: "the holder's stream is not of a filesystem (a volume?): " + err.Error()}
	case errors.Is(err, ErrResumeRefused) && p.aborted:
		return Move{Kind: MoveFail, Err: err}
	case errors.Is(err, ErrResumeRefused):
		// The token was the replica's, or the whole copy's beside it
		// (only one of them is ever partial: a whole stream goes beside
		// only while the replica itself is whole).
		plan := PlanAbortReceive(p.Target.Name)
		plan.Ops = append(plan.Ops, abortReceiveOp(ReplicaBeside(p.Target.Name)))
		return p.move(Move{Kind: MoveRun, Act: ActPlan, Phase: ReplicaPullAbort, Plan: &plan, Retry: err})
	case errors.Is(err, ErrStartOver):
		// What the fetch received beside (a first snapshot, a whole
		// stream), unverified, goes in this round: a replica no longer
		// chosen, or whose allocation ended, has no round to discard it.
		return Move{Kind: MoveList, Phase: ReplicaPullUnverified, Dataset: ReplicaBeside(p.Target.Name), Volumes: true,
			Class: p.Class, Rows: p.Last.Step.Rows, Retry: err}
	}
	return Move{Kind: MoveFail, Err: err}
}

// startOver decides on the replica (before: as listed before the fetch)
// once a fetch that failed its check (why, ErrStartOver) left nothing
// beside it: an increment undone over its base (rebase); a replica that
// had no snapshot kept as it was; one that no longer lines up with the
// holder's stream (zfs.ErrIncrementalMismatch) dropped whole.
func (p ReplicaPullLoop) startOver(before []zfs.Dataset, why error) Move {
	switch have := NewestReplica(p.Target.Name, before); {
	case have != 0 && !errors.Is(why, zfs.ErrIncrementalMismatch):
		return p.move(Move{Kind: MoveList, Phase: ReplicaPullRebase, Rows: before, Retry: why})
	case have == 0:
		return Move{Kind: MoveFail, Err: why}
	}
	return p.move(Move{Kind: MoveList, Phase: ReplicaPullRecount, Retry: why})
}

// rebase undoes what an increment left on the replica (rows, listed after
// it) over its base, the newest @replica-<n> before the fetch (before):
// every other snapshot of the replica dropped, then the replica rolled
// back to the base. Without the base there now, it is dropped whole.
func (p ReplicaPullLoop) rebase(before, rows []zfs.Dataset, why error) Move {
	name := p.Target.Name
	base := strconv.FormatUint(NewestReplica(name, before), 10)
	var baseName string
	var drop []string
	for _, r := range rows {
		if ds, _, ok := strings.Cut(r.Name, "@"); ok && ds == name {
			if r.GUID == base {
				baseName = r.Name
			} else {
				drop = append(drop, r.Name)
			}
		}
	}
	if baseName == "" {
		plan := PlanDropCopy(name, rows)
		return p.move(Move{Kind: MoveRun, Act: ActPlan, Phase: ReplicaPullStartOver, Plan: &plan, Retry: why})
	}
	plan := PlanDropSnapshots(drop)
	plan.Doing = "rolling the replica " + name + " back to " + baseName
	plan.Ops = append(plan.Ops, rollbackOp(baseName))
	return p.move(Move{Kind: MoveRun, Act: ActPlan, Phase: ReplicaPullRollback, Plan: &plan, Retry: why})
}

// refuseShape refuses copy name (the replica, or the whole copy beside
// it), as listed, when it is not one filesystem (CopyNotOneFilesystem): a
// volume, the plugin's by its receive, dropped first; datasets below left
// for the operator.
func (p ReplicaPullLoop) refuseShape(name string, rows []zfs.Dataset) (Move, bool) {
	why, drop := CopyNotOneFilesystem(name, rows)
	switch {
	case why == "":
		return Move{}, false
	case drop:
		plan := PlanDropCopy(name, rows)
		return p.move(Move{Kind: MoveRun, Act: ActPlan, Phase: ReplicaPullDropRefused, Plan: &plan, Reason: why}), true
	}
	return Move{Kind: MoveFail, Refused: true, Reason: why}, true
}

// settleBeside decides on the whole copy beside the replica (brows:
// complete, its newest snapshot in), once it is one filesystem: put in
// the replica's place (rows) when this round's fetch verified it
// (verified), or when its swap began (marked for the replica, which
// PlanSwapReplica does only to a verified copy); else discarded
// unverified, and the round goes on without it. A crash between a
// receive and its check thus never leaves unchecked data in the
// replica's name (fetch).
func (p ReplicaPullLoop) settleBeside(rows, brows []zfs.Dataset, verified bool) Move {
	name, beside := p.Target.Name, ReplicaBeside(p.Target.Name)
	if mv, refused := p.refuseShape(beside, brows); refused {
		return mv
	}
	phase := ReplicaPullSwap
	switch {
	case !verified && !swapBegun(name, brows):
		return p.discard(beside, brows, rows, nil)
	case !verified:
		phase = ReplicaPullSwapResumed
	}
	plan := PlanSwapReplica(name, rows)
	return p.move(Move{Kind: MoveRun, Act: ActPlan, Phase: phase, Plan: &plan})
}

// discardBeside discards the complete copy beside the replica (brows),
// never verified, once it is one filesystem; the round goes on with the
// replica as listed (rows).
func (p ReplicaPullLoop) discardBeside(rows, brows []zfs.Dataset) Move {
	if mv, refused := p.refuseShape(ReplicaBeside(p.Target.Name), brows); refused {
		return mv
	}
	return p.discard(ReplicaBeside(p.Target.Name), brows, rows, nil)
}

// swapBegun reports whether the copy beside replica name (brows) is
// marked for name: PlanSwapReplica's first step.
func swapBegun(name string, brows []zfs.Dataset) bool {
	for i := range brows {
		if brows[i].Name == ReplicaBeside(name) {
			return brows[i].User.Get(PropOwner) == name
		}
	}
	return false
}

// discard drops copy what (as listed: drop), received but never
// verified; then, the round goes on with the replica as listed (rows):
// after a failed check (why), to startOver; else from a new listing of
// the copy beside.
func (p ReplicaPullLoop) discard(what string, drop, rows []zfs.Dataset, why error) Move {
	plan := PlanDropCopy(what, drop)
	if len(plan.Ops) == 0 {
		return Move{Kind: MoveFail, Err: fmt.Errorf("%s, received unverified, is not the plugin's to drop", what)}
	}
	plan.Doing = "discarding " + what + ", received but never verified"
	return p.move(Move{Kind: MoveRun, Act: ActPlan, Phase: ReplicaPullDiscard, Plan: &plan, Rows: rows, Retry: why})
}

// PlanSwapReplica puts the whole copy received beside replica name, once
// verified, in its place: the copy marked for name first (so that a
// crash after the rename leaves it the plugin's, and before it leaves it
// still recognised, besideOurs), the replica as last listed (rows) dropped,
// then the copy renamed. Each step a crash interrupts is done again by
// the next round's swap.
func PlanSwapReplica(name string, rows []zfs.Dataset) Plan {
	beside := ReplicaBeside(name)
	ops := []Op{setOp(beside, map[string]string{PropOwner: name})}
	if len(rows) > 0 {
		ops = append(ops, PlanDropCopy(name, rows).Ops...)
	}
	ops = append(ops, renameOp(beside, name))
	return Plan{Doing: "putting the whole copy " + beside + " in the place of the replica " + name, Ops: ops,
		Done: Note{Msg: "a replica received whole (its first snapshot, or its holder no longer had its base)", KV: []any{"dataset", name}}}
}

// NewestReplica is the guid of replica name's newest @replica-<n> (rows,
// one listing of it), the base of its next increment; 0 for none.
func NewestReplica(name string, rows []zfs.Dataset) uint64 {
	best, guid := 0, uint64(0)
	for _, r := range rows {
		ds, short, ok := strings.Cut(r.Name, "@")
		n, replica := ReplicaNumber(short)
		if !ok || ds != name || !replica || n <= best {
			continue
		}
		if g, err := strconv.ParseUint(r.GUID, 10, 64); err == nil {
			best, guid = n, g
		}
	}
	return guid
}

// OlderReplicas are replica name's @replica-<n> older than its newest.
func OlderReplicas(name string, rows []zfs.Dataset) []string {
	newest := strconv.FormatUint(NewestReplica(name, rows), 10)
	var out []string
	for _, r := range rows {
		ds, short, ok := strings.Cut(r.Name, "@")
		if _, replica := ReplicaNumber(short); ok && ds == name && replica && r.GUID != newest {
			out = append(out, r.Name)
		}
	}
	return out
}
