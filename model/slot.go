package model

import (
	"path"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/nomad-device-zfs/nomad-device-zfs/zfs"
)

// PropPrefix namespaces the plugin's ZFS user properties.
const PropPrefix = "nomad-device-zfs:"

// User properties the plugin keeps on what it owns. They are the only state
// that survives a crash: a restarted plugin reads them back in one scan.
const (
	// PropOwner marks ownership. Its value is the dataset's own name: user
	// properties are inherited, so a dataset someone creates below an owned
	// one inherits the parent's value, which names the parent, not itself.
	PropOwner = PropPrefix + "owner"
	// PropState is the slot's lifecycle state (State).
	PropState = PropPrefix + "state"
	// PropHolder is the allocation ID that holds or last held the slot.
	PropHolder = PropPrefix + "holder"
	// PropGeneration counts the slot's wipes; a new dataset starts at 1.
	PropGeneration = PropPrefix + "generation"
	// PropSince is when the state last changed, in Unix seconds.
	PropSince = PropPrefix + "since"
	// PropHolderIndex is the Nomad CreateIndex of the last allocation that
	// held the slot, kept after its release. Any allocation on this slot
	// placed later (a higher CreateIndex) is a newer holder: if it ended
	// before it was recorded, its data is in the slot and must go.
	PropHolderIndex = PropPrefix + "holder_index"
	// PropOutcome is how the holder ended (complete, failed, lost, gone),
	// recorded when its release starts: the release policy depends on it.
	PropOutcome = PropPrefix + "outcome"
	// PropRetainAs names the dataset a slot is renamed to when its data is
	// retained; it makes the renamed dataset recognisably ours before its
	// owner mark is rewritten (a crash between the two leaks nothing).
	PropRetainAs = PropPrefix + "retain_as"
	// PropExpires is when retained data may be destroyed, in Unix seconds.
	PropExpires = PropPrefix + "expires"
)

// UserProps are the user properties every scan reads. PropReplicaGroup
// is read for the replicas attribute a node publishes (ReplicasAttr): one
// column, about 0.8 % of a bare listing (docs/performance.md, "The scan"),
// against a second listing of every class that keeps replicas each pass.
var UserProps = []string{PropOwner, PropState, PropHolder, PropGeneration, PropSince,
	PropHolderIndex, PropOutcome, PropRetainAs, PropExpires, PropReplicaGroup}

// State is a slot's lifecycle state, recorded in PropState.
type State string

const (
	// StateReady: clean, mounted, free for the next allocation.
	StateReady State = "ready"
	// StateHeld: an allocation holds it; its data is that allocation's.
	StateHeld State = "held"
	// StateReleasing: the holder ended and its release has begun; a crash
	// here resumes the release.
	StateReleasing State = "releasing"
	// StateRetained: a former slot renamed aside with its holder's data,
	// under a held snapshot, until it expires.
	StateRetained State = "retained"
	// StateParked: a sticky class's former slot, renamed aside with its
	// holder's data for the allocation that replaces it (sticky.go). At a
	// slot's own name it is a claim a crash interrupted, and counts as held
	// by that holder.
	StateParked State = "parked"
)

// Slot is one device instance: a dataset <parent>/<class>/<id>.
type Slot struct {
	// ID is the device instance ID: "<class>-<n>", stable across wipes,
	// never numeric (Nomad parses a numeric ID as a number) and comma-free.
	ID string
	// Class is the class name, the device group's Name.
	Class string
	// Dataset is the full dataset name.
	Dataset string
	// Exists reports whether the dataset exists and is owned by the plugin.
	Exists bool
	// Foreign reports a dataset at Dataset that the plugin does not own.
	Foreign bool
	// Orphan: the configuration no longer has this slot (its class's slots
	// were lowered, or the class removed). It is never offered; once its
	// holder has ended it is released by policy and not made ready again
	// (Config.Configured).
	Orphan bool
	State  State
	Holder string
	// HolderIndex is the CreateIndex of the last holder (PropHolderIndex).
	HolderIndex uint64
	// Outcome is the ending holder's outcome while releasing.
	Outcome string
	// Generation counts wipes of this slot.
	Generation int
	Since      time.Time
	Mountpoint string
	Mounted    bool
	// HasPristine: the slot has its @pristine snapshot (rollback policy).
	HasPristine bool
	// OwnSnapshots are the plugin's snapshots of the slot (@pristine,
	// @retained during a retain, a replica pull's @replica-<n> while held),
	// full names.
	OwnSnapshots []string
	// OwnBookmarks are the plugin's bookmarks of the slot (#replica-<n>,
	// the bases of replica pulls while held), full names. Every release
	// drops them (a destroy takes them along): none outlives its holding.
	OwnBookmarks []string
	// Strangers are the datasets, snapshots and bookmarks below the slot
	// that are not the plugin's (someone's zfs create, snapshot or
	// bookmark): while there are any, the slot is never released,
	// destroyed, renamed or rolled back.
	Strangers []string
	// WantMountpoint is where the plugin's own naming puts the slot: its
	// parent's mountpoint + /<class>/<id>, as ZFS inherits it; "" when the
	// parent's is not known. A slot mounted anywhere else is not handed out.
	WantMountpoint string
	// WantOrigin is the snapshot the slot must be a clone of (the class's
	// from_snapshot), "" for a plain dataset.
	WantOrigin string
	// Info is what the view keeps of the dataset's last scanned row (sizes,
	// properties).
	Info Info
	// Healthy and Reason say whether the scheduler may place on the slot,
	// and why not.
	Healthy bool
	Reason  string
}

// fillFromDataset copies the recorded state of an owned dataset into s.
func (s *Slot) fillFromDataset(d *zfs.Dataset) {
	s.Exists = true
	s.Info = InfoOf(d)
	u := s.Info.User
	s.State = State(u.Get(PropState))
	s.Holder = u.Get(PropHolder)
	s.Generation, _ = strconv.Atoi(u.Get(PropGeneration))
	if v := u.Get(PropHolderIndex); v != "" { // unset on a new slot: no error to build
		s.HolderIndex, _ = strconv.ParseUint(v, 10, 64)
	}
	s.Outcome = u.Get(PropOutcome)
	if secs, err := strconv.ParseInt(u.Get(PropSince), 10, 64); err == nil {
		s.Since = time.Unix(secs, 0)
	}
	// The row's strings are substrings of its listing's line: the slot
	// keeps copies, or the one it already has, not the line.
	switch d.Mountpoint {
	case s.WantMountpoint:
		s.Mountpoint = s.WantMountpoint
	default:
		s.Mountpoint = strings.Clone(d.Mountpoint)
	}
	s.Mounted = d.Mounted
}

// SlotFromListing builds the slot of class at dataset
// (<parent>/<class>/<id>) from the rows of one `zfs list -r` of it (its
// dataset, snapshots and anything below it). parentMountpoint is the
// parent dataset's mountpoint, "" when unknown.
func SlotFromListing(cfg *Config, class, dataset string, rows []zfs.Dataset, parentMountpoint string) Slot {
	byName := make(map[string]*zfs.Dataset, len(rows))
	below := make([]*zfs.Dataset, 0, len(rows))
	for i := range rows {
		byName[rows[i].Name] = &rows[i]
		if rows[i].Name != dataset {
			below = append(below, &rows[i])
		}
	}
	parent, id := zfs.Parent(zfs.Parent(dataset)), path.Base(dataset)
	return slotFrom(cfg, cfg.Class(class), parent, id, byName, below, parentMountpoint)
}

// slotFrom builds one slot of class c below parent from scanned rows: its
// dataset (byName) and what lies below it (below: its snapshots, and any
// child datasets).
func slotFrom(cfg *Config, c Class, parent, id string, byName map[string]*zfs.Dataset, below []*zfs.Dataset, parentMountpoint string) Slot {
	s := Slot{ID: id, Class: c.Name, WantOrigin: c.FromSnapshot, Orphan: !cfg.Configured(c.Name, id)}
	if Mountable(parentMountpoint) {
		s.WantMountpoint = parentMountpoint + "/" + c.Name + "/" + id
	}
	if rest, ok := strings.CutPrefix(parentMountpoint, "/"); ok && rest == parent && s.WantMountpoint != "" {
		// ZFS's default mountpoint: the path ends with the dataset's name,
		// which ends with the ID. One string for the three.
		s.Dataset = s.WantMountpoint[1:]
		s.ID = s.Dataset[len(s.Dataset)-len(id):]
	} else {
		s.Dataset = parent + "/" + c.Name + "/" + id
	}
	d, ok := byName[s.Dataset]
	switch {
	case !ok:
		return s
	case !Owned(d):
		s.Foreign = true
		return s
	}
	s.fillFromDataset(d)
	s.OwnSnapshots, s.OwnBookmarks, s.Strangers = splitBelow(s.Dataset, below)
	s.HasPristine = slices.Contains(s.OwnSnapshots, s.Dataset+"@"+PristineSnapshot)
	return s
}

// Same reports whether two readings of a slot are of the same dataset in
// the same lifecycle step: the same GUID, state, holder and generation. ZFS
// has no compare-and-set, so a writer that is not the plugin re-reads and
// compares before it writes.
func (s Slot) Same(o Slot) bool {
	return s.Exists == o.Exists && s.Info.GUID == o.Info.GUID && s.State == o.State &&
		s.Holder == o.Holder && s.Generation == o.Generation
}
