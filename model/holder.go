package model

import (
	"sort"
)

// Liveness answers the one question every release depends on: may this
// holder still run on this node?
type Liveness int

const (
	// MayRun: pending, running, unknown (a disconnected node), or stopping
	// (desired stop, not yet client-terminal). Its data stays.
	MayRun Liveness = iota
	// Ended: complete or failed, or definitely gone from Nomad
	// (garbage-collected). Its data may be released.
	Ended
	// AskClient: lost, or gone from the servers. A lost allocation keeps
	// running on a node cut off from the servers, and the servers collect
	// lost allocations too, so it has ended only once this node's client no
	// longer has it (Allocs.RunningLocally answers false).
	AskClient
)

func (l Liveness) String() string {
	return [...]string{"may still run", "ended", "lost: ask the local client"}[l]
}

// Judge says whether allocation a, as Nomad answered for it, may still run,
// and how it ended when it has. found false is Nomad's definite "no such
// allocation"; an allocation missing from the node's list is not that
// (a token without read-job in its namespace hides it): look it up first.
func Judge(a Alloc, found bool) (Liveness, string) {
	switch {
	case !found:
		return AskClient, OutcomeGone
	case !a.ClientTerminal():
		return MayRun, ""
	case a.ClientStatus == "lost":
		return AskClient, OutcomeLost
	}
	return Ended, OutcomeOf(a)
}

// OutcomeOf names how a client-terminal allocation ended. One the
// servers stopped as lost ended lost, whatever its client reported once
// its node was back (complete, as its tasks were stopped): the class's
// policy for lost data applies to it (Class.KeepsLost).
func OutcomeOf(a Alloc) string {
	switch {
	case a.ClientStatus == ClientLost || a.LostByServers:
		return OutcomeLost
	case a.ClientStatus == ClientComplete:
		return OutcomeComplete
	default:
		return OutcomeFailed
	}
}

// Device identity: the plugin fingerprints zfs/dataset/<class>, and Nomad
// records it so in an allocation's AllocatedResources.
const (
	Vendor     = "zfs"
	DeviceType = "dataset"
)

// refs are the allocations that name one slot, split by whether they may
// still run.
type refs struct {
	// live are not client-terminal: pending, running, unknown. On a ready
	// slot, the caller of a Reserve is one of them whatever its
	// CreateIndex, and so is one a pass may record: the slot's
	// holder_index does not sort them. Nomad's indexes start over when a
	// cluster is rebuilt or restored from an older snapshot, or the client
	// joins another cluster; a holder_index written before may then be
	// above every allocation placed since, and sorting by it refused them
	// all, blaming the token, or took a stopping caller (stopped while its
	// Reserve waited, its index below the old one) for none and granted
	// its slot to another (seed 14496, I1).
	//
	// Safe (I1, I2): an allocation that names a ready slot has not run on
	// it (a task's start records its allocation as the holder before the
	// grant); Reserve grants only when exactly one live allocation names
	// the slot and it is not stopping, waits while a stopping one may hold
	// it, and refuses otherwise; live allocations never start a release,
	// they only hold one back (anyRunning). Within one index history this
	// only adds, for a stopping allocation placed before the slot's last
	// holder (stopped before it ran), a wait until its client reports it
	// complete.
	live []Alloc
	// terminal are complete, failed or lost. On a ready slot, those placed
	// after the last holder (newer) ran unrecorded; the index does sort
	// them: after a restore, allocations whose data went long ago come
	// back with their old CreateIndex and are not taken for unrecorded
	// holders, and one that ran in a new history was recorded at its start
	// with that history's index.
	terminal []Alloc
}

// refsFor finds the allocations holding device id of class in snap, oldest
// placement first.
func refsFor(snap *Snapshot, class, id string) refs {
	var r refs
	if snap == nil {
		return r
	}
	allocs := snap.Allocs
	if snap.idx != nil {
		allocs = make([]Alloc, 0, len(snap.idx.bySlot[id]))
		for _, i := range snap.idx.bySlot[id] {
			allocs = append(allocs, snap.Allocs[i])
		}
	}
	for _, a := range allocs {
		if !a.HoldsDevice(Vendor, DeviceType, id) || !holdsClass(a, class) {
			continue
		}
		if a.ClientTerminal() {
			r.terminal = append(r.terminal, a)
		} else {
			r.live = append(r.live, a)
		}
	}
	byCreate := func(s []Alloc) {
		sort.Slice(s, func(i, j int) bool { return s[i].CreateIndex < s[j].CreateIndex })
	}
	byCreate(r.live)
	byCreate(r.terminal)
	return r
}

// HoldsSlot reports whether a was assigned any of the plugin's devices.
func HoldsSlot(a Alloc) bool {
	for _, d := range a.Devices {
		if d.Vendor == Vendor && d.Type == DeviceType {
			return true
		}
	}
	return false
}

func holdsClass(a Alloc, class string) bool {
	for _, d := range a.Devices {
		if d.Vendor == Vendor && d.Type == DeviceType && d.Name == class {
			return true
		}
	}
	return false
}

// findAlloc finds allocation id in snap: this node's, or one of another
// node's that the lifecycle looked up (Snapshot.Others).
func findAlloc(snap *Snapshot, id string) (Alloc, bool) {
	if snap != nil && snap.idx != nil {
		if i, ok := snap.idx.byID[id]; ok {
			return snap.Allocs[i], true
		}
		if i, ok := snap.idx.otherByID[id]; ok {
			return snap.Others[i], true
		}
		return Alloc{}, false
	}
	if snap != nil {
		for _, as := range [][]Alloc{snap.Allocs, snap.Others} {
			for _, a := range as {
				if a.ID == id {
					return a, true
				}
			}
		}
	}
	return Alloc{}, false
}

// holderOf is the slot's recorded holder as snap shows it, or just its ID.
func holderOf(snap *Snapshot, s Slot) Alloc {
	a, _ := findAlloc(snap, s.Holder)
	a.ID = s.Holder
	return a
}

// firstLost finds a lost allocation among ended ones: it may still run on
// this node.
func firstLost(as []Alloc) (Alloc, bool) {
	for _, a := range as {
		if a.ClientStatus == "lost" {
			return a, true
		}
	}
	return Alloc{}, false
}

// newer keeps the allocations placed after the slot's last recorded holder:
// the ended ones that may have left data in a ready slot (refs.terminal).
func newer(as []Alloc, holderIndex uint64) []Alloc {
	var out []Alloc
	for _, a := range as {
		if a.CreateIndex > holderIndex {
			out = append(out, a)
		}
	}
	return out
}

// anyRunning reports whether an allocation has started: its client says
// running, or one of its tasks runs.
func anyRunning(as []Alloc) bool {
	for _, a := range as {
		if a.ClientStatus == "running" {
			return true
		}
		for _, st := range a.TaskStates {
			if st == "running" {
				return true
			}
		}
	}
	return false
}

// short abbreviates an allocation ID as Nomad's CLI does.
func short(id string) string {
	if len(id) > 8 {
		return id[:8]
	}
	return id
}
