package model

import (
	"fmt"
	"time"
)

// The takeover rule (issue 30, docs/node-loss.md): may the replacement B
// of an allocation A lost with its node claim a replica of A's data now?
//
// A's node may be cut off rather than dead, and a cut-off A may still
// write its original: a claim must wait until Nomad's own rules say A has
// stopped. Only one setting makes a cut-off client stop its allocations,
// the group's stop_after_client_disconnect = D (Nomad 1.6.2):
//
//   - the client stops them itself once it has had no successful
//     heartbeat for D, checking every min(5 s, D) (client/heartbeatstop.go
//     lines 65-71 shouldStopAfter, 84-91 the interval, 144-153 stopAlloc
//     → the alloc runner's Destroy); its last good heartbeat is before the
//     servers mark its node down, so before A is marked lost;
//   - stopping runs the group's and the tasks' shutdown_delay first
//     (client/allocrunner/group_service_hook.go lines 81 and 161,
//     client/allocrunner/taskrunner/task_runner.go line 987), then the
//     task's kill_timeout before the kill;
//   - the servers record when A turned lost in its AllocStates
//     (structs.Allocation.AppendState, nomad/structs/structs.go lines
//     10909-10915, called by SetStop and Plan.AppendStoppedAlloc, 12273)
//     and place B only after WaitClientStop, that time + D + the longest
//     kill_timeout (structs.go lines 10777-10805; scheduler/reconcile.go
//     line 470 and reconcile_util.go lines 528-545); but a loss with the
//     node down loses that record on its way to the state store, and
//     its ModifyTime stands in for it (LostAlloc.LostSince).
//
// The plugin counts the same way from the time of loss, by its own
// clock, and adds what WaitClientStop leaves out: the client's check
// interval, the shutdown delays, and a margin for the clocks of the
// servers, A's client and this node (TakeoverMargin).
//
// max_client_disconnect keeps A running on its cut-off node by design
// (A is "unknown" (scheduler/reconcile.go line 1424), B placed at once,
// one of the two kept on reconnect (pickReconnectingAlloc, line 1176)),
// and nothing stops A when it
// turns lost later: never a claim for such a group. Nomad refuses both
// settings on one group (structs.go line 6800), and a D of 0 stops
// nothing (ShouldClientStop, structs.go lines 10765-10773).

// TakeoverMargin is added to every takeover time: the clock skew between
// Nomad's servers (which record when A turned lost), A's client (which
// counts D from its own last heartbeat) and this node's plugin. NTP keeps
// them well within it.
const TakeoverMargin = 30 * time.Second

// Nomad 1.6.2's defaults the rule counts with.
const (
	// nomadDefaultKillTimeout is structs.DefaultKillTimeout
	// (nomad/structs/structs.go line 7371): WaitClientStop counts at least
	// this long for the kill, and a task's kill_timeout defaults to it.
	nomadDefaultKillTimeout = 5 * time.Second
	// heartbeatStopInterval is the longest wait between two checks of
	// the client's heartbeat stop (client/heartbeatstop.go line 86).
	heartbeatStopInterval = 5 * time.Second
)

// LostAlloc is what the takeover rule reads of A, as Nomad's servers
// answer GET /v1/allocation/<id> (structs.Allocation with the job version
// it runs), never as A's node says: that node may be gone.
type LostAlloc struct {
	ID string
	// Namespace, JobID, TaskGroup and Name (Nomad's "<job>.<group>[<index>]")
	// place it in its job: LostPredecessor pairs a replacement that names
	// no predecessor with it by them.
	Namespace, JobID, TaskGroup, Name string
	// ClientStatus as the servers have it: "lost" once they marked it so.
	ClientStatus string
	// CreateIndex is the servers' index at its creation: a replacement
	// is created after the allocation it replaces (LostPredecessor).
	CreateIndex uint64
	// LostByServers: the servers stopped it as lost with its node (their
	// desired description, as Alloc.LostByServers). Its node, back,
	// reports it complete or failed later: it is then no longer lost, but
	// still the allocation an unlinked replacement replaces
	// (LostPredecessor).
	LostByServers bool
	// LostAt is the Time of A's first AllocStates entry with Field 0
	// (ClientStatus) and Value "lost" (WaitClientStop reads the same
	// one); zero when there is none, as Nomad 1.6.2 keeps none for an
	// allocation lost with its node down (LostSince).
	LostAt time.Time
	// ModifiedAt is A's ModifyTime: when the servers last changed it, by
	// their clock; never earlier than the stop that marked it lost.
	ModifiedAt time.Time
	// WasUnknown: an AllocStates entry says A was "unknown" (its node
	// disconnected under max_client_disconnect) at some time.
	WasUnknown bool
	// StopAfter is A's group's stop_after_client_disconnect, 0 when unset.
	StopAfter time.Duration
	// MaxClientDisconnect: A's group sets max_client_disconnect (any
	// value, 0 included: Nomad reads a set value as "supports
	// disconnected clients").
	MaxClientDisconnect bool
	// KillTimeout is the longest kill_timeout of A's group's tasks.
	KillTimeout time.Duration
	// ShutdownDelay is the group's shutdown_delay plus the longest of its
	// tasks' own: both run before a task is sent its kill signal.
	ShutdownDelay time.Duration
}

// TakeoverVerdict is the answer of DecideTakeover.
type TakeoverVerdict int

const (
	// TakeoverNever: on what Nomad says now, A may still write; no replica
	// is claimed, and B's Reserve follows the class's on_timeout as when
	// no copy comes. A later answer of Nomad's may change it (A unknown
	// turning lost decides nothing; running turning lost may).
	TakeoverNever TakeoverVerdict = iota
	// TakeoverWait: A has been told to stop, not yet for long enough; ask
	// again at Until.
	TakeoverWait
	// TakeoverClaim: A has stopped by Nomad's own rules; B may claim.
	TakeoverClaim
)

// String names the verdict for logs and tests.
func (v TakeoverVerdict) String() string {
	switch v {
	case TakeoverWait:
		return "wait"
	case TakeoverClaim:
		return "claim"
	}
	return "never"
}

// Takeover is DecideTakeover's answer: the verdict, the time a wait ends
// (the takeover time, set for Wait and Claim), and why, in the words an
// operator reads in B's Reserve's log lines.
type Takeover struct {
	Verdict TakeoverVerdict
	Until   time.Time
	Why     string
}

// LostSince is the time of a's loss the takeover counts from: its
// AllocStates' record (LostAt) when the servers kept one, else its
// ModifyTime (ModifiedAt); zero when it has neither.
//
// Nomad 1.6.2 keeps no record for an allocation lost with its node down:
// the plan that stops it is normalized to a diff without AllocStates
// (nomad/plan_apply.go normalizeStoppedAlloc, lines 383-391) and the state
// store rebuilds the allocation from its old self
// (nomad/state/state_store.go DenormalizeAllocationDiffSlice, lines
// 7126-7170; the servers' own WaitClientStop then counts from "now" at
// each evaluation). The same diff stamps its ModifyTime with the time of
// the stop, and a later change only moves it later: a takeover counted
// from it comes no earlier than one counted from the loss (shown on a real
// cluster: docs/node-loss.md, finding (b)).
func (a LostAlloc) LostSince() time.Time {
	if !a.LostAt.IsZero() {
		return a.LostAt
	}
	return a.ModifiedAt
}

// TakeoverAt is the earliest time a replica of a may be claimed: the time
// it turned lost (LostSince), plus its group's stop_after_client_disconnect, the
// client's check interval, the shutdown delays, the longest kill_timeout
// (at least Nomad's default) and TakeoverMargin. ok is false when a gives
// no such time (no stop_after_client_disconnect, or no time of loss).
func TakeoverAt(a LostAlloc) (at time.Time, ok bool) {
	since := a.LostSince()
	if a.StopAfter <= 0 || since.IsZero() {
		return time.Time{}, false
	}
	return since.Add(a.StopAfter + min(heartbeatStopInterval, a.StopAfter) + a.ShutdownDelay +
		max(a.KillTimeout, nomadDefaultKillTimeout) + TakeoverMargin), true
}

// DecideTakeover says whether B may claim a replica of A's data at now,
// by this node's clock. Claim only when A is lost, was never unknown, its
// group sets stop_after_client_disconnect and not max_client_disconnect,
// and TakeoverAt has passed; Wait until then; Never otherwise.
//
// A that ended on its node (complete, failed) is Never too: its node said
// its tasks are dead, and its final data is there, newer than any replica:
// the migration pulls it, and the class's on_timeout decides when that
// node does not answer.
func DecideTakeover(a LostAlloc, now time.Time) Takeover {
	switch a.ClientStatus {
	case ClientLost:
	case ClientUnknown:
		return Takeover{Why: fmt.Sprintf("allocation %s is unknown: Nomad keeps it running on its disconnected node (max_client_disconnect) "+
			"and may keep it over its replacement when the node reconnects; a replica is never claimed while it may write", short(a.ID))}
	case ClientComplete, ClientFailed:
		return Takeover{Why: fmt.Sprintf("allocation %s ended on its node (%s): its final data is there, newer than any replica", short(a.ID), a.ClientStatus)}
	default:
		return Takeover{Why: fmt.Sprintf("allocation %s is %s, not lost: its own node has its data", short(a.ID), a.ClientStatus)}
	}
	if a.MaxClientDisconnect || a.WasUnknown {
		return Takeover{Why: fmt.Sprintf("allocation %s is lost, but its group sets max_client_disconnect: nothing stops it on a cut-off node, "+
			"so a replica is never claimed for it", short(a.ID))}
	}
	if a.StopAfter <= 0 {
		return Takeover{Why: fmt.Sprintf("allocation %s is lost, and its group sets no stop_after_client_disconnect: nothing stops it "+
			"on a cut-off node, so a replica is never claimed for it", short(a.ID))}
	}
	at, ok := TakeoverAt(a)
	if !ok {
		return Takeover{Why: fmt.Sprintf("allocation %s is lost, but Nomad recorded no time of its loss (AllocStates, ModifyTime) "+
			"to count stop_after_client_disconnect from", short(a.ID))}
	}
	if now.Before(at) {
		return Takeover{Verdict: TakeoverWait, Until: at, Why: fmt.Sprintf("allocation %s was lost at %s; its node stops it within "+
			"stop_after_client_disconnect %s, its shutdown delay and kill timeout: a replica may be claimed from %s",
			short(a.ID), a.LostSince().UTC().Format(time.RFC3339), a.StopAfter, at.UTC().Format(time.RFC3339))}
	}
	return Takeover{Verdict: TakeoverClaim, Until: at, Why: fmt.Sprintf("allocation %s was lost at %s and has been stopped by its node "+
		"since %s at the latest", short(a.ID), a.LostSince().UTC().Format(time.RFC3339), at.UTC().Format(time.RFC3339))}
}
