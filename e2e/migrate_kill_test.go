//go:build e2e

package e2e

import (
	"context"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/hashicorp/nomad/api"
)

// killMiB is the data of TestMigrateSenderKilled: at the 2-4 MiB/s the
// transfer moves in the emulated guest (docs/performance.md), its stream
// takes 15-30 s, so there is time to see it under way and cut it; on an
// idle guest the test takes about two minutes.
const killMiB = 64

// TestMigrateSenderKilled: the plugin sending a migration's data is
// killed (SIGKILL) in the middle of the stream. Nomad launches it again;
// the receiving node's next request carries its partial receive's
// receive_resume_token, the new sending plugin resumes the stream from
// there (less than the data is sent again), and the copy completes. The
// replacement's task then reads the old one's data, history and checksum
// of the big file; the old node lets its data go only after the new node
// has the final copy, and neither node keeps anything of the migration:
// no @migrate snapshot, no partial receive, no copy.
func TestMigrateSenderKilled(t *testing.T) {
	t.Parallel()
	c, n1, n2 := dataCluster(t, "e2emigkill")
	srv, node1, node2 := c.Server, c.Nodes[0], c.Nodes[1]
	stopAtCleanup(t, srv, "killed")

	srv.RunJob(t, bigData{Version: "1", MiB: killMiB, Hold: true, Sum: true, Group: toNode(n1)}.job("killed"))
	a, outA := waitRunningWithin(t, srv, "killed", "appended v1", jobTimeout+killMiB*time.Second/4)
	if a.NodeID != n1 {
		t.Fatalf("v1 on node %s, want node 1 %s", a.NodeID, n1)
	}
	// Registered after stopAtCleanup, so it runs first: a stopped holder
	// would otherwise wait out its kill_timeout.
	t.Cleanup(func() { _ = letGo(node1, a.ID) })
	big := bigLine(t, outA)
	slotA := deviceID(t, a)
	waitHolder(t, node1.Pool.Parent+"/state/"+slotA, a.ID)
	copyName := node2.Pool.Parent + "/state/parked-" + a.ID + "-" + slotA

	// The update moves the service to node 2: Nomad stops v1, which holds
	// on, and node 2 pulls its data while v2 waits for it to end.
	srv.RunJob(t, bigData{Version: "2", MiB: killMiB, Sum: true, Group: toNode(n2)}.job("killed"))
	cutAt := waitUnderWay(t, node2, a.ID, copyName)
	pids := pluginPIDs(t, node1.Agent)
	if len(pids) != 1 {
		t.Fatalf("node 1's plugin processes %v, want exactly one", pids)
	}
	killed := time.Now()
	killProcess(t, pids[0])
	t.Logf("killed node 1's plugin (pid %d) with %d of %d MiB received", pids[0], cutAt>>20, killMiB)
	waitFor(t, 60*time.Second, "node 1's plugin launched again", func() (bool, string) {
		now := pluginPIDs(t, node1.Agent)
		return len(now) == 1 && now[0] != pids[0], fmt.Sprintf("plugin processes %v", now)
	})
	t.Logf("node 1's plugin running again %s after the kill", time.Since(killed).Round(100*time.Millisecond))

	// The stream resumes from node 2's token and completes.
	var received string
	waitFor(t, jobTimeout+killMiB*time.Second, "node 2 to receive the rest of the copy, resumed", func() (bool, string) {
		lines := logLines(node2.Logs(), "alloc_id", a.ID, "transfer", "received: ")
		if len(lines) > 0 {
			received = lines[0]
		}
		return received != "", "pulls: " + lastLine(node2.Logs(), "pulling the copy failed", a.ID)
	})
	if logField(received, "resumed") != "true" || !strings.Contains(logField(received, "snapshot"), "@migrate-1") {
		t.Fatalf("node 2's first copy after the kill is not the cut stream resumed: %s", received)
	}
	// The killed process logged nothing of its stream: node 1's first
	// "sent" is the new process's.
	sent := logLines(node1.Logs(), "alloc_id", a.ID, "transfer", "sent: ")
	if len(sent) == 0 || logField(sent[0], "resumed") != "true" {
		t.Fatalf("node 1's first stream sent whole is not a resumed one: %v", sent)
	}
	if n := logBytes(sent[0], "bytes"); n <= 0 || n >= killMiB<<20 {
		t.Errorf("the resumed stream carried %d bytes, want less than the %d MiB of a whole one: %s", n, killMiB, sent[0])
	}
	t.Logf("cut: %s", lastLine(node2.Logs(), "pulling the copy failed", a.ID))
	t.Logf("resumed: node 1 %s; node 2 %s", sent[0], received)

	// v1 ends; v2 starts with its data.
	if err := letGo(node1, a.ID); err != nil {
		t.Fatal(err)
	}
	b, outB := waitRunningWithin(t, srv, "killed", "appended v2", jobTimeout+killMiB*time.Second, a.ID)
	if b.NodeID != n2 {
		t.Fatalf("v2 on node %s, want node 2 %s", b.NodeID, n2)
	}
	if want := "found: " + historyLine("1", a); !strings.Contains(outB, want) {
		t.Errorf("v2 found %q, want %q: the history did not follow", outB, want)
	}
	if got := bigLine(t, outB); got != big {
		t.Errorf("v2 read %q of the big file, v1 wrote %q", got, big)
	}
	a = waitAllocStatus(t, srv, a.ID, api.AllocClientStatusComplete)
	dsB := node2.Pool.Parent + "/state/" + deviceID(t, b)
	waitHolder(t, dsB, b.ID)
	checkDataOnlyIn(t, node2.Pool, dsB, historyLine("1", a), historyLine("2", b))

	// Node 1 lets v1's data go only once node 2 has the final copy.
	waitFor(t, releaseTimeout, "v1's data gone from node 1", func() (bool, string) {
		pk := parkedBelow(t, node1.Pool.Parent+"/state")
		return len(pk) == 0, fmt.Sprintf("parked: %v", pk)
	})
	final := lastLine(node2.Logs(), "received the final copy from the allocation's node", copyName)
	release := lastLine(node1.Logs(), "releasing parked data", "parked-"+a.ID)
	finalAt, ok1 := lineTime(final)
	releaseAt, ok2 := lineTime(release)
	if !ok1 || !ok2 || releaseAt.Before(finalAt) {
		t.Errorf("node 1 released v1's data before node 2 had the final copy:\nnode 2: %s\nnode 1: %s", final, release)
	}
	for _, n := range c.Nodes {
		waitFor(t, releaseTimeout, "nothing of the migration left on "+n.Pool.Name, func() (bool, string) {
			left := migrationLeftovers(t, n.Pool.Parent)
			return len(left) == 0, strings.Join(left, "; ")
		})
	}
}

// bigLine is the "big: ..." line a bigDataScript task printed.
func bigLine(t testing.TB, out string) string {
	t.Helper()
	for _, l := range strings.Split(out, "\n") {
		if strings.HasPrefix(l, "big: ") {
			return l
		}
	}
	t.Fatalf("the task printed no big: line: %q", out)
	return ""
}

// waitUnderWay waits until node's copy of allocation prev's data is
// being received, with some of it on disk: the partial receive's
// receive_resume_token (which zfs updates as each transaction group
// syncs) says it holds more than nothing. It returns how much. A copy
// that arrives whole first fails the test: the data is then too small to
// cut in this guest.
func waitUnderWay(t *testing.T, node *clusterNode, prev, copyName string) int64 {
	t.Helper()
	var got int64
	waitFor(t, jobTimeout+killMiB*time.Second, "the stream of "+copyName+" under way", func() (bool, string) {
		if l := logLines(node.Logs(), "alloc_id", prev, "transfer", "received: "); len(l) > 0 {
			t.Fatalf("%s arrived whole before the test could cut its stream: %s", copyName, l[0])
		}
		ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
		defer cancel()
		token, err := zc.ResumeToken(ctx, copyName)
		if err != nil || token == "" {
			return false, fmt.Sprintf("no resume token (%v)", err)
		}
		rt, err := zc.DecodeResumeToken(ctx, token)
		if err != nil {
			return false, fmt.Sprintf("decoding the resume token: %v", err)
		}
		got = int64(rt.Bytes)
		return got > 0, fmt.Sprintf("a resume token of %d bytes", got)
	})
	return got
}

// migrationLeftovers lists what a migration may leave below parent and
// must not once it is over: a copy or parked data (parked-*), a
// migration's snapshot (@migrate-*, @migrated), a partial receive (a
// resume token).
func migrationLeftovers(t testing.TB, parent string) []string {
	t.Helper()
	all, err := lookupAll(parent)
	if err != nil {
		t.Fatalf("zfs list %s: %v", parent, err)
	}
	var left []string
	for _, name := range keys(all) {
		_, snap, isSnap := strings.Cut(name, "@")
		switch {
		case isSnap && (strings.HasPrefix(snap, "migrate") || snap == "migrated"):
			left = append(left, "snapshot "+name)
		case !isSnap && strings.Contains(name, "/parked-"):
			left = append(left, name+" ("+describeSlot(all[name])+")")
		}
	}
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	states, err := zc.ResumeTokens(ctx, parent)
	if err != nil {
		t.Fatalf("resume tokens below %s: %v", parent, err)
	}
	for _, s := range states {
		if s.Token != "" {
			left = append(left, "a partial receive into "+s.Dataset)
		}
	}
	return left
}
