package model

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
// holds (lost, as the servers answered for each), the one caller replaces
// though it names none: lost, in caller's namespace, job, group and name,
// in a group that sets stop_after_client_disconnect and not
// max_client_disconnect (Nomad links every other replacement itself); the
// one lost last when there are several (a replacement lost in its turn).
// ok is false when caller names a predecessor or none fits.
func LostPredecessor(caller Alloc, lost []LostAlloc) (LostAlloc, bool) {
	var best LostAlloc
	found := false
	if caller.PreviousAllocation != "" || caller.Name == "" {
		return best, false
	}
	for _, l := range lost {
		if l.ID == caller.ID || l.ClientStatus != ClientLost || l.StopAfter <= 0 || l.MaxClientDisconnect ||
			l.Namespace != caller.Namespace || l.JobID != caller.JobID || l.TaskGroup != caller.TaskGroup || l.Name != caller.Name {
			continue
		}
		if !found || laterLoss(l, best) {
			best, found = l, true
		}
	}
	return best, found
}

// laterLoss orders two losses: the later LostSince, then the higher ID (so
// that the choice does not depend on the order they were read in).
func laterLoss(a, b LostAlloc) bool {
	if x, y := a.LostSince(), b.LostSince(); !x.Equal(y) {
		return x.After(y)
	}
	return a.ID > b.ID
}
