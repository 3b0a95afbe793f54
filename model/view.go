package model

import (
	"fmt"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/nomad-device-zfs/nomad-device-zfs/zfs"
)

// View is what the plugin knows of its datasets after a scan: it is rebuilt
// from scratch each time, never patched.
type View struct {
	// ScannedAt is when the data was read.
	ScannedAt time.Time
	// Parents are the parent datasets the plugin works below, as the scan
	// found them, in Config.Parents order (the block's first). A parent's
	// problem makes its own classes' slots unhealthy, and no others.
	Parents []ParentView
	// Pool, Problem and ParentMountpoint are the block's parent's
	// (Parents[0]): everything there is to know of a configuration whose
	// classes all live below it. With classes below other parents, each
	// class's is its parent's (View.Parent, ClassView.Problem).
	Pool             *zfs.Pool
	Problem          string
	ParentMountpoint string
	Classes          []ClassView
	// Removed are the plugin's class datasets below any parent that the
	// configuration no longer has: their slots are orphans
	// (ClassView.Orphans), their retained data expires as recorded, and the
	// class dataset itself is destroyed once nothing is left below it
	// (ClassView.Empty).
	Removed []ClassView
	// classes finds a class by name; a slot's ID then gives its place
	// (<class>-<n> is Slots[n-1]), with no map of 10,000 IDs in every
	// view. BuildView fills it; a View built by hand is searched instead.
	classes map[string]int
}

// ParentView is one parent dataset as a scan found it.
type ParentView struct {
	// Dataset is the parent's name, e.g. "tank/nomad".
	Dataset string
	// Pool is its pool, nil when unknown.
	Pool *zfs.Pool
	// Problem, when set, makes every slot of the classes below this parent
	// unhealthy, and the lifecycle leaves them alone: pool missing or not
	// healthy, parent missing or not mounted, its listing failed.
	Problem string
	// Mountpoint is the parent dataset's mountpoint, "" when unknown:
	// every slot's path below it follows from it (Slot.WantMountpoint).
	Mountpoint string
	// Moved are the plugin's class datasets below this parent whose class
	// the configuration now puts below another parent. The plugin leaves
	// them and everything below them alone (their slot IDs are the moved
	// class's too): the operator destroys them once no task uses them.
	Moved []string
}

// Parent is the view of parent dataset p. A view built by hand, without
// Parents, keeps its one parent's in Pool, Problem and ParentMountpoint. A
// parent the view does not have is a problem: nothing below it is acted on.
func (v *View) Parent(p string) ParentView {
	for i := range v.Parents {
		if v.Parents[i].Dataset == p {
			return v.Parents[i]
		}
	}
	if len(v.Parents) == 0 {
		return ParentView{Dataset: p, Pool: v.Pool, Problem: v.Problem, Mountpoint: v.ParentMountpoint}
	}
	return ParentView{Dataset: p, Problem: fmt.Sprintf("%q is not a parent dataset of this configuration", p)}
}

// ParentProblem is the problem of class view cv's parent, "" if none: while
// it is set, nothing of the class is created, released or destroyed.
func (v *View) ParentProblem(cv *ClassView) string { return v.Parent(cv.Parent).Problem }

// ClassView is one class's datasets.
type ClassView struct {
	Class Class
	// Parent is the parent dataset the class dataset is below: the class's
	// own parent, or the block's.
	Parent  string
	Dataset string
	// Exists: the class dataset exists and is owned.
	Exists bool
	// Info is the class dataset's row, when it exists.
	Info zfs.Dataset
	// Problem makes every slot of the class unhealthy.
	Problem string
	// Slots are the configured slots, <class>-1 .. <class>-N, in order.
	Slots []Slot
	// Retained are former slots kept aside by PolicySnapshot, newest first.
	Retained []Retained
	// Parked is sticky data waiting for its holder's replacement (State
	// StateParked), by dataset name.
	Parked []Retained
	// Orphans are the plugin's slot datasets of this class that the
	// configuration no longer has (Slot.Orphan), in slot order.
	Orphans []Slot
	// Replicas are the copies this node keeps of other nodes' held slots
	// of the class (replica.go), by dataset name: counted, never offered
	// nor released as slots.
	Replicas []Replica
	// Removed: the class is no longer configured (View.Removed).
	Removed bool
	// Empty: nothing at all lies below the class dataset, not even a
	// snapshot. Set for removed classes only.
	Empty bool
}

// Retained is a former slot's data kept aside until it expires: retained
// by the snapshot policy, or parked for a replacement (sticky.go).
type Retained struct {
	Dataset string
	// State is StateRetained or StateParked; a dataset renamed aside whose
	// state was not yet rewritten (a crash) is still StateReleasing.
	State   State
	Holder  string
	Outcome string
	Since   time.Time
	Expires time.Time
	Info    zfs.Dataset
	// OwnSnapshots are the plugin's snapshots of it (@retained, and the
	// @pristine a parked slot took along).
	OwnSnapshots []string
	// Strangers are the datasets and snapshots below it that are not the
	// plugin's: while there are any, it is not destroyed.
	Strangers []string
}

// Migrated reports whether the receiver of a migration of r holds its
// final copy (migrate.go): r, on its own node, may go by its policy.
func (r Retained) Migrated() bool {
	return slices.Contains(r.OwnSnapshots, r.Dataset+"@"+Migrated)
}

// FinalSent reports whether r's final snapshot has been taken for a
// migration (and sent, or being sent), the receiver not yet confirmed.
func (r Retained) FinalSent() bool {
	return slices.Contains(r.OwnSnapshots, r.Dataset+"@"+MigrateFinal)
}

// SendsFinal reports whether r is allocation alloc's own data parked for
// its replacement, so that a snapshot of it is the copy's last state: it
// was renamed aside as alloc ended, and nothing writes it. That holds
// from the park's rename on, before the park has marked it parked (it is
// still in the release's state while the fresh slot is created in its
// place): the sending node answers the replacement's node then, rather
// than after the create (docs/performance.md, the cutover against its
// floor).
func (r Retained) SendsFinal(alloc string) bool {
	return r.Holder == alloc && !r.Copy() && (r.State == StateParked || r.State == StateReleasing)
}

// Copy reports whether r is a copy received from another node (whole or
// still arriving), not this node's own data.
func (r Retained) Copy() bool { return r.Outcome == OutcomeMigrated }

// Same reports whether two readings of data kept aside are of the same
// dataset in the same state, held for the same allocation: what a pass that
// planned from one may act on in the other.
func (r Retained) Same(o Retained) bool {
	return r.State == o.State && r.Holder == o.Holder && r.Info.GUID == o.Info.GUID
}

// SlotIndex finds a slot by ID: its class's index in Classes and its index
// in that class's Slots.
func (v *View) SlotIndex(id string) (class, slot int, ok bool) {
	if v == nil {
		return 0, 0, false
	}
	if v.classes != nil {
		return v.place(id)
	}
	for ci := range v.Classes {
		for si := range v.Classes[ci].Slots {
			if v.Classes[ci].Slots[si].ID == id {
				return ci, si, true
			}
		}
	}
	return 0, 0, false
}

// place finds slot id by its name: <class>-<n> is the class's Slots[n-1].
func (v *View) place(id string) (class, slot int, ok bool) {
	i := strings.LastIndexByte(id, '-')
	if i < 0 {
		return 0, 0, false
	}
	ci, ok := v.classes[id[:i]]
	if !ok {
		return 0, 0, false
	}
	n, err := strconv.Atoi(id[i+1:])
	if err != nil || n < 1 || n > len(v.Classes[ci].Slots) || v.Classes[ci].Slots[n-1].ID != id {
		return 0, 0, false
	}
	return ci, n - 1, true
}

// Slot finds a slot by ID, and its class.
func (v *View) Slot(id string) (*Slot, *ClassView) {
	ci, si, ok := v.SlotIndex(id)
	if !ok {
		return nil, nil
	}
	cv := &v.Classes[ci]
	return &cv.Slots[si], cv
}

// Health decides whether the scheduler may place on a slot, and says why
// not: problem is the node's or the class's, createErr the last failure to
// create the slot.
func Health(s *Slot, problem, createErr string) (bool, string) {
	switch {
	case problem != "":
		return false, problem
	case s.Foreign:
		return false, fmt.Sprintf("dataset %q exists but is not owned by nomad-device-zfs; not touching it", s.Dataset)
	case s.Orphan:
		return false, "no longer configured (its class's slots were lowered, or the class removed): " +
			"released by policy once its holder has ended, then destroyed"
	case !s.Exists && createErr != "":
		return false, "cannot create " + s.Dataset + ": " + createErr
	case !s.Exists:
		return false, "not created yet"
	case len(s.Strangers) > 0:
		return false, strangersAdvice(parentOf(s), s.Dataset, s.Strangers)
	case strings.HasPrefix(s.Info.Origin, parentOf(s)+"/"):
		// A slot cloned from a snapshot of another slot or of retained
		// data starts with another allocation's data.
		return false, fmt.Sprintf("%s is a clone of %s, which is below the plugin's parent: it may hold another allocation's data; "+
			"destroy it (zfs destroy %s) and the plugin creates it afresh", s.Dataset, s.Info.Origin, s.Dataset)
	case s.State == StateReleasing:
		// Healthy on purpose. Reserve finishes a pending release before it
		// mounts, so offering the slot is safe; marking it unhealthy is not:
		// a job evaluated while a class has no healthy instance is blocked
		// with the node's class ineligible, and since device health is not
		// part of the computed node class, the slot turning healthy again
		// never unblocks it (seen on a real agent). It also spares the node
		// a re-registration per release.
		return true, ""
	case s.State != StateReady && s.State != StateHeld && s.State != StateParked:
		// Parked data at a slot's name is a claim a crash interrupted:
		// held by the predecessor, whose replacement inherits it in place.
		return false, fmt.Sprintf("unknown state %q", s.State)
	case !s.Mounted && !s.MountpointOK():
		return false, fmt.Sprintf("not mounted, and its mountpoint is %q, not %q where the plugin's naming puts it (zfs inherit mountpoint %s)",
			s.Mountpoint, s.WantMountpoint, s.Dataset)
	case !s.Mounted:
		return false, "not mounted"
	case !s.MountpointOK():
		// The path a task gets comes from the plugin's naming; a mountpoint
		// anyone can change with zfs set is only checked against it.
		return false, fmt.Sprintf("mounted at %q, not at %q where the plugin's naming puts it: not handed out (zfs inherit mountpoint %s)",
			s.Mountpoint, s.WantMountpoint, s.Dataset)
	}
	return true, ""
}

// MountpointOK reports whether the slot's mountpoint is the one its name
// gives it below the parent.
func (s *Slot) MountpointOK() bool { return s.WantMountpoint != "" && s.Mountpoint == s.WantMountpoint }

// parentOf is the plugin's parent dataset of slot s: <parent>/<class>/<id>.
func parentOf(s *Slot) string { return zfs.Parent(zfs.Parent(s.Dataset)) }

// unmounted reports a filesystem that should be mounted and is not.
func unmounted(d *zfs.Dataset) bool {
	return d != nil && !d.IsSnapshot() && !d.Mounted && Mountable(d.Mountpoint) && d.Mountpoint != "-"
}
