package model_test

import (
	"fmt"
	"math/rand/v2"
	"slices"
	"testing"
	"time"

	"github.com/nomad-device-zfs/nomad-device-zfs/model"
)

// TestReplicaWorld runs the replica rules together over a small world in
// simulated seconds (300 schedules, 100 with -short), as the lifecycle will run them (an executable spec
// for issue 30's proof, ahead of sim/): allocation A writes on node n0; the
// nodes ReplicaNodes chooses pull from it every `every` (DecideReplica,
// DecideReplicaSend, increments taking 1-15 s, some cut); n0 is cut off at
// a random time; Nomad marks A lost, A's client stops it as Nomad 1.6.2
// does, Nomad places B, and B claims the newest replica when
// DecideTakeover says so. Invariants, after every schedule:
//
//   - never two writers: B's first write is after A's last one, by the
//     true clock, with every clock off by up to 10 s;
//   - B claims the newest replica any node holds, and it is at least as
//     new as the newest any node had when n0 was cut off;
//   - the data lost is bounded: with no stream cut, the claimed replica
//     was taken on the holder no more than every + one transfer (15 s)
//     before the cut;
//   - the holder keeps at most two replica snapshots and
//     ReplicaBookmarksKept bookmarks; the replica nodes' set is the same
//     before and after the loss.
func TestReplicaWorld(t *testing.T) {
	schedules := uint64(300)
	if testing.Short() {
		schedules = 100
	}
	for seed := range schedules {
		t.Run(fmt.Sprint(seed), func(t *testing.T) { replicaWorld(t, seed) })
	}
}

// replica is what a replica node holds: its newest snapshot's number,
// guid, the holder's data version in it and when the holder took it.
type replica struct {
	n        int
	guid     uint64
	version  int
	takenAt  time.Time
	pulling  bool
	doneAt   time.Time
	incoming replica0
}

// replica0 is a stream in flight: what it will bring.
type replica0 struct {
	n       int
	guid    uint64
	version int
	takenAt time.Time
}

func replicaWorld(t *testing.T, seed uint64) {
	r := rand.New(rand.NewPCG(seed, 30))
	const alloc, holder = "a11ca11c-0000-4000-8000-00000000000a", "n0"
	cfg := model.Replicate{Copies: 2, Every: time.Minute}
	cuts := seed%2 == 1 // odd seeds cut streams; even ones check the bound on data lost
	var nodes []model.ReplicaNode
	for i := range 5 {
		nodes = append(nodes, model.ReplicaNode{ID: fmt.Sprintf("n%d", i), Ready: true, Offers: true, Spread: fmt.Sprintf("dc%d", i%3)})
	}
	set := model.ReplicaNodes(alloc, holder, cfg.Copies, nodes)
	if len(set) != 2 || slices.Contains(set, holder) {
		t.Fatalf("replica nodes %v", set)
	}
	skew := func() time.Duration { return time.Duration(r.Int64N(int64(20*time.Second))) - 10*time.Second }
	serverSkew, clientSkew, pluginSkew := skew(), skew(), skew()
	d := []time.Duration{10 * time.Second, 30 * time.Second, time.Minute}[r.IntN(3)]
	kill := []time.Duration{0, 5 * time.Second, 20 * time.Second}[r.IntN(3)]

	t0 := time.Date(2026, 11, 28, 4, 0, 0, 0, time.UTC)
	cutAt := t0.Add(time.Duration(3+r.IntN(15)) * time.Minute) // n0's last good heartbeat
	lostAt := cutAt.Add(20 * time.Second)                      // the servers' TTL and grace
	// A's client stops A at its first check after cutAt + D, by its
	// clock; A writes on through its kill timeout.
	interval := min(5*time.Second, d)
	stopAt := cutAt
	for !stopAt.Add(clientSkew).After(cutAt.Add(clientSkew).Add(d)) {
		stopAt = stopAt.Add(interval)
	}
	aLastWrite := stopAt.Add(max(kill, 5*time.Second))
	placeB := lostAt.Add(d + max(kill, 5*time.Second)) // WaitClientStop, by the servers' clock

	// The holder's slot: its replica snapshots and bookmarks, by name.
	slot := "tank/nomad/pg/pg-1"
	snaps, marks := map[string]uint64{}, map[string]uint64{}
	snapAt := map[string]time.Time{}
	snapVersion := map[string]int{}
	guid := uint64(1000)
	reps := map[string]*replica{}
	for _, id := range set {
		reps[id] = &replica{}
	}
	newestAtCut := 0
	version := 0
	var claimed *replica
	var bFirstWrite time.Time
	a := model.Alloc{ID: alloc, NodeID: holder, ClientStatus: model.ClientRunning, DesiredStatus: model.DesiredRun}
	for now := t0; now.Before(placeB.Add(10 * time.Minute)); now = now.Add(time.Second) {
		if !now.After(aLastWrite) {
			version++ // A writes
		}
		if now.Equal(cutAt) {
			for _, rp := range reps {
				newestAtCut = max(newestAtCut, rp.version)
			}
		}
		if !now.Before(lostAt) && a.ClientStatus != model.ClientLost {
			a.ClientStatus, a.DesiredStatus, a.ModifyTime = model.ClientLost, model.DesiredStop, lostAt
			nodes[0].Ready = false
			if after := model.ReplicaNodes(alloc, holder, cfg.Copies, nodes); !slices.Equal(after, set) {
				t.Fatalf("the replica nodes changed with the holder's loss: %v → %v", set, after)
			}
		}
		// The replica nodes.
		for _, id := range set {
			rp := reps[id]
			if rp.pulling && !now.Before(rp.doneAt) {
				rp.pulling = false
				if now.Before(cutAt) {
					rp.n, rp.guid, rp.version, rp.takenAt = rp.incoming.n, rp.incoming.guid, rp.incoming.version, rp.incoming.takenAt
				}
			}
			dec := model.DecideReplica(model.Replica{Source: alloc, Newest: rp.n, NewestAt: rp.takenAt},
				model.ReplicaInput{Replica: cfg, StickyWait: time.Hour, Source: a, Found: true, Chosen: true, Now: now,
					Takeover: model.DecideTakeover(lossOf(a, lostAt.Add(serverSkew), d, kill), now.Add(pluginSkew))})
			if dec.Fate == model.ReplicaDrop && claimed == nil {
				t.Fatalf("%s: %s's replica dropped before any claim: %s", now, id, dec.Why)
			}
			if dec.Fate != model.ReplicaPull || rp.pulling || now.Before(dec.At) || !now.Before(cutAt) {
				continue
			}
			rs, err := model.DecideReplicaSend(replicaSendInput(slot, rp.guid, snaps, marks))
			if err != nil {
				t.Fatal(err)
			}
			if rs.StartOver {
				t.Fatalf("%s: %s must start over from %d", now, id, rp.guid)
			}
			if rs.Take != "" {
				guid++
				snaps[rs.Take], snapAt[rs.Take], snapVersion[rs.Take] = guid, now, version
			}
			if rs.TakeBookmark != "" {
				marks[rs.TakeBookmark] = snaps[rs.Snapshot]
			}
			n, _ := model.ReplicaNumber(rs.Snapshot[len(slot)+1:])
			rp.incoming = replica0{n: n, guid: snaps[rs.Snapshot], version: snapVersion[rs.Snapshot], takenAt: snapAt[rs.Snapshot]}
			rp.pulling, rp.doneAt = true, now.Add(time.Duration(1+r.IntN(15))*time.Second)
			if cuts && r.IntN(4) == 0 {
				rp.doneAt = now.Add(time.Hour) // cut: never completes; the next pull asks again
				rp.pulling = false
			}
			for _, s := range rs.DropSnapshots {
				delete(snaps, s)
			}
			for _, b := range rs.DropBookmarks {
				delete(marks, b)
			}
			if len(snaps) > 2 || len(marks) > model.ReplicaBookmarksKept {
				t.Fatalf("%s: the holder keeps %d snapshots, %d bookmarks", now, len(snaps), len(marks))
			}
		}
		// B, once Nomad placed it, claims when DecideTakeover says so.
		if claimed == nil && !now.Before(placeB.Add(serverSkew)) {
			got := model.DecideTakeover(lossOf(a, lostAt.Add(serverSkew), d, kill), now.Add(pluginSkew))
			if got.Verdict == model.TakeoverNever {
				t.Fatalf("%s: B may never claim: %s", now, got.Why)
			}
			if got.Verdict == model.TakeoverClaim {
				for _, id := range set {
					if rp := reps[id]; claimed == nil || rp.version > claimed.version {
						claimed = rp
					}
				}
				bFirstWrite = now
			}
		}
	}
	switch {
	case claimed == nil:
		t.Fatal("B never claimed a replica")
	case bFirstWrite.Before(aLastWrite):
		t.Fatalf("two writers: B wrote at %s, A until %s", bFirstWrite, aLastWrite)
	case claimed.version < newestAtCut:
		t.Fatalf("B claimed version %d, older than the newest at the cut (%d)", claimed.version, newestAtCut)
	case claimed.n == 0:
		t.Fatal("B claimed an empty replica")
	case !cuts && cutAt.Sub(claimed.takenAt) > cfg.Every+15*time.Second:
		t.Fatalf("data lost: the claimed replica was taken %s before the cut, more than every + one transfer",
			cutAt.Sub(claimed.takenAt))
	}
}

// lossOf is what the servers would answer of a, lost at lostAt by their
// clock, its group stopping after d with kill timeout kill.
func lossOf(a model.Alloc, lostAt time.Time, d, kill time.Duration) model.LostAlloc {
	l := model.LostAlloc{ID: a.ID, ClientStatus: a.ClientStatus, StopAfter: d, KillTimeout: kill}
	if a.ClientStatus == model.ClientLost {
		l.LostAt = lostAt
	}
	return l
}
