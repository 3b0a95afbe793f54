package model

import (
	"fmt"
	"maps"
	"path"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/nomad-device-zfs/nomad-device-zfs/zfs"
)

// Replicas (issue 30, docs/node-loss.md): a sticky class with a transfer
// block may keep copies of each held slot on other nodes while its holder
// runs, so that a replacement of a holder lost with its node starts from
// the newest of them.
//
//	holder's node: slot held by A ─@replica-<n>, sent─▶ bookmark #replica-<n> kept as the base, the snapshot dropped
//	replica node:  replica-<A>-<slot> (state replica, unmounted) ─every Every: the increment from the newest─▶ @replica-<n+1>
//	               ─A lost, DecideTakeover says claim, B reserves here─▶ renamed to ParkedName(A), parked: claimed as on one node
//	               ─A gone, no replacement claimed it within sticky_wait (DecideReplica)─▶ dropped
//
// Which nodes keep one is ReplicaNodes (replica_place.go); when one may be
// claimed is DecideTakeover (replica_takeover.go). A replica is never a
// slot: it sits beside the slots and is never offered, mounted or written.

// Replicate is a class's replica configuration; Copies 0 is none.
type Replicate struct {
	// Copies is how many other nodes keep a copy of each held slot.
	Copies int
	// Every is the longest a replica node lets its copy age before it
	// pulls the next increment: with one transfer's time, the bound of
	// the data lost with a node (the RPO).
	Every time.Duration
	// Spread names the node attribute the copies spread over:
	// "node.datacenter", "node.class" or "node.pool"; "" for none.
	Spread string
}

// Enabled reports whether the class keeps replicas.
func (r Replicate) Enabled() bool { return r.Copies > 0 }

// StateReplica: a copy of another node's held slot, kept beside the slots
// for a replacement that may one day claim it (PropHolder names the
// allocation whose data it is).
const StateReplica State = "replica"

// Names and marks of a replica.
const (
	// replicaPrefix starts a replica's dataset name below its class, and
	// the name of each of its snapshots (@replica-<n>) and of the
	// holder's bookmarks (#replica-<n>).
	replicaPrefix = "replica-"
	// PropReplicaNode is the node the replica's source allocation ran on.
	PropReplicaNode = PropPrefix + "replica_node"
	// PropReplicaSlot is the slot of that node the data is of: the
	// replacement's Reserve pairs it with its own request
	// (successorSlot), as it pairs parked data.
	PropReplicaSlot = PropPrefix + "replica_slot"
	// PropReplicaGroup is the source allocation's task group,
	// "<namespace>/<job>/<group>": what the node publishes (ReplicasAttr).
	PropReplicaGroup = PropPrefix + "replica_group"
)

// ReplicaName is where this node keeps the replica of allocation source's
// slot id of class: beside the slots and the parked data, one dataset per
// allocation and slot.
func (c *Config) ReplicaName(class, source, id string) string {
	return c.ClassDataset(class) + "/" + replicaPrefix + source + "-" + id
}

// ReplicaSnapshot names the n-th replica snapshot (1-based), replica-<n>:
// taken on the holder's slot, received with the stream, kept as the
// bookmark #replica-<n> on the holder.
func ReplicaSnapshot(n int) string { return replicaPrefix + strconv.Itoa(n) }

// ReplicaSnapshotProps are set by the `zfs snapshot -o` that takes
// replica snapshot snap (full name) on a held slot: the plugin's mark,
// naming the snapshot itself. The inherited mark names the slot, so a
// stranger's @replica-<n> (a replication tool's, named alike) has not
// this one and stays foreign (ownSnapshot).
func ReplicaSnapshotProps(snap string) map[string]string {
	return map[string]string{PropOwner: snap}
}

// ReplicaNumber reads n from a snapshot's or bookmark's short name,
// replica-<n> (ReplicaSnapshot's inverse); 0 and false for any other.
func ReplicaNumber(short string) (int, bool) {
	rest, ok := strings.CutPrefix(short, replicaPrefix)
	if !ok || rest == "" || rest[0] == '0' {
		return 0, false
	}
	n, err := strconv.Atoi(rest)
	if err != nil || n < 1 || ReplicaSnapshot(n) != short {
		return 0, false
	}
	return n, true
}

// ReplicaProps are set by the receive (-o) that makes the replica name of
// source's slot id, which ran on node: the plugin's mark and the replica's
// state, as a migration's copy has them (ReceiveProps: the class's own
// properties, so a claimed replica has this node's limits), and
// canmount=noauto so that nothing mounts it (a write would break the next
// increment); the claim puts canmount back.
func ReplicaProps(c Class, name string, source Alloc, id string, now time.Time) map[string]string {
	props := ReceiveProps(c, name, source.ID, now, time.Time{})
	delete(props, PropOutcome)
	delete(props, PropExpires)
	maps.Copy(props, map[string]string{
		PropState:        string(StateReplica),
		PropReplicaNode:  source.NodeID,
		PropReplicaSlot:  id,
		PropReplicaGroup: ReplicaGroup(source),
		"canmount":       "noauto",
	})
	return props
}

// ReplicaGroup names a's task group as a replica node publishes it:
// "<namespace>/<job>/<group>".
func ReplicaGroup(a Alloc) string { return a.Namespace + "/" + a.JobID + "/" + a.TaskGroup }

// ReplicasAttrName is the name of ReplicasAttr's attribute: a job reads it
// as ${device.attr.replicas}.
const ReplicasAttrName = "replicas"

// ReplicasAttr is the device-group attribute a node publishes for the
// replicas it keeps of a class (ReplicasAttrName): the groups they are
// of (Replica.Group), sorted, each once, joined by commas. A job makes
// Nomad prefer a node that keeps a replica of its own group with a device
// affinity on it, operator set_contains (Nomad 1.6.2's
// scheduler/feasible.go checkAttributeConstraint, lines 1506-1517, and
// checkSetContainsAll, 1049: the attribute split at commas), so a
// replacement lands where its claim is a rename. It names groups, not
// allocations or snapshots: a job cannot name its predecessor, and every
// attribute change re-registers the node (plugin/fingerprint.go), so the
// value changes only when a group's first replica comes or its last goes,
// never with an increment. A group whose name holds a comma cannot be
// matched so, and is left out.
func ReplicasAttr(rs []Replica) string {
	var groups []string
	for _, r := range rs {
		if r.Group != "" && !strings.Contains(r.Group, ",") && !slices.Contains(groups, r.Group) {
			groups = append(groups, r.Group)
		}
	}
	slices.Sort(groups)
	return strings.Join(groups, ",")
}

// Replica is one replica this node keeps, as read back.
type Replica struct {
	Dataset string
	// Source is the allocation whose data it is; Node the node it ran on,
	// Slot its slot there, Group its task group (ReplicaGroup).
	Source, Node, Slot, Group string
	// Newest is the number of its newest snapshot (@replica-<n>), 0 when
	// a first receive has not finished; NewestAt when that snapshot was
	// taken on the holder (its creation, which the receive keeps): the
	// replica's age counts from it.
	Newest   int
	NewestAt time.Time
	// Info is the replica dataset's row, as the scan read it.
	Info zfs.Dataset
}

// replicasOf lists the replicas among a class dataset's children (kids),
// by name, each with what the scan reads of it (replicaFromRows): a
// dataset the plugin owns in state replica. They are not slots: never
// offered, never released by a slot's rules, never orphans nor data kept
// aside (their state is none of those); the View lists them so that
// status, doctor and the metrics count them.
func replicasOf(kids []*zfs.Dataset, below map[string][]*zfs.Dataset) []Replica {
	var out []Replica
	for _, d := range kids {
		if r, ok := replicaFromRows(d, below[d.Name]); ok {
			out = append(out, r)
		}
	}
	slices.SortFunc(out, func(a, b Replica) int { return strings.Compare(a.Dataset, b.Dataset) })
	return out
}

// replicaFromRows reads replica d back from the scan's rows, d's own and
// those below it: its source (the holder mark ReplicaProps set) and slot
// (the rest of its name, replica-<source>-<slot>), its group (the
// replica_group mark, which the node publishes: ReplicasAttr), and its
// newest @replica-<n>. The scan reads neither replica_node nor a
// snapshot's creation (two more columns on every row of every scan), so
// Node and NewestAt are left unset: what needs them reads the replica
// itself. A snapshot of a replica has only its mark inherited (a
// stream carries no properties): it counts by its name.
func replicaFromRows(d *zfs.Dataset, below []*zfs.Dataset) (Replica, bool) {
	rest, named := strings.CutPrefix(path.Base(d.Name), replicaPrefix)
	if !named || !Owned(d) || State(d.User.Get(PropState)) != StateReplica {
		return Replica{}, false
	}
	r := Replica{Dataset: d.Name, Source: d.User.Get(PropHolder), Group: d.User.Get(PropReplicaGroup), Info: *d}
	if slot, ok := strings.CutPrefix(rest, r.Source+"-"); ok && r.Source != "" {
		r.Slot = slot
	}
	for _, b := range below {
		ds, short, ok := strings.Cut(b.Name, "@")
		if n, replica := ReplicaNumber(short); ok && ds == d.Name && replica && b.IsSnapshot() {
			r.Newest = max(r.Newest, n)
		}
	}
	return r, true
}

// ReplicaDecision is DecideReplica's answer.
type ReplicaDecision struct {
	Fate ReplicaFate
	// At is when a Pull is due, or a Keep turns into a drop by itself.
	At  time.Time
	Why string
}

// ReplicaFate is what becomes of a replica.
type ReplicaFate int

const (
	// ReplicaKeep: kept as it is; nothing pulled.
	ReplicaKeep ReplicaFate = iota
	// ReplicaPull: kept, and the next increment pulled from the holder's
	// node at At (now, when At has passed).
	ReplicaPull
	// ReplicaDrop: destroyed.
	ReplicaDrop
)

// String names the fate for logs and tests.
func (f ReplicaFate) String() string {
	switch f {
	case ReplicaPull:
		return "pull"
	case ReplicaDrop:
		return "drop"
	}
	return "keep"
}

// ReplicaInput is what DecideReplica reads.
type ReplicaInput struct {
	Replica Replicate
	// StickyWait is the class's: how long a replica outlives its
	// allocation's end for a replacement to claim it.
	StickyWait time.Duration
	// Source is the replica's allocation as Nomad's servers answer;
	// Found false when they know no such allocation (never, or
	// garbage-collected).
	Source Alloc
	Found  bool
	// Takeover is DecideTakeover's answer for Source at Now (when lost).
	Takeover Takeover
	// Chosen: this node is among ReplicaNodes for Source now.
	// NewerElsewhere: a node that is publishes a replica of Source at
	// least as new as this one.
	Chosen, NewerElsewhere bool
	Now                    time.Time
}

// DecideReplica says what becomes of replica r:
//
//   - while its allocation runs, a node chosen for it pulls every Every
//     (counted from its newest snapshot's time); a node no longer chosen
//     pulls no more (the holder would refuse it) and drops its copy once a
//     chosen node publishes one as new, not before: until then it is the
//     newest there is;
//   - while the allocation is unknown, stopping or lost, it is kept as it
//     is: a replacement may claim it (DecideTakeover);
//   - once the allocation has ended, it is kept for sticky_wait from the
//     later of its end and its takeover time for a replacement to claim
//     (a claim renames it away), then dropped; at once when no replacement
//     can come (the holder completed, not lost, nothing replaces it: its
//     own node releases the original by the class's policy), or when
//     Nomad no longer knows the allocation.
func DecideReplica(r Replica, in ReplicaInput) ReplicaDecision {
	a := in.Source
	switch {
	case !in.Found:
		return ReplicaDecision{Fate: ReplicaDrop, Why: fmt.Sprintf("Nomad no longer knows allocation %s", short(r.Source))}
	case !a.ClientTerminal() && a.ClientStatus != ClientUnknown && !a.ServerTerminal():
		if in.Chosen {
			due := r.NewestAt.Add(in.Replica.Every)
			if r.Newest == 0 {
				due = in.Now
			}
			return ReplicaDecision{Fate: ReplicaPull, At: due, Why: fmt.Sprintf("allocation %s runs and this node keeps a copy of its data", short(a.ID))}
		}
		if in.NewerElsewhere {
			return ReplicaDecision{Fate: ReplicaDrop, Why: fmt.Sprintf("this node is no longer one of allocation %s's replica nodes, "+
				"and one of them holds a copy as new", short(a.ID))}
		}
		return ReplicaDecision{Fate: ReplicaKeep, Why: fmt.Sprintf("this node is no longer one of allocation %s's replica nodes; "+
			"its copy is kept until one of them holds one as new", short(a.ID))}
	case !a.ClientTerminal():
		return ReplicaDecision{Fate: ReplicaKeep, Why: fmt.Sprintf("allocation %s is %s (desired %s): its copy is kept for a replacement",
			short(a.ID), a.ClientStatus, a.DesiredStatus)}
	}
	if a.NextAllocation == "" && !replaceable(a) {
		return ReplicaDecision{Fate: ReplicaDrop, Why: fmt.Sprintf("allocation %s %s and nothing replaces it: its node releases "+
			"its data by the class's policy", short(a.ID), a.ClientStatus)}
	}
	from := a.ModifyTime
	if in.Takeover.Until.After(from) {
		from = in.Takeover.Until
	}
	until := from.Add(in.StickyWait)
	if in.Now.Before(until) {
		return ReplicaDecision{Fate: ReplicaKeep, At: until, Why: fmt.Sprintf("allocation %s %s: its copy is kept for a replacement "+
			"to claim until %s (sticky_wait)", short(a.ID), a.ClientStatus, until.UTC().Format(time.RFC3339))}
	}
	return ReplicaDecision{Fate: ReplicaDrop, Why: fmt.Sprintf("allocation %s ended and no replacement claimed its copy within sticky_wait %s",
		short(a.ID), in.StickyWait)}
}

// replaceable reports whether Nomad may still place a replacement for a,
// which ended and names none yet: it failed or was lost (OutcomeOf: one the
// servers stopped as lost, though its node reported it complete since,
// whose replacement Nomad 1.6.2 does not name), and a reschedule
// (reconcile.go's lost placements, the reschedule policy) may come. A
// completed allocation is not replaced; its node releases its data.
func replaceable(a Alloc) bool {
	o := OutcomeOf(a)
	return o == OutcomeFailed || o == OutcomeLost
}
