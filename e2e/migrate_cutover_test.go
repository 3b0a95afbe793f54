//go:build e2e

package e2e

import (
	"flag"
	"fmt"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/hashicorp/nomad/api"
)

// The cutover of a migration, measured on a real cluster in the VM for
// docs/performance.md ("Moving data between nodes"): from the old
// allocation's end to its replacement's Reserve on the other node, for
// data of each size, pre-copied while the old allocation still stops and
// then changed by a few MiB before it ends. The target: the cutover does
// not grow with the data's size. Gigabytes take minutes to write and to
// pre-copy in the emulated guest, so it runs only when asked:
//
//	scripts/e2e.sh -test.run '^TestMigrateCutover$' -ndz.cutover 10,1024
//
// (bench/cutover.sh does that, with two disks for the two nodes' pools).
// Each size prints a "cutover ..." line, the figures, and a "cutover
// floor ..." line: the same steps by hand right after (measureFloor), and
// the ratio of the Reserve's return to their sum.
var (
	cutoverSizes  = flag.String("ndz.cutover", "", "comma-separated sizes in MiB of the data whose cutover is timed (empty: skip TestMigrateCutover)")
	cutoverChange = flag.Int("ndz.cutover-change", 10, "MiB of the data changed after the pre-copy, before the old allocation ends")
	cutoverRounds = flag.Int("ndz.cutover-rounds", 1, "cutovers timed per size")
	cutoverDisks  = flag.String("ndz.cutover-disks", "/dev/vda,/dev/vdb", "the block devices of the two nodes' pools")
)

// TestMigrateCutover: for each size of -ndz.cutover, a service on node 1
// writes that much random data and holds on once an update moves it to
// node 2; once node 2 has pre-copied it whole, the old allocation
// overwrites -ndz.cutover-change MiB of it and ends. It times, from the
// old task's end (Nomad's task state): node 1's park, node 2's final
// increment received, node 2's claim in the replacement's Reserve (the
// plugin's "claimed parked data", and its "reserved" as the Reserve
// returns), and the replacement's task start (Nomad's task state).
func TestMigrateCutover(t *testing.T) {
	if *cutoverSizes == "" {
		t.Skip("the cutover is timed only with -ndz.cutover (bench/cutover.sh)")
	}
	var sizes []int
	for _, f := range strings.Split(*cutoverSizes, ",") {
		n, err := strconv.Atoi(f)
		if err != nil || n < 1 {
			t.Fatalf("-ndz.cutover: %q is not a size in MiB", f)
		}
		sizes = append(sizes, n)
	}
	c, _, _ := dataCluster(t, "e2ecut", strings.Split(*cutoverDisks, ",")...)
	for _, mib := range sizes {
		for r := 1; r <= max(*cutoverRounds, 1); r++ {
			res := measureCutover(t, c, mib, r)
			fmt.Printf("cutover size_mib=%d round=%d change_mib=%d precopy_s=%.1f final_bytes=%d parked_s=%.1f final_received_s=%.1f claimed_s=%.1f reserved_s=%.1f task_started_s=%.1f claim_took=%s\n",
				mib, r, *cutoverChange, res.precopy.Seconds(), res.finalBytes, res.parked.Seconds(), res.finalReceived.Seconds(),
				res.claimed.Seconds(), res.reserved.Seconds(), res.started.Seconds(), res.claimTook)
			f := measureFloor(t, c, mib, *cutoverChange, r)
			fmt.Printf("cutover floor size_mib=%d round=%d snapshot_s=%.2f rename1_s=%.2f send_recv_s=%.2f bytes=%d rename2_s=%.2f floor_s=%.2f reserved_s=%.1f ratio=%.1f\n",
				mib, r, f.snapshot.Seconds(), f.rename1.Seconds(), f.sendRecv.Seconds(), f.bytes, f.rename2.Seconds(),
				f.sum().Seconds(), res.reserved.Seconds(), res.reserved.Seconds()/f.sum().Seconds())
		}
	}
}

// cutoverTimes are one cutover's figures: precopy from the update to the
// pre-copy's receipt, the rest from the old task's end.
type cutoverTimes struct {
	precopy       time.Duration
	finalBytes    int64
	parked        time.Duration // node 1 parked the old allocation's data
	finalReceived time.Duration // node 2 received the last increment
	claimed       time.Duration // node 2's Reserve claimed the copy
	reserved      time.Duration // node 2's Reserve returned
	started       time.Duration // the replacement's task started
	claimTook     string
}

// measureCutover runs job cut-<mib>mib-<round> through one migration from
// node 1 to node 2 and stops it.
func measureCutover(t *testing.T, c *testCluster, mib, round int) cutoverTimes {
	t.Helper()
	srv, node1, node2 := c.Server, c.Nodes[0], c.Nodes[1]
	n1, n2 := node1.NodeID(), node2.NodeID()
	job := fmt.Sprintf("cut-%dmib-%d", mib, round)
	stopAtCleanup(t, srv, job)
	grow := time.Duration(mib) * time.Second // 1 MiB/s, below the guest's slowest pace

	srv.RunJob(t, bigData{Version: "1", MiB: mib, Hold: true, Change: *cutoverChange, Group: toNode(n1)}.job(job))
	a, _ := waitRunningWithin(t, srv, job, "appended v1", jobTimeout+grow)
	if a.NodeID != n1 {
		t.Fatalf("%s: v1 on node %s, want node 1 %s", job, a.NodeID, n1)
	}
	t.Cleanup(func() { _ = letGo(node1, a.ID) })

	updated := time.Now()
	srv.RunJob(t, bigData{Version: "2", MiB: mib, Group: toNode(n2)}.job(job))
	var pre string
	waitFor(t, jobTimeout+grow, job+": node 2's pre-copy", func() (bool, string) {
		for _, l := range logLines(node2.Logs(), "alloc_id", a.ID, "transfer", "received: ") {
			if strings.HasSuffix(logField(l, "snapshot"), "@migrate-1") {
				pre = l
			}
		}
		return pre != "", "pulls: " + lastLine(node2.Logs(), "pulling the copy failed", a.ID)
	})
	var res cutoverTimes
	if at, ok := lineTime(pre); ok {
		res.precopy = at.Sub(updated)
	}
	if err := letGo(node1, a.ID); err != nil {
		t.Fatal(err)
	}
	b, out := waitRunningWithin(t, srv, job, "appended v2", jobTimeout+grow, a.ID)
	if want := fmt.Sprintf("big: %d bytes", mib<<20); b.NodeID != n2 || !strings.Contains(out, want) {
		t.Fatalf("%s: v2 on node %s (node 2: %s) printed %q, want %q", job, b.NodeID, n2, out, want)
	}
	a = waitAllocStatus(t, srv, a.ID, api.AllocClientStatusComplete)
	end := taskFinished(a)
	since := func(what, line string) time.Duration {
		at, ok := lineTime(line)
		if !ok {
			t.Fatalf("%s: no log line of %s", job, what)
		}
		return at.Sub(end)
	}
	res.parked = since("node 1's park", lastLine(node1.Logs(), "slot data parked for the allocation's replacement", a.ID))
	var final string
	for _, l := range logLines(node2.Logs(), "alloc_id", a.ID, "transfer", "received: ") {
		if strings.HasSuffix(logField(l, "snapshot"), "@migrate-final") {
			final = l
		}
	}
	res.finalReceived = since("node 2's final increment", final)
	res.finalBytes = logBytes(final, "bytes")
	claim := lastLine(node2.Logs(), "claimed parked data", "alloc_id="+b.ID)
	res.claimed = since("node 2's claim", claim)
	res.claimTook = logField(claim, "took")
	claimAt, _ := lineTime(claim)
	_, reserved := firstAfter(logLines(node2.Logs(), "", "", "reserved: ", deviceID(t, b)), claimAt)
	res.reserved = since("node 2's Reserve returning", reserved)
	res.started = taskStarted(b).Sub(end)
	t.Logf("%s: pre-copy %s\nfinal: %s\nclaim: %s\nreserved: %s", job, pre, final, claim, reserved)

	srv.StopJob(t, job, false)
	waitAllocStatus(t, srv, b.ID, api.AllocClientStatusComplete)
	for _, n := range c.Nodes {
		waitFor(t, releaseTimeout, job+": nothing of the migration left on "+n.Pool.Name, func() (bool, string) {
			left := migrationLeftovers(t, n.Pool.Parent)
			return len(left) == 0, strings.Join(left, "; ")
		})
	}
	return res
}
