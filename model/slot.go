package model

import (
	"strconv"
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

// UserProps are the user properties every scan reads.
var UserProps = []string{PropOwner, PropState, PropHolder, PropGeneration, PropSince,
	PropHolderIndex, PropOutcome, PropRetainAs, PropExpires}

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
	State   State
	Holder  string
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
	// Info is the dataset's last scanned row (sizes, properties).
	Info zfs.Dataset
	// Healthy and Reason say whether the scheduler may place on the slot,
	// and why not.
	Healthy bool
	Reason  string
}

// Owned reports whether d carries the ownership mark for itself. A slot
// renamed aside for retention is also recognised by PropRetainAs naming it,
// which covers a crash between the rename and rewriting its owner mark.
func Owned(d *zfs.Dataset) bool {
	if d.IsSnapshot() {
		parent := zfs.Parent(d.Name)
		return d.User[PropOwner] == parent || d.User[PropRetainAs] == parent
	}
	return d.User[PropOwner] == d.Name || d.User[PropRetainAs] == d.Name
}

// fillFromDataset copies the recorded state of an owned dataset into s.
func (s *Slot) fillFromDataset(d *zfs.Dataset) {
	s.Exists = true
	s.Info = *d
	s.State = State(d.User[PropState])
	s.Holder = d.User[PropHolder]
	s.Generation, _ = strconv.Atoi(d.User[PropGeneration])
	s.HolderIndex, _ = strconv.ParseUint(d.User[PropHolderIndex], 10, 64)
	s.Outcome = d.User[PropOutcome]
	if secs, err := strconv.ParseInt(d.User[PropSince], 10, 64); err == nil {
		s.Since = time.Unix(secs, 0)
	}
	s.Mountpoint = d.Mountpoint
	s.Mounted = d.Mounted
}

// SlotFromRows builds slot id of class from scanned rows, keyed by name: its
// dataset and its pristine snapshot. A dataset at the slot's name without
// the mark is Foreign, never the plugin's.
func SlotFromRows(cfg *Config, class, id string, byName map[string]*zfs.Dataset) Slot {
	s := Slot{ID: id, Class: class, Dataset: cfg.SlotDataset(class, id)}
	if d, ok := byName[s.Dataset]; ok {
		if Owned(d) {
			s.fillFromDataset(d)
		} else {
			s.Foreign = true
		}
	}
	if d, ok := byName[s.Dataset+"@"+PristineSnapshot]; ok && s.Exists && Owned(d) {
		s.HasPristine = true
	}
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
