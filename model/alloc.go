package model

import (
	"slices"
	"time"
)

// What the slot lifecycle knows of Nomad's allocations: the watcher
// (package allocwatch) converts each answer of the Nomad API into these
// types, and every rule here takes them. They are plain data, so the model
// links no HTTP client and no Nomad API package.

// Device is one device block's assignment for one task.
type Device struct {
	Task, Vendor, Type, Name string
	// IDs are the instance IDs, sorted. The scheduler fixes them at
	// placement, so a pending allocation carries them before Reserve runs.
	IDs []string
}

// Alloc is the part of an allocation the slot lifecycle needs.
type Alloc struct {
	ID, Namespace, JobID, JobType, TaskGroup, NodeID string
	// Name is Nomad's "<job>.<group>[<index>]": a replacement Nomad places
	// without naming its predecessor (PreviousAllocation) takes a lost
	// allocation's free index, so its name (LostPredecessor).
	Name string
	// ClientStatus: pending, running, complete, failed, lost, unknown.
	// DesiredStatus: run, stop, evict.
	ClientStatus, DesiredStatus string
	// LostByServers: the servers stopped it as lost with its node (their
	// desired description, allocwatch). Its node's client, back, reports
	// it complete or failed later, which does not undo the loss: a
	// replacement may have started elsewhere without its last writes.
	LostByServers bool
	// Devices come from AllocatedResources.Tasks[*].Devices, in task order.
	Devices                  []Device
	ModifyIndex, CreateIndex uint64
	// PreviousAllocation is the allocation this one replaces on a
	// reschedule or destructive update; NextAllocation its replacement.
	PreviousAllocation, NextAllocation string
	// TaskStates maps a task name to its state ("pending", "running",
	// "dead") as the client reported it.
	TaskStates map[string]string
	ModifyTime time.Time
	// FinishedAt is when the last of its tasks finished, as the client
	// recorded it on this node (the same clock as the plugin's); zero
	// while any task has not. The release latency is measured from it.
	FinishedAt time.Time
}

// Nomad's allocation statuses (nomad/structs: AllocClientStatus*,
// AllocDesiredStatus*), as the API reports them.
const (
	ClientPending  = "pending"
	ClientRunning  = "running"
	ClientComplete = "complete"
	ClientFailed   = "failed"
	ClientLost     = "lost"
	ClientUnknown  = "unknown"

	DesiredRun   = "run"
	DesiredStop  = "stop"
	DesiredEvict = "evict"
)

// ClientTerminal reports whether the client is done with the allocation
// (complete, failed, lost). The scheduler frees its devices at this point.
func (a *Alloc) ClientTerminal() bool {
	switch a.ClientStatus {
	case ClientComplete, ClientFailed, ClientLost:
		return true
	}
	return false
}

// ServerTerminal reports whether the servers want it gone (desired stop or
// evict). Its tasks may still be running: "stopping".
func (a *Alloc) ServerTerminal() bool {
	switch a.DesiredStatus {
	case DesiredStop, DesiredEvict:
		return true
	}
	return false
}

// HoldsDevice reports whether any task of a was assigned the instance id of
// a vendor/typ device group.
func (a *Alloc) HoldsDevice(vendor, typ, id string) bool {
	for _, d := range a.Devices {
		if d.Vendor == vendor && d.Type == typ && slices.Contains(d.IDs, id) {
			return true
		}
	}
	return false
}

// Snapshot is one successful answer: all allocations on the node that the
// token can see, sorted by ID.
type Snapshot struct {
	NodeID string
	// Index is the answer's X-Nomad-Index.
	Index  uint64
	Allocs []Alloc
	// At is when the answer arrived.
	At time.Time
	// Others are allocations of other nodes that the lifecycle looked up:
	// the previous allocations of this node's, whose data follows them
	// here (migrate.go). They hold no slot of this node's: the rules that
	// ask who names a slot read Allocs alone.
	Others []Alloc

	// idx, when set (Indexed), finds allocations by ID and by slot without
	// a search of Allocs: a pass over every slot of a busy node asks once
	// per slot. It describes Allocs and Others as they were indexed.
	idx *snapIndex
}

// snapIndex are a Snapshot's allocations by ID (positions in Allocs, and
// in Others) and by the zfs/dataset device instances they name.
type snapIndex struct {
	byID, otherByID map[string]int
	bySlot          map[string][]int
}

// Indexed is a copy of s whose look-ups by ID and by slot (findAlloc,
// refsFor, localAlloc) use maps built once: a pass over n slots of a node
// with n allocations costs n look-ups instead of n searches of n. The copy
// must not be changed; s is left as it is.
func (s *Snapshot) Indexed() *Snapshot {
	if s == nil || s.idx != nil {
		return s
	}
	cp := *s
	ix := &snapIndex{byID: make(map[string]int, len(s.Allocs)), otherByID: make(map[string]int, len(s.Others)),
		bySlot: make(map[string][]int, len(s.Allocs))}
	for i, a := range s.Allocs {
		if _, dup := ix.byID[a.ID]; !dup {
			ix.byID[a.ID] = i
		}
		for _, d := range a.Devices {
			if d.Vendor != Vendor || d.Type != DeviceType {
				continue
			}
			for _, id := range d.IDs {
				if l := ix.bySlot[id]; len(l) == 0 || l[len(l)-1] != i {
					ix.bySlot[id] = append(l, i)
				}
			}
		}
	}
	for i, a := range s.Others {
		if _, dup := ix.otherByID[a.ID]; !dup {
			ix.otherByID[a.ID] = i
		}
	}
	cp.idx = ix
	return &cp
}
