package sim

import (
	"strings"
	"testing"
)

// TestTwoNodeRegressions replays shrunk schedules of the two-node world
// that broke an invariant before a fix; each fails without its fix.
func TestTwoNodeRegressions(t *testing.T) {
	tests := []struct {
		name string
		seed uint64
		keep []int
		// takeovers: at least this many replicas are taken over;
		// unlinked: at least this many replacements Nomad placed without
		// naming their predecessor got its final data (handedOverUnlinked).
		takeovers, unlinked int
	}{
		{
			// A claim of a copy from another node renamed it onto the slot,
			// then dropped the transfer's snapshots; the plugin died
			// between the two, and @migrate-final stayed on the held slot
			// for good (X4), where a later migration of that data would
			// have taken it for its own final snapshot. The snapshots now
			// go first, while the copy is still parked (model.PlanClaim).
			name: "a crash inside a claim leaves the copy's snapshots on the slot",
			seed: 30,
			keep: []int{10, 11, 17, 18, 19, 20, 21, 22, 28, 29, 30, 31, 32, 33, 34, 35, 36, 37, 38, 39},
		},
		{
			// A lying sender sent another allocation's final snapshot under
			// the planned one's name; the receiver's check of the guid
			// refused it, but the copy kept it, and a later "complete"
			// (a lie too) made it the replacement's data (X1). A copy whose
			// received guid is not the sender's is now dropped (from a
			// listing taken after the receive), and "complete" is believed
			// only of a copy whose newest snapshot is the final one
			// (model.DecidePullMove, model.HoldsFinal).
			name: "a copy that failed its verification, then a lying complete",
			seed: 226,
		},
		{
			// The harness's own bug: it recorded no snapshot's content (it
			// listed the snapshot's name, which zfs list refuses), so a
			// final copy held only as a received, unmounted snapshot on
			// the replacement's node counted as no copy: X2 broke once the
			// sender, rightly, destroyed its parked data.
			name: "a final copy held only as a received snapshot counts",
			seed: 40337,
			keep: []int{14, 15, 16, 26, 27, 34, 36, 44, 47, 48},
		},
		{
			// Node 1 released 0001's parked data once node 2 held its
			// final copy: it dropped the snapshots, @migrated with them,
			// and its destroy was refused as busy (a process held the
			// data, XBusy). Nothing then said the data was to go: the next
			// pass kept it for sticky_wait (X7). A release records its
			// decision (an expiry passed) before it drops the snapshots
			// (model.PlanReleaseParked; mutant parked-release-not-recorded).
			name: "a busy destroy after @migrated went is retried by the next pass",
			seed: 25,
			keep: []int{62, 71, 72, 73},
		},
		{
			// A hostile sender's replication stream brought a dataset below
			// 0001's copy on node 1, which the receiver refused and left for
			// the operator; model.DecideInherit took it for strangers below
			// parked data and started 0002 empty at once, though on_timeout
			// is "fail" and the data was whole on node 2 (X1). A copy refused
			// so now waits, then starts as on_timeout says.
			name: "a copy refused for a dataset below it: on_timeout decides",
			seed: 73,
			keep: []int{41, 44, 47, 58, 59, 60, 62, 64, 65, 66, 67},
		},
		{
			// 0005 (placed after 0004, which it replaces) ended on a ready
			// slot before 0004 started; a pass took it for an unrecorded
			// holder and parked the slot under its name, writing its index.
			// Then a pass recorded 0004, still pending, on the fresh slot,
			// and the record wrote 0004's lower index over the higher. Once
			// 0004 ended, 0005 looked newer than the slot's last holder
			// again: the next pass released the fresh, empty slot for it,
			// destroyed 0005's real parked data (node 2 had refused its
			// copy) as "older parked data" and renamed the empty slot into
			// its place, then the rename failed on every pass (X7). A
			// record now keeps the slot's higher index (model.PlanRecord,
			// ReleaseIndex), as a release does.
			name: "a record of an older allocation does not lower the slot's holder index",
			seed: 7740037,
			keep: []int{8, 13, 21, 29, 31, 32, 41, 47, 48, 49, 51, 52, 53, 54, 55, 61, 63, 65, 66, 67},
		},
		{
			// The harness's own bug: a hostile sender's replication stream
			// brought a dataset below 0001's copy on node 2, whose plugin
			// died before its check of the copy; its next pull received
			// the increment into the same copy (refused after it, as
			// before), and the harness failed to make the dataset below
			// again. An increment of a replication stream updates it.
			name: "a second hostile replication stream into the same copy",
			seed: 7740581,
			keep: []int{30, 40, 42, 44, 46, 49, 50, 51, 54, 55},
		},
		{
			// A world of three nodes that keeps replicas: node 2 held
			// 0004's replica at @replica-2 while 0004 ran on node 1; the
			// next increment came with a forged guid (a lie), the
			// transport found it unverified, and the replica was dropped
			// whole (ErrStartOver), leaving no replica of a running
			// allocation until a whole stream came back (XR5). An
			// increment that came unverified, or met the replica changed
			// here, now rolls the replica back to its base and keeps it
			// (model.DecideReplicaPullMove: ReplicaPullRebase,
			// ReplicaPullRollback).
			name: "a lie on one increment costs no replica",
			seed: 29,
			keep: []int{9, 22, 24, 25, 29, 35, 51, 52, 68, 69, 70},
		},
		{
			// The harness's own bug: 0004's first start waited out the
			// migrate timeout (its plugin died as it gave up: the start
			// failed); the restart policy's second start began after it
			// and started empty at once, as on_timeout = "start_empty"
			// says, and X1 counted the wait from the second start alone.
			// The timeout counts from the first start's Reserve.
			name: "a start retried after the migrate timeout may start empty at once",
			seed: 263,
		},
		{
			// The harness's own bug: node 3 was lost for good with 0002,
			// whose replica node 1 kept; node 1 dropped it sticky_wait
			// after the loss, legitimately, but XR5 measured the loss
			// from 0002's modify time, which the servers moved when its
			// replacement's start failed and another was placed: "lost 0s
			// ago". XR5's clock is the loss as a check first saw it.
			name: "a replica dropped sticky_wait after its loss, however the servers update the allocation since",
			seed: 257,
			keep: []int{1, 2, 6, 8, 29, 40},
		},
		{
			// The harness's own bug: a stall (10-180 s) held node 3's
			// replica pull of 0001 for 2m39s, from before the settle's
			// "faults end" to after it, and XR6 measured the calm from
			// the settle: "no replica ... with the network whole". A
			// stall in progress is a fault the world injected (a real
			// one is bounded only by the peer: HTTP/2's pings see a dead
			// connection, not a live sender that stops sending), so XR6's
			// calm begins once every stall has ended.
			name: "a replica stream stalled across the settle",
			seed: 9500005,
			keep: []int{1, 18, 21, 34, 38, 45, 56, 57, 61, 64, 65, 68},
		},
		{
			// Node 3 is lost for good with 0001, whose group sets
			// stop_after_client_disconnect (40 s); node 1 keeps its
			// replica. Nomad's scheduler places the replacement 0002 on
			// node 1 at WaitClientStop naming no predecessor, and 0002's
			// Reserve knew no A: it started empty, and the replica was
			// dropped sticky_wait later. It now pairs itself with the lost
			// A of its name (model.LostPredecessor) and takes the replica
			// over (XR7 checks it is the newest there was).
			name:      "a replacement Nomad does not link takes over the lost allocation's replica",
			seed:      9700022,
			takeovers: 1,
		},
		{
			// Node 3 cut off with 0001 (stop_after_client_disconnect 40 s);
			// node 2's replica pull of @replica-2 was cut mid-stream. 0002
			// took the replica over with its partial receive, and the
			// slot it became carried it for good (X4). A takeover now
			// abandons a partial receive first (model.PlanTakeReplica;
			// the Reserve lists the replica with its resume token,
			// zfs.Client.ListAll). The world keeps two copies: since
			// seed 9711147 below no replica is claimed there, so this
			// schedule no longer takes it over (TestPlanTakeReplicaAborts
			// APartialReceive keeps the rule).
			name: "a replica taken over with a partial receive",
			seed: 9710166,
			keep: []int{4, 29, 30, 31, 32, 33, 34, 40, 41, 44, 45, 47, 48, 49, 55, 56, 58, 59},
		},
		{
			// A hostile sender's replication stream brought a dataset
			// below node 2's replica of 0001; the pull refused the copy and
			// left it for the operator, and 0001's replacement took it over
			// all the same: parked data with a stranger below (X10). A
			// replica with a dataset below it is no replica to take over
			// (model.LocalReplica).
			name: "a replica left for the operator is not taken over",
			seed: 9710347,
		},
		{
			// A world keeping two copies: node 2 is lost with 0002; node 1's
			// replica of it is from +4m10s, node 3's from +5m17s. 0002's
			// replacement on node 1 took node 1's over (XR7): B asks no
			// other node which replica it holds. A local replica is now
			// claimed only when it is the only one there may be (one copy,
			// this node the one chosen for it: TakeoverInput.Unsure).
			name: "an older replica is not taken over while another node may hold a newer one",
			seed: 9711147,
		},
		{
			// The harness's own bug: 0001, replicated on two nodes, was
			// moved by an update (desired stop, still running until its
			// client kills it); its replicas are then kept as they are,
			// not pulled (model.DecideReplica), and XR6 still held node
			// 2's to the RPO. XR6 holds only an allocation Nomad wants
			// running.
			name: "a stopping allocation's replica is not held to the RPO",
			seed: 9720795,
			keep: []int{2, 25, 30, 42, 44, 46, 48},
		},
		{
			// Node 2 is cut off with 0002 (stop_after_client_disconnect);
			// its replacement 0004 is placed on node 1, which keeps its
			// replica. 0004's Reserve must wait for 0002's takeover time:
			// with the claim made before it (mutant
			// takeover-before-its-time), 0004 ran with 0002's data while
			// 0002 still ran on its cut-off node (XR8). Not a fix's
			// regression: the guard of the rule in the world.
			name: "a takeover waits for the cut-off holder to have stopped",
			seed: 9710644,
		},
		{
			// The harness's own bug: a hostile sender's replication stream
			// brought a dataset below node 1's replica of 0001, which is
			// then refused and left for the operator, as XR4 allows; XR6
			// still wanted it brought up to date once node 1's plugin had
			// restarted. XR6 leaves such a replica alone.
			name: "a replica left for the operator is not held to the RPO",
			seed: 9720780,
			keep: []int{0, 4, 9, 17, 19, 25, 33, 44, 51},
		},
		{
			// A hostile sender's final increment of 0002 made node 1's
			// copy reference 3 MB, over the class's refquota (1 MB).
			// Node 1 asked for the sender's "complete" first, naming the
			// final snapshot, and only then refused the copy: node 2 had
			// heard its final copy was held and released its own parked
			// data. Both gone, 0005 still waiting (X2). A copy over the
			// class's limits is now refused before that request
			// (model.PullLoop.increment; mutant
			// copy-limits-after-the-sender-is-told).
			name: "a final copy over the class's limits is refused before the sender releases its data",
			seed: 9760098,
			keep: []int{13, 22, 23, 36, 37, 38, 39, 41, 43, 44, 45, 46, 48, 51, 53, 56, 57, 58},
		},
		{
			// A lying holder (node 1) sent foreign data as 0002's first
			// replica snapshot, under a name of its own: node 2 received
			// it beside the replica, the check failed, and node 2's
			// plugin died before the discard's destroy. The next rounds
			// found a complete copy beside with no @replica-<n> and no
			// token, and asked for a whole stream into it, "destination
			// exists", for good: no replica while 0002 ran (XR6). Such a
			// copy is now discarded first
			// (model.ReplicaPullLoop.discardBeside; mutant
			// replica-beside-unverified-kept).
			name: "a complete copy beside that a crash left unverified is discarded, not received into for good",
			seed: 9765364,
			keep: []int{3, 39, 46, 48, 56, 57, 59, 60, 62, 64, 66, 67, 68, 72, 73, 74, 75, 78},
		},
		{
			// The same flaw in a migration's pull: node 3 lied, sending
			// its own pg-2@replica-1 for 0001's @migrate-final; node 2
			// received it into its copy and died before the discard. The
			// copy, with no snapshot of the transfer's and no token, was
			// asked for whole into itself every round ("destination
			// exists"), 0005 failed its starts, and the copy was left for
			// good (X4). Such a copy is now dropped and pulled whole
			// (model.PullLoop.dropBare; mutant copy-bare-received-into).
			name: "a migration's copy a lie filled, its discard cut by a crash, is dropped, not received into for good",
			seed: 9773987,
			keep: []int{8, 13, 14, 15, 25, 26, 36, 39, 44, 45, 46, 56, 57, 58, 69},
		},
		{
			// Node 3's plugin died inside the swap of 0002's whole copy
			// (received beside at 1m43s, verified, marked for the
			// replica; the old replica dropped), before the rename. Its
			// next round finished the swap and ended there: the replica
			// stood at 1m43s's data until the round after, 1m24s old
			// with every = 30s (XR6). A round that finishes a swap an
			// earlier process began now pulls the increment too
			// (model.ReplicaPullSwapResumed; mutant
			// replica-resumed-swap-ends-round).
			name: "a round that finishes a swap a crash cut pulls the increment too",
			seed: 9783720,
			keep: []int{18, 21, 24, 26, 38, 39, 40, 48, 50, 51, 56, 57, 58, 62, 63},
		},
		{
			// The harness's own bug: the plugins could not reach each
			// other from 7m02s to 8m23s, and a client step's Reserve
			// waited through the end of it; the wait cleared the link's
			// fault, so XR6's calm began at the fault's start, and at
			// 8m33s node 1's replica, pulled last before the cut, was
			// held to the bound 10 s after the link came back. The calm
			// now begins when the link is back.
			name: "XR6's calm begins when the link is back, whatever event passed that time",
			seed: 9790014,
			keep: []int{3, 7, 8, 19, 21, 24, 32, 34, 37, 38, 41, 42, 43, 45, 46, 47, 48},
		},
		{
			// The harness's own bug: 0001 was lost with node 3 (cut off),
			// an update placed 0002 of its name on node 1, naming no
			// predecessor, and node 3 came back. A "forged" request from
			// node 1 naming 0002 as 0001's replacement was answered: it
			// is the one replacement the sender admits without the link
			// (docs/security.md), not a forgery. The forger no longer
			// names such an allocation from its own node.
			name: "a request naming the replacement Nomad does not name, from its node, is no forgery",
			seed: 9791579,
			keep: []int{7, 9, 11, 17, 19, 21, 25, 26, 36, 37, 43},
		},
		{
			// The harness's own bug, as seed 9790014's: node 2's pool was
			// full until the event whose time passed its end, and that
			// event's own advance gave the pool room and forgot when the
			// fault ended, so XR6 held node 2's replica to the bound at
			// once. The calm now begins when the pool has room.
			name: "XR6's calm begins when a full pool has room again",
			seed: 9794674,
			keep: []int{11, 16, 24, 26, 27, 28, 30, 31, 33, 34, 35, 36, 37},
		},
		{
			// A replacement's Reserve took a replica over while node 2's
			// replica round held the replica's lock through a fetch from
			// the lost holder, stalled by a hostile sender; the takeover
			// waited on that lock without a clock, and the simulation
			// hung (the stall ends only as time passes). The takeover now
			// only tries the replica's and the parked name's locks;
			// busy, the Reserve looks again after a pause.
			name: "a takeover does not block on a replica a round holds",
			seed: 9799903,
		},
		{
			// The harness's own bug: node 1 pulled 0001's final data whole
			// (@migrate-1, then @migrate-final; a lie sent as @migrate-2
			// in between was refused, "destination exists") and began its
			// claim: the copy's transfer snapshots go first, while it is
			// parked and unmounted (model.PlanClaim), and the plugin died
			// before the rename onto the slot. Node 2 had rightly released
			// its parked data; X2 looked only at snapshots and mounted
			// filesystems, so the data in the unmounted copy's own files
			// counted as none. 0002 then started with it. X2 now reads a
			// filesystem's files mounted or not.
			name: "a claimed copy stripped of its snapshots, unmounted, still holds the data",
			seed: 9760692,
			keep: []int{11, 17, 18, 28, 31, 34, 46, 48, 52, 62, 67, 70, 73, 76},
		},
		{
			// The harness's own bug: 0001 failed on node 3 two seconds
			// after it started, and node 3 was lost for good, pool and
			// all, before 0001's replacement 0002 could pull its final
			// data; X2 wanted that data somewhere. Data gone with its node
			// before any other node held a whole copy is owed no more
			// (what a replica cannot do, docs/node-loss.md).
			name: "final data lost with its node before any copy is owed no more",
			seed: 9760092,
			keep: []int{4, 9, 14, 20, 24},
		},
		{
			// A lying holder (node 3) sent foreign data as 0001's first
			// replica snapshot while node 2's pool was full: the receive
			// was cut, and its resume token named the liar's snapshot,
			// which node 3's zfs cannot decode. The holder's send loop
			// failed on it as on any error ("internal"), so node 2 kept
			// its partial receive and resumed the token on every pull,
			// for good (XR6). A token the sender's zfs cannot decode is
			// now refused (model.DecideReplicaSendMove, DecideSendMove:
			// ErrResumeRefused; transfer.Server: "resume_refused"), and
			// node 2 aborts its receive and asks again without it.
			name: "a resume token the holder cannot decode is refused, not resumed for good",
			seed: 9710293,
			keep: []int{16, 30, 44, 55, 62, 64, 67},
		},
		{
			// The same refusal reached another way, in a world keeping
			// two copies: node 3's first pull of 0004's replica
			// (@replica-1) stalled, then ended with the sending plugin's
			// death; node 2 pulled on meanwhile, and node 1 dropped
			// @replica-1 (its bookmark kept) once no pull needed it as
			// a base. Node 3's token named a snapshot node 1 no longer
			// had: it resumed it on every pull, node 1's zfs could not
			// decode it, and node 3 held no replica after the settle
			// (XR6). Not the loop's pause: a failure's pause grows to
			// the shortest `every` at most (model.RetryWait), within
			// XR6's bound.
			name: "a resume token naming a snapshot the holder has since dropped",
			seed: 9720926,
			keep: []int{0, 3, 19, 21, 22, 29, 47, 48, 50, 56, 60, 64, 66, 67, 68, 69, 70, 71, 72, 73, 76, 77},
		},
		{
			// The harness's own bug: 0003 failed on node 1 and 0004
			// restarted on its slot; the holder sent @replica-1, taken
			// for 0003's replica at +36s, again as the first snapshot of
			// 0004's on node 3 at +67s. XR6 counts a snapshot's delay
			// from its taking to its arrival as its transfer, but took
			// the arrival per node and guid: node 3 had the guid since
			// +36s, in 0003's replica, and XR6 read "46s old, its
			// transfer 0s". The arrival is now per replica.
			name: "a snapshot sent again to a node holding it in another allocation's replica",
			seed: 9730078,
			keep: []int{2, 8, 18, 42, 55, 58, 61, 68},
		},
		{
			// A lying holder (node 3) sent foreign data as the first
			// snapshot of 0001's replica on node 1: the receive completed
			// into the replica's own name, and node 1's plugin died
			// before its check of the guid (a zfs list of the replica).
			// The foreign snapshot stood as the replica's newest, with
			// the plugin's marks, until a later pull replaced it, and a
			// takeover meanwhile would have claimed it (XR1). A first
			// snapshot is now received beside the replica, as a whole
			// stream is, and put in its place only by the round whose
			// check passed; a complete copy beside that no check passed
			// is discarded by the next round (model.DecideReplicaPullMove:
			// fetch, settleBeside; mutant replica-beside-swapped-unverified).
			name: "a liar's first replica snapshot, then the receiving plugin's death before its check",
			seed: 9730813,
			keep: []int{5, 9, 15, 16, 17, 19},
		},
		{
			// Found on branch xr1 by its own first cut of the rule above,
			// which left a first snapshot whose check failed (a forged
			// guid) beside the replica for the next round to discard:
			// node 1 came back, the rendezvous then chose it for 0002's
			// replica, and node 2, no longer chosen, keeps what it holds
			// while the allocation runs: no round of node 2 pulled it
			// again, and the liar's copy waited beside for good (XR4). What
			// a fetch whose check failed received beside is now dropped
			// in that round (model.DecideReplicaPullMove,
			// ReplicaPullUnverified).
			name: "a first replica snapshot that failed its check, then the node no longer chosen",
			seed: 18,
			keep: []int{47, 48, 68, 69, 72, 74, 77},
		},
		{
			// The harness's own bug, once first snapshots came beside:
			// node 1's first pull of 0005's replica stalled, then came in
			// whole beside it as node 1's plugin died before its check;
			// the next round discarded that copy and pulled the same
			// snapshot again (the holder sends its newest again). XR6
			// took the snapshot's arrival from the discarded copy (10 s
			// early), and held the replica to a transfer shorter than
			// its own. A snapshot beside a replica arrives, for XR6 (and
			// counts, for XR1 and XR6), only once its swap began.
			name: "a first snapshot discarded unverified and pulled again: its transfer ends when it is verified",
			seed: 9740356,
			keep: []int{5, 17, 18, 20, 22, 23, 27, 29, 35, 41, 43, 44, 51, 52, 56, 59, 63, 64, 66, 68, 75, 76, 79},
		},
		{
			// Node 1's plugin died before the rename of a swap that put
			// 0001's first replica snapshot in place: the copy beside
			// was marked for the replica, none there yet. 0001 was lost
			// with node 3; past sticky_wait node 1 dropped the replica
			// every round, but the drop's plan for the copy beside
			// (PlanDropCopy) took only a copy marked for itself as the
			// plugin's, and left it: XR4 at quiescence. A gap of the
			// whole stream beside before branch xr1, met once first
			// snapshots came beside too. The drop now takes a copy
			// beside marked for its replica as well
			// (model.planDropBeside, besideOurs).
			name: "a replica dropped after a crash inside its first swap takes the copy beside",
			seed: 9740435,
			keep: []int{12, 21, 23, 50, 51, 57, 64},
		},
		{
			// Node 2's first pull of 0001's replica was cut by the
			// holder's plugin death; node 2's loop had no turn for 83 s
			// (a tick), and meanwhile node 1's pulls made node 3 drop
			// @replica-1, which node 2's token named. At its next turn
			// node 2's resume was refused, it discarded the partial
			// receive and ended the round: no replica past XR6's bound
			// (and on main's code as well). The round now asks again at
			// once without the token (model.DecideReplicaPullMove,
			// ReplicaPullAbort; a second refusal ends it).
			name: "a refused resume token is discarded and the replica asked again in the same round",
			seed: 9740540,
			keep: []int{3, 5, 6, 9, 14, 29, 30, 33, 34},
		},
		{
			// docs/node-loss.md, finding (c): node 1, cut off, is back
			// as the servers place 0004 (without naming 0003, lost under
			// stop_after_client_disconnect) on node 2, which holds
			// 0003's replica; node 1's client reports 0003 complete 20 s
			// later, before the takeover time. 0004 started empty after
			// migrate.timeout: its Reserve paired only with a lost 0003,
			// node 1 kept 0003's data aside rather than parked, and its
			// sender would have refused an unlinked 0004. It now pairs
			// with 0003 ended, node 1 parks the data, node 2 pulls it,
			// and 0004 starts with 0003's final data. (The world saw it
			// only once its watcher read the servers' desired
			// description, as allocwatch does.)
			name:     "a partition healed before the takeover: the unlinked replacement gets the final data",
			seed:     9750031,
			unlinked: 1,
		},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			events := GenerateX(tc.seed, 80)
			if tc.keep != nil {
				events = Keep(events, tc.keep)
			}
			r, c := PlayX(tc.seed, events, Options{Dir: t.TempDir()})
			if r.Failed() {
				t.Fatalf("%s\n%s", r.Violations[0], strings.Join(r.Timeline, "\n"))
			}
			if c.Takeovers < tc.takeovers {
				t.Fatalf("%d replicas taken over, want %d\n%s", c.Takeovers, tc.takeovers, strings.Join(r.Timeline, "\n"))
			}
			if c.HandedOverUnlinked < tc.unlinked {
				t.Fatalf("%d hand-overs to a replacement Nomad does not name, want %d\n%s", c.HandedOverUnlinked, tc.unlinked,
					strings.Join(r.Timeline, "\n"))
			}
		})
	}
}
