package model

import (
	"fmt"
	"strconv"
	"time"

	"github.com/nomad-device-zfs/nomad-device-zfs/zfs"
)

// ReleaseInput is what a release of one slot is planned from.
type ReleaseInput struct {
	Config *Config
	Class  Class
	// Slot is the slot as just read, under its lock.
	Slot Slot
	// Holder is the ending holder (its ID at least); Outcome how it ended.
	Holder  Alloc
	Outcome string
	// Snap is this node's allocations and SlotOf the other slots as last
	// read: a sticky class parks only for a replacement that may claim
	// (Class.Parks).
	Snap   *Snapshot
	SlotOf func(id string) (Slot, bool)
	// Seen is what the executor read after a Replan outcome.
	Seen Seen
	Now  time.Time
}

// PlanRelease plans the release of a slot's data by its class's policy,
// leaving a ready slot in its place (none for an orphan); in a sticky class
// it parks the data of a replaced holder instead (planPark).
//
// Every command tolerates having been done already, so a crash between any
// two resumes from the recorded state (releasing, with holder and outcome):
// the plan made from it finishes the release. A release whose first change
// removes the holder's data, a destroy or a rollback whatever the outcome,
// records nothing first (Class.MarksRelease): one zfs process less. A crash
// before that first change leaves the slot held by an ended holder, which
// is released the same way; a crash after a rollback, a pristine slot held
// by an ended holder, released again. Should such a release fail (a busy
// dataset), its OnFail marks it releasing, so the slot shows the release
// under way until a retry gets through.
//
// Nothing is planned for a slot with anything foreign below it
// (CheckRelease): the error says what to do.
func PlanRelease(in ReleaseInput) (Plan, error) {
	s, c := in.Slot, in.Class
	if err := CheckRelease(in.Config, s); err != nil {
		return Plan{}, err // nothing changed; the slot's health says what to do
	}
	holderIndex := ReleaseIndex(s, in.Holder.CreateIndex)
	mark := setOp(s.Dataset, ReleasingProps(in.Holder.ID, holderIndex, in.Outcome, in.Now))
	marked := s.State == StateReleasing
	var p Plan
	if !marked && c.MarksRelease(s) {
		p.Ops = append(p.Ops, mark)
		marked = true
	} else if !marked {
		mark.Done = []error{zfs.ErrNotExist}
		p.OnFail = []Op{mark}
	}
	s.State, s.Holder, s.Outcome = StateReleasing, in.Holder.ID, in.Outcome
	if c.Parks(s, in.Holder, in.Outcome, in.Snap, in.SlotOf) {
		return planPark(in, s, holderIndex, p)
	}

	policy := c.PolicyFor(s, in.Outcome)
	if policy == PolicyDestroy && policy != c.Release.PolicyFor(in.Outcome) && !s.Orphan {
		p.Notes = append(p.Notes, Note{Msg: "no pristine snapshot to roll back to; destroying instead", KV: []any{"dataset", s.Dataset}, Warn: true})
	}
	p.Doing, p.Policy = fmt.Sprintf("releasing %s (%s)", s.Dataset, policy), string(policy)
	p.Notes = append(p.Notes, Note{Msg: "releasing slot", KV: []any{"slot", s.ID, "alloc_id", in.Holder.ID, "outcome", in.Outcome, "policy", policy, "orphan", s.Orphan}})
	switch policy {
	case PolicyRollback:
		p.Ops = append(p.Ops, rollbackOps(s, holderIndex, marked, in.Now)...)
	case PolicySnapshot:
		p.Ops = append(p.Ops, retainOps(in, s, holderIndex)...)
	default:
		p.Ops = append(p.Ops, destroyAndRecreateOps(in.Config, c, s, holderIndex, in.Now)...)
	}
	p.Done = readyNote(s)
	return p, nil
}

// readyNote is the line a finished release logs.
func readyNote(s Slot) Note {
	if s.Orphan {
		return Note{Msg: "slot retired: the configuration no longer has it", KV: []any{"slot", s.ID, "dataset", s.Dataset}}
	}
	return Note{Msg: "slot ready", KV: []any{"slot", s.ID, "generation", s.Generation + 1}}
}

// PlanTidy clears what a release left on ready slot s: its last holder and
// outcome, and an interrupted retain's name and expiry
// (ClearedOnReady). A crash between a rollback's write of the ready state
// and these leaves them; nothing reads them on a ready slot, but the slot
// would show a holder it no longer has.
func PlanTidy(s Slot) Plan {
	var p Plan
	for _, prop := range ClearedOnReady(s, false) {
		p.Ops = append(p.Ops, inheritOp(s.Dataset, prop))
	}
	p.Done = Note{Msg: "cleared what an interrupted release left on a ready slot", KV: []any{"slot", s.ID}}
	return p
}

// PlanPristine takes the @pristine snapshot of ready slot s, which its
// class's rollbacks return to (StepPristine says when that is safe).
func PlanPristine(s Slot) Plan {
	return Plan{
		Ops:  []Op{snapshotOp(s.Dataset + "@" + PristineSnapshot)},
		Done: Note{Msg: "took the pristine snapshot a crash kept from a new slot", KV: []any{"slot", s.ID}},
	}
}

// destroyAndRecreateOps destroy the slot's own snapshots (replica
// snapshots among them), then the slot (without -r: ZFS refuses if
// anything foreign appeared below it since it was read; a busy dataset is
// not forced either), and create a fresh one. Its own bookmarks are not
// destroyed one by one: a filesystem's destroy takes its bookmarks along
// (OpenZFS frees them with the dataset; zfs destroy without -r checks
// only children and snapshots), and a stranger's is refused before
// (CheckRelease).
func destroyAndRecreateOps(cfg *Config, c Class, s Slot, holderIndex uint64, now time.Time) []Op {
	ops := append(dropSnapshots(s.OwnSnapshots), destroyOp(s.Dataset))
	return append(ops, replaceOps(c, s, holderIndex, now)...)
}

// replaceOps create the fresh slot that takes a released one's place,
// unless the configuration no longer has it (an orphan): then nothing does.
func replaceOps(c Class, s Slot, holderIndex uint64, now time.Time) []Op {
	if s.Orphan {
		return nil
	}
	return CreateSlotOps(c, s.Dataset, NewSlotProps(c, s.Dataset, s.Generation+1, holderIndex, now))
}

// CreateSlotOps make a ready slot: created with props (the class's
// properties and the plugin's state, in one command, so it never exists
// unmarked), or cloned from the class's golden snapshot; then, for classes
// that roll back, its pristine snapshot. What exists already is done.
func CreateSlotOps(c Class, dataset string, props map[string]string) []Op {
	create := Op{Command: zfs.Command{Verb: zfs.VerbCreate, Name: dataset, Props: props}, Done: []error{zfs.ErrExists}}
	if c.FromSnapshot != "" {
		create.Verb, create.Arg = zfs.VerbClone, c.FromSnapshot
	}
	ops := []Op{create}
	if c.NeedsPristine() {
		ops = append(ops, snapshotOp(dataset+"@"+PristineSnapshot))
	}
	return ops
}

// rollbackOps return the slot to its pristine snapshot. The plugin's own
// newer snapshots (the held @retained of a retain that was interrupted, its
// class's policy changed since; the holder's replica snapshots) and its
// bookmarks (the replica pulls' bases) go first: ZFS refuses a rollback
// while a snapshot or a bookmark is newer than its target (zfs_do_rollback
// checks both). Anyone else's stops it: ZFS refuses the rollback (no -r)
// if someone took one since the slot was read. Then the slot is marked
// ready, and the properties of its last holding cleared (marked: the slot
// carries a releasing mark).
func rollbackOps(s Slot, holderIndex uint64, marked bool, now time.Time) []Op {
	var newer []string
	for _, snap := range s.OwnSnapshots {
		if snap != s.Dataset+"@"+PristineSnapshot {
			newer = append(newer, snap)
		}
	}
	ops := append(dropOwn(newer, s.OwnBookmarks), rollbackOp(s.Dataset+"@"+PristineSnapshot),
		setOp(s.Dataset, RolledBackProps(s.Generation+1, holderIndex, now)))
	for _, prop := range ClearedOnReady(s, marked) {
		ops = append(ops, inheritOp(s.Dataset, prop))
	}
	return ops
}

// retainOps keep the holder's data: the slot is marked with the name it
// will have, its replica snapshots and bookmarks dropped (dropReplicaBases),
// snapshotted under a hold, renamed aside, a fresh slot created in its
// place, and the data marked retained where it is.
//
// The name is the holder's (Config.RetainedName). It is taken when the
// holder's data from another slot (an allocation holding two slots of the
// class), or from this slot before a crash between the rename and the
// re-create, already has it: the rename then asks to plan again, and the
// plan made with the name seen taken keeps this data beside it under a name
// of its own (the snapshot and its hold are there already), rather than
// retry the same rename for ever.
func retainOps(in ReleaseInput, s Slot, holderIndex uint64) []Op {
	aside := in.Config.RetainedName(s)
	expires := in.Now.Add(in.Class.Release.Retain)
	var ops []Op
	rename := renameOp(s.Dataset, aside)
	rename.Done = []error{zfs.ErrNotExist}
	if in.Seen.Taken(aside) {
		aside = fmt.Sprintf("%s-%s-%s", aside, s.ID, strconv.FormatInt(in.Now.Unix(), 10))
		rename.Arg = aside
		ops = append(ops, setOp(s.Dataset, RetainAsProps(aside, expires)))
		ops = append(ops, dropReplicaBases(s)...)
	} else {
		snap := s.Dataset + "@" + RetainedSnapshot
		snapshot, hold := snapshotOp(snap), holdOp(snap)
		// Gone: renamed aside already by a pass a crash interrupted.
		snapshot.Done = append(snapshot.Done, zfs.ErrNotExist)
		hold.Done = append(hold.Done, zfs.ErrNotExist)
		rename.Replan, rename.Check = []error{zfs.ErrExists}, aside
		ops = append(ops, setGoneOK(s.Dataset, RetainAsProps(aside, expires)))
		ops = append(append(ops, dropReplicaBases(s)...), snapshot, hold)
	}
	// The fresh slot comes before the retained data's own marks: until
	// they are written, its owner mark still names the slot, and a crash
	// after the rename has the slot created as this plan would
	// (PlanEnsure), whatever it interrupted.
	ops = append(ops, rename)
	ops = append(ops, replaceOps(in.Class, s, holderIndex, in.Now)...)
	return append(ops, setOp(aside, RetainedProps(aside, in.Now)))
}
