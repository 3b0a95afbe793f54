package model

import (
	"errors"
	"fmt"
	"strings"

	"github.com/nomad-device-zfs/nomad-device-zfs/zfs"
)

// Plans: every change the lifecycle makes to ZFS is decided here as a Plan,
// the whole ordered list of zfs commands for one step (a release by each
// policy, a park, a claim, recording a holder, a prune, creating a slot),
// each with what its failures mean. hooks.Manager runs a plan under the
// lock of what it changes and decides nothing itself:
//
//   - a command that succeeds, or fails in a way its Op counts as done
//     (Done: a dataset already gone, a snapshot already there), moves on;
//   - one that fails in a way its Op says the plan was made on a reading
//     that no longer holds (Replan: a name already taken) stops the plan:
//     the Manager reads again, the name found taken included (Seen), and
//     asks the planner again;
//   - any other failure stops it with the error, after its Recover
//     commands and the plan's OnFail ones (best effort): the next pass, or
//     the Reserve's next try, reads again and plans from what it finds.
//
// Crash tolerance is a property of the planners, tested as such: a plan
// made from the state any prefix of a plan leaves (a crash between two of
// its commands) finishes what the whole plan would have done (plan_test.go).

// Op is one command of a plan, and what its failures mean.
type Op struct {
	zfs.Command
	// Done are the failures (zfs error kinds) that mean the command's
	// effect is there already: an earlier pass or a crash did it.
	Done []error
	// Replan are the failures that mean the datasets are not as the plan
	// read them: stop, read Check into Seen, and plan again.
	Replan []error
	// Check is the dataset read into Seen when a Replan failure stops the
	// plan (the name a rename found taken).
	Check string
	// Recover are commands run, best effort, when this one fails in any
	// other way: they put back what the failed command may have undone.
	Recover []zfs.Command
}

// Outcome is what a command's result means for its plan.
type Outcome int

const (
	// Next: done (or done already); run the next command.
	Next Outcome = iota
	// Stop: the plan fails with the error.
	Stop
	// Again: read again and plan again (Op.Replan).
	Again
)

// Outcome classifies err, the command's result.
func (o Op) Outcome(err error) Outcome {
	switch {
	case err == nil || isAny(err, o.Done):
		return Next
	case isAny(err, o.Replan):
		return Again
	}
	return Stop
}

func isAny(err error, kinds []error) bool {
	for _, k := range kinds {
		if errors.Is(err, k) {
			return true
		}
	}
	return false
}

// Plan is one lifecycle step's zfs commands, in order.
type Plan struct {
	// Doing says what the plan does, for its error: "releasing
	// tank/nomad/scratch/scratch-1 (destroy)".
	Doing string
	// Policy is, for a release, what it carries out: a Policy, or
	// PolicyPark for sticky data parked for its holder's replacement; ""
	// for the other steps.
	Policy string
	Ops    []Op
	// OnFail runs, best effort, when an op stops the plan with an error:
	// what must be recorded about a step that did not finish (the
	// releasing mark of a release that wrote none first).
	OnFail []Op
	// Notes are logged when the plan starts; Done when it has finished.
	Notes []Note
	Done  Note
}

// Note is a log line a plan asks for: the Manager logs it with the
// plan's duration added to Done.
type Note struct {
	Msg  string
	KV   []any
	Warn bool
}

// Seen holds what the executor read after a Replan outcome: the rows of
// one `zfs list` of each name (none when it does not exist).
type Seen map[string][]zfs.Dataset

// Taken reports whether name was seen to exist.
func (s Seen) Taken(name string) bool { return len(s[name]) > 0 }

// Explain says why a command of the plan stopped it: a destroy or
// rollback that ZFS refused because of something below the dataset that the
// plugin did not make is named as such.
func Explain(o Op, err error) error {
	if errors.Is(err, zfs.ErrHasChildren) || errors.Is(err, zfs.ErrNewerSnapshots) {
		return fmt.Errorf("something below %s is not nomad-device-zfs's (ZFS refused: %w); nothing was destroyed or rolled back", o.Name, err)
	}
	return err
}

// Commands are the plan's commands, in order (for logs and tests).
func (p Plan) Commands() []zfs.Command {
	out := make([]zfs.Command, len(p.Ops))
	for i, o := range p.Ops {
		out[i] = o.Command
	}
	return out
}

// op builders, one per verb the lifecycle uses; each says which failures
// count as done after a crash.

// setOp writes props on name. A set has no "already done" failure: a
// dataset that is gone fails it, unless the step allows it (setGoneOK).
func setOp(name string, props map[string]string) Op {
	return Op{Command: zfs.Command{Verb: zfs.VerbSet, Name: name, Props: props}}
}

// setGoneOK is setOp on a dataset that a crash may have renamed away
// already (the rename the mark protects has happened).
func setGoneOK(name string, props map[string]string) Op {
	o := setOp(name, props)
	o.Done = []error{zfs.ErrNotExist}
	return o
}

func inheritOp(name, prop string) Op {
	return Op{Command: zfs.Command{Verb: zfs.VerbInherit, Name: name, Arg: prop}}
}

// destroyOp destroys name, without -r: ZFS refuses if anything appeared
// below it since it was read. Gone already is done.
func destroyOp(name string) Op {
	return Op{Command: zfs.Command{Verb: zfs.VerbDestroy, Name: name}, Done: []error{zfs.ErrNotExist}}
}

// snapshotOp takes snapshot name; one already there is done.
func snapshotOp(name string) Op {
	return Op{Command: zfs.Command{Verb: zfs.VerbSnapshot, Name: name}, Done: []error{zfs.ErrExists}}
}

// markedSnapshotOp takes snapshot name with props set on it (zfs snapshot
// -o); one already there is done.
func markedSnapshotOp(name string, props map[string]string) Op {
	op := snapshotOp(name)
	op.Props = props
	return op
}

// holdOp places the plugin's hold on snap; a hold already there is done.
func holdOp(snap string) Op {
	return Op{Command: zfs.Command{Verb: zfs.VerbHold, Name: snap, Arg: HoldTag}, Done: []error{zfs.ErrExists}}
}

// releaseHoldOp takes the plugin's hold off snap; none there (or no
// snapshot) is done.
func releaseHoldOp(snap string) Op {
	return Op{Command: zfs.Command{Verb: zfs.VerbRelease, Name: snap, Arg: HoldTag}, Done: []error{zfs.ErrNotExist}}
}

func rollbackOp(snap string) Op {
	return Op{Command: zfs.Command{Verb: zfs.VerbRollback, Name: snap}}
}

func renameOp(from, to string) Op {
	return Op{Command: zfs.Command{Verb: zfs.VerbRename, Name: from, Arg: to}}
}

func mountOp(name string) Op {
	return Op{Command: zfs.Command{Verb: zfs.VerbMount, Name: name}, Done: []error{zfs.ErrMounted}}
}

// dropOwn drops the plugin's own snapshots snaps (dropSnapshots), then
// its own bookmarks, one zfs destroy each: what a rollback and a replica
// pull's clean-up remove before the data moves or rolls back.
func dropOwn(snaps, bookmarks []string) []Op {
	ops := dropSnapshots(snaps)
	for _, b := range bookmarks {
		ops = append(ops, destroyOp(b))
	}
	return ops
}

// dropSnapshots destroys the plugin's own snapshots snaps after the
// plugin's hold on them is released: two commands per filesystem, however
// many (zfs release tag a@x a@y, zfs destroy a@x,y; zfs.SnapshotList).
// zfs release takes each in turn, and one without the hold, or gone,
// fails alone: done. zfs destroy destroys all or none, so one held by
// someone else stops the plan with every snapshot still there.
func dropSnapshots(snaps []string) []Op {
	var order []string
	byFS := map[string][]string{}
	for _, s := range snaps {
		fs, _, _ := strings.Cut(s, "@")
		if _, ok := byFS[fs]; !ok {
			order = append(order, fs)
		}
		byFS[fs] = append(byFS[fs], s)
	}
	ops := make([]Op, 0, 2*len(order))
	for _, fs := range order {
		list, err := zfs.SnapshotList(byFS[fs])
		if err != nil {
			// A name the argv builders refuse: one at a time, so that
			// the refusal names it.
			for _, s := range byFS[fs] {
				ops = append(ops, releaseHoldOp(s), destroyOp(s))
			}
			continue
		}
		ops = append(ops, releaseHoldOp(list), destroyOp(list))
	}
	return ops
}
