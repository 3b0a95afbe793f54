package model

import "slices"

// A replacement that names no predecessor. Nomad 1.6.2 places the
// replacement of an allocation lost with its node, when the group sets
// stop_after_client_disconnect, without linking the two: the first
// evaluation marks A lost and stopped and only delays the placement
// (scheduler/reconcile.go lines 470-471, markDelayed); every later one
// finds A terminal, ignores it (reconcile_util.go shouldFilter, lines
// 454-457) and places B as a missing instance of the group under A's freed
// name (computePlacements, lines 777-786): B.PreviousAllocation is empty and
// A.NextAllocation stays so. Run in-process against Nomad's own scheduler
// (scheduler.TestStopAfterClientDisconnectNamesNoPredecessor). That is the
// one setting under which a replica may be taken over (DecideTakeover), so
// B's Reserve pairs itself with A by A's place in its job instead: the
// same namespace, job, task group and name ("<job>.<group>[<index>]").

// LostPredecessor picks, among the allocations whose replicas this node
// holds (as the servers answered for each), the one caller replaces
// though it names none: in caller's namespace, job, group and name, in a
// group that sets stop_after_client_disconnect and not
// max_client_disconnect (Nomad links every other replacement itself),
// created before caller, and either lost, or stopped as lost by the
// servers and ended since by its node, back (complete or failed,
// LostByServers: its client stops a lost allocation when it reconnects,
// docs/node-loss.md finding (c)); the newest of them when there are
// several (a replacement lost in its turn). ok is false when caller names
// a predecessor or none fits.
//
// Paired with an ended one, caller's Reserve takes no replica over
// (DecideTakeover: its final data is on its node) and waits for the
// migration of that data, which its node keeps parked for caller
// (Class.Parks, PlanParked) and sends to caller's node
// (transfer.Decide's unlinked case).
func LostPredecessor(caller Alloc, lost []LostAlloc) (LostAlloc, bool) {
	var best LostAlloc
	found := false
	if caller.PreviousAllocation != "" || caller.Name == "" {
		return best, false
	}
	for _, l := range lost {
		if l.ID == caller.ID || !lostOrEndedLost(l) || l.StopAfter <= 0 || l.MaxClientDisconnect ||
			l.Namespace != caller.Namespace || l.JobID != caller.JobID || l.TaskGroup != caller.TaskGroup || l.Name != caller.Name {
			continue
		}
		if l.CreateIndex != 0 && caller.CreateIndex != 0 && l.CreateIndex >= caller.CreateIndex {
			continue // placed after caller: not one caller can replace
		}
		if !found || newerLoss(l, best) {
			best, found = l, true
		}
	}
	return best, found
}

// lostOrEndedLost reports whether l is lost, or was stopped as lost by the
// servers and has ended on its node since (complete, failed).
func lostOrEndedLost(l LostAlloc) bool {
	return l.ClientStatus == ClientLost || PulledUnlinked(l) && l.LostByServers
}

// newerLoss orders two losses: the one created later (a replacement lost
// in its turn is created after the allocation it replaced, whatever its
// node reported since), then the later LostSince, then the higher ID (so
// that the choice does not depend on the order they were read in).
func newerLoss(a, b LostAlloc) bool {
	if a.CreateIndex != 0 && b.CreateIndex != 0 && a.CreateIndex != b.CreateIndex {
		return a.CreateIndex > b.CreateIndex
	}
	if x, y := a.LostSince(), b.LostSince(); !x.Equal(y) {
		return x.After(y)
	}
	return a.ID > b.ID
}

// PulledUnlinked reports whether the replacement LostPredecessor paired
// with l pulls l's data from l's node as a linked replacement does: l has
// ended on its node, back (complete, failed, having been lost), so its
// final data is there, parked for the replacement (Class.Parks). While l
// is lost, a replica is taken over instead (DecideTakeover) and nothing
// is pulled: l's node does not answer.
func PulledUnlinked(l LostAlloc) bool {
	return l.ClientStatus == ClientComplete || l.ClientStatus == ClientFailed
}

// Linked is snap with the links Nomad does not record that this node's
// Reserves found (links: a replacement's ID → the ID of the allocation it
// replaces, by LostPredecessor and PulledUnlinked): each replacement in
// snap that names no predecessor names its own, so that Migrations pulls
// the data as a linked predecessor's. snap itself is left as it is.
func Linked(snap *Snapshot, links map[string]string) *Snapshot {
	if snap == nil || len(links) == 0 {
		return snap
	}
	cp := *snap
	cp.Allocs = slices.Clone(snap.Allocs)
	for i := range cp.Allocs {
		if prev, ok := links[cp.Allocs[i].ID]; ok && cp.Allocs[i].PreviousAllocation == "" {
			cp.Allocs[i].PreviousAllocation = prev
		}
	}
	// The index (Indexed) holds positions and slots, which are unchanged.
	return &cp
}
