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
// or take one transfer.
func ReplicasIn(classDS string, rows []zfs.Dataset) []Replica {
	var out []Replica
	for i := range rows {
		d := &rows[i]
		if path.Dir(d.Name) != classDS || d.IsSnapshot() || d.IsBookmark() {
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
	slices.SortFunc(out, func(a, b Replica) int { return strings.Compare(a.Dataset, b.Dataset) })
	return out
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
	// ReplicaPullList, ReplicaPullToken, ReplicaPullFetch: the replica
	// listed (volumes too), a partial receive's token read, the holder's
	// node asked.
	ReplicaPullList Phase = iota + 300
	ReplicaPullToken
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
}

// After is the loop once last has been done.
func (p ReplicaPullLoop) After(last Result) ReplicaPullLoop {
	p.Last = last
	return p
}

// DecideReplicaPullMove is one round of a replica, under its lock: one
// increment pulled (MoveDone), or a failure the next round tries again
// (MoveFail with Err), or a refusal (MoveFail, Refused: not pulled again).
// Its rules, which pull_move's are:
//
//   - the replica's name holds the plugin's replica of the target's
//     allocation, or nothing: anything else there is refused, never
//     received into nor destroyed;
//   - the increment is from the replica's newest @replica-<n>; a partial
//     receive is resumed from its token; a token the holder refuses is
//     discarded, and the next round starts from the newest snapshot;
//   - every receive sets ReplicaProps (-o) and takes none of the plugin's
//     own properties nor readonly from the stream (-x, ReceiveExclude);
//     the transport adds the host's (transfer.HostProps);
//   - a replica that is not one filesystem after a receive is refused (a
//     volume dropped, datasets below left to the operator), as a copy is;
//   - a replica that no longer lines up with the holder's data is dropped
//     whole, and the next round pulls it whole;
//   - once an increment is in, the older snapshots go: only the newest is
//     a base (the holder keeps its bookmark).
func DecideReplicaPullMove(p ReplicaPullLoop) Move {
	last, name := p.Last, p.Target.Name
	switch last.Step.Phase {
	case 0:
		return p.move(Move{Kind: MoveList, Phase: ReplicaPullList})
	case ReplicaPullList:
		if last.Err != nil && !errors.Is(last.Err, zfs.ErrNotExist) {
			return Move{Kind: MoveFail, Err: last.Err}
		}
		rows := last.Rows
		if why := p.notOurs(rows); why != "" {
			return Move{Kind: MoveFail, Refused: true, Reason: why}
		}
		if p.Drop {
			if len(rows) == 0 {
				return Move{Kind: MoveDone}
			}
			plan := PlanDropCopy(name, rows)
			return p.move(Move{Kind: MoveRun, Act: ActPlan, Phase: ReplicaPullDrop, Plan: &plan})
		}
		if mv, refused := p.refuseShape(rows); refused {
			return mv
		}
		if len(rows) == 0 {
			return p.fetch(nil, "")
		}
		return p.move(Move{Kind: MoveToken, Phase: ReplicaPullToken, Rows: rows})
	case ReplicaPullToken:
		if last.Err != nil {
			return Move{Kind: MoveFail, Err: last.Err}
		}
		return p.fetch(last.Step.Rows, last.Token)
	case ReplicaPullFetch:
		return p.fetched()
	case ReplicaPullRelist:
		if last.Err != nil {
			return Move{Kind: MoveFail, Err: last.Err}
		}
		if mv, refused := p.refuseShape(last.Rows); refused {
			return mv
		}
		if older := OlderReplicas(name, last.Rows); len(older) > 0 {
			plan := PlanDropSnapshots(older)
			return p.move(Move{Kind: MoveRun, Act: ActPlan, Phase: ReplicaPullDropOlder, Plan: &plan})
		}
		return Move{Kind: MoveDone}
	case ReplicaPullDropOlder, ReplicaPullDrop:
		if last.Err != nil {
			return Move{Kind: MoveFail, Err: last.Err}
		}
		return Move{Kind: MoveDone}
	case ReplicaPullAbort, ReplicaPullStartOver:
		if last.Err != nil {
			return Move{Kind: MoveFail, Err: last.Err}
		}
		return Move{Kind: MoveFail, Err: last.Step.Retry}
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

// notOurs says why the dataset at the replica's name is not the plugin's
// replica of the target's allocation ("" when it is, or when there is
// none).
func (p ReplicaPullLoop) notOurs(rows []zfs.Dataset) string {
	for i := range rows {
		d := &rows[i]
		if d.Name != p.Target.Name {
			continue
		}
		switch {
		case !Owned(d):
			return d.Name + " is not the plugin's: neither received into nor destroyed"
		case State(d.User.Get(PropState)) != StateReplica || d.User.Get(PropHolder) != p.Target.Source.ID:
			return fmt.Sprintf("%s is the plugin's but not a replica of allocation %s (state %q, holder %q)",
				d.Name, p.Target.Source.ID, d.User.Get(PropState), d.User.Get(PropHolder))
		}
	}
	return ""
}

// move fills in what every step names: the replica, listed with volumes.
func (p ReplicaPullLoop) move(mv Move) Move {
	mv.Dataset, mv.Volumes, mv.Class = p.Target.Name, true, p.Class
	return mv
}

// fetch asks the holder's node for the increment from the replica's
// newest snapshot (rows), resuming token if any.
func (p ReplicaPullLoop) fetch(rows []zfs.Dataset, token string) Move {
	t := p.Target
	props := ReplicaProps(p.Class, t.Name, t.Source, t.Slot, p.Now)
	f := Fetch{Replica: true, Alloc: t.Source.ID, Slot: t.Slot, HaveGUID: NewestReplica(t.Name, rows), ResumeToken: token,
		Target: t.Name, Props: props, Exclude: ReceiveExclude(props), At: p.Now}
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
	case errors.Is(err, ErrResumeRefused):
		plan := PlanAbortReceive(p.Target.Name)
		return p.move(Move{Kind: MoveRun, Act: ActPlan, Phase: ReplicaPullAbort, Plan: &plan, Retry: err})
	case errors.Is(err, ErrStartOver):
		return p.move(Move{Kind: MoveList, Phase: ReplicaPullRecount, Retry: err})
	}
	return Move{Kind: MoveFail, Err: err}
}

// refuseShape refuses the replica when it is not one filesystem
// (CopyNotOneFilesystem): a volume, the plugin's by its receive, dropped
// first; datasets below left for the operator.
func (p ReplicaPullLoop) refuseShape(rows []zfs.Dataset) (Move, bool) {
	why, drop := CopyNotOneFilesystem(p.Target.Name, rows)
	switch {
	case why == "":
		return Move{}, false
	case drop:
		plan := PlanDropCopy(p.Target.Name, rows)
		return p.move(Move{Kind: MoveRun, Act: ActPlan, Phase: ReplicaPullDropRefused, Plan: &plan, Reason: why}), true
	}
	return Move{Kind: MoveFail, Refused: true, Reason: why}, true
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
