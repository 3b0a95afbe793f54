package model

import (
	"fmt"
	"strconv"
	"time"

	"github.com/nomad-device-zfs/nomad-device-zfs/zfs"
)

// ActionKind is one step that brings the datasets toward the configuration.
type ActionKind int

const (
	// CreateClass creates <parent>/<class>.
	CreateClass ActionKind = iota
	// CreateSlot creates a ready slot.
	CreateSlot
	// MountSlot mounts an owned slot that is not mounted.
	MountSlot
	// MountClass mounts an owned class dataset, before any of its slots.
	MountClass
)

func (k ActionKind) String() string {
	return [...]string{"create class dataset", "create slot", "mount slot", "mount class dataset"}[k]
}

// Action is one dataset to create or mount, planned from a View: its
// commands, in order.
type Action struct {
	Kind    ActionKind
	Class   string
	Dataset string
	Ops     []Op
}

// PlanEnsure lists what to do so every class has its ready slots. It plans
// nothing for a class whose parent has a problem or whose dataset belongs to
// someone else, and never touches a foreign dataset. Slots that need space
// up front are planned only while the class dataset's available space
// covers them; the others get a reason instead.
func PlanEnsure(v *View, now time.Time) (acts []Action, blocked map[string]string) {
	blocked = map[string]string{}
	for ci := range v.Classes {
		cv := &v.Classes[ci]
		if cv.Problem != "" || v.ParentProblem(cv) != "" {
			continue
		}
		avail := cv.Info.Available
		if cv.Exists && unmounted(&cv.Info) {
			// Top-down: the class dataset first, its slots after it.
			acts = append(acts, Action{Kind: MountClass, Class: cv.Class.Name, Dataset: cv.Dataset, Ops: []Op{mountOp(cv.Dataset)}})
		}
		if !cv.Exists {
			// Not done if it exists: someone else's, made since the scan.
			create := Op{Command: zfs.Command{Verb: zfs.VerbCreate, Name: cv.Dataset, Props: ClassProps(cv.Dataset)}}
			acts = append(acts, Action{Kind: CreateClass, Class: cv.Class.Name, Dataset: cv.Dataset, Ops: []Op{create}})
			avail = ^uint64(0) // unknown until created: let zfs decide
		}
		for si := range cv.Slots {
			s := &cv.Slots[si]
			switch {
			case s.Foreign:
			case !s.Exists:
				if need := cv.Class.NeedBytes; need > avail {
					blocked[s.Dataset] = fmt.Sprintf("pool out of space for another slot: %s available under %s, a slot reserves %s",
						humanBytes(avail), cv.Dataset, humanBytes(need))
					continue
				}
				avail -= cv.Class.NeedBytes
				gen, holderIndex := successorOf(cv, s.Dataset)
				acts = append(acts, Action{Kind: CreateSlot, Class: cv.Class.Name, Dataset: s.Dataset,
					Ops: CreateSlotOps(cv.Class, s.Dataset, NewSlotProps(cv.Class, s.Dataset, gen, holderIndex, now))})
			case (s.State == StateReady || s.State == StateHeld) && !s.Mounted && s.MountpointOK():
				acts = append(acts, Action{Kind: MountSlot, Class: cv.Class.Name, Dataset: s.Dataset, Ops: []Op{mountOp(s.Dataset)}})
			}
		}
	}
	return acts, blocked
}

// successorOf is the generation and holder index of a missing slot's new
// dataset: 1 and none, unless a release renamed the slot's data aside and a
// crash came before it created the slot again. That data's marks are not
// rewritten yet (its owner mark still names the slot): the slot is created
// as the release would have, one generation on, recording the ended
// holder's index, so the holder is not taken for a newer, unrecorded one
// whose data would be in the fresh slot (it would be released again, and
// by the snapshot policy kept aside, empty, under the holder's name).
func successorOf(cv *ClassView, dataset string) (generation int, holderIndex uint64) {
	generation = 1
	for _, list := range [][]Retained{cv.Retained, cv.Parked} {
		for _, r := range list {
			u := r.Info.User
			if r.State != StateReleasing || u.Get(PropOwner) != dataset {
				continue
			}
			if g, err := strconv.Atoi(u.Get(PropGeneration)); err == nil && g+1 > generation {
				generation = g + 1
			}
			if i, err := strconv.ParseUint(u.Get(PropHolderIndex), 10, 64); err == nil {
				holderIndex = max(holderIndex, i)
			}
		}
	}
	return generation, holderIndex
}

// Mountable reports whether a mountpoint value is one zfs mounts itself.
func Mountable(mountpoint string) bool {
	return mountpoint != "" && mountpoint != "none" && mountpoint != "legacy"
}

// humanBytes prints a size the way zfs list does without -p.
func humanBytes(b uint64) string {
	const unit = 1024
	if b < unit {
		return fmt.Sprintf("%dB", b)
	}
	div, exp := uint64(unit), 0
	for n := b / unit; n >= unit && exp < 5; n /= unit {
		div *= unit
		exp++
	}
	return fmt.Sprintf("%.1f%c", float64(b)/float64(div), "KMGTPE"[exp])
}
