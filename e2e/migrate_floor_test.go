//go:build e2e

package e2e

import (
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"
)

// The floor of a cutover (docs/performance.md, "The cutover: A's end to
// B's Reserve"): the steps a migration's cutover cannot do without, done
// by hand with the zfs CLI in the same guest, on the same pools, right
// after the measured cutover: node 1's rename of the data aside, the last
// increment sent locally (`zfs send -i | zfs receive`, no network, no
// TLS), and node 2's rename of the copy onto its slot. The plugin's
// cutover is held to twice their sum.

// floorTimes are the floor's figures, each one command (or one pipe).
type floorTimes struct {
	snapshot time.Duration // the sender's last snapshot (not in the sum: see measureFloor)
	rename1  time.Duration // node 1's rename
	sendRecv time.Duration // zfs send -i @a @b | zfs receive -u, locally
	bytes    int64         // the increment's size, as zfs send -nP estimates it
	rename2  time.Duration // node 2's rename
}

// sum is the floor: the two renames and the increment.
func (f floorTimes) sum() time.Duration { return f.rename1 + f.sendRecv + f.rename2 }

// measureFloor does the cutover's steps by hand on datasets of the same
// shape as the measured one's, outside the plugins' parents (nothing of
// the agents' sees them): on node 1's pool a filesystem with mib MiB of
// random data, snapshot @a, received whole into node 2's pool unmounted
// (as the pre-copy is; not timed); then change MiB of it overwritten in
// place with random data prepared beforehand (as A does as it ends) and
// snapshot @b. Timed: the rename of the source aside (node 1's park is
// that rename), the increment @a..@b sent into the copy, the copy's
// rename (node 2's claim is that rename). The snapshot is timed too, for
// the record: the sender takes its final snapshot before it sends, and
// node 1's park and the final snapshot both come before the increment.
func measureFloor(t *testing.T, c *testCluster, mib, change, round int) floorTimes {
	t.Helper()
	p1, p2 := c.Nodes[0].Pool.Name, c.Nodes[1].Pool.Name
	name := fmt.Sprintf("floor-%dmib-%d", mib, round)
	src, parked := p1+"/"+name, p1+"/"+name+"-parked"
	dst, claimed := p2+"/"+name, p2+"/"+name+"-claimed"
	t.Cleanup(func() {
		for _, ds := range []string{src, parked, dst, claimed} {
			_, _ = runErr("zfs", "destroy", "-r", ds)
		}
	})
	run(t, "zfs", "create", src)
	mnt := strings.TrimSpace(run(t, "zfs", "get", "-H", "-o", "value", "mountpoint", src))
	changeFile := filepath.Join(t.TempDir(), "change")
	run(t, "dd", "if=/dev/urandom", "of="+filepath.Join(mnt, "big"), "bs=1M", fmt.Sprintf("count=%d", mib))
	run(t, "dd", "if=/dev/urandom", "of="+changeFile, "bs=1M", fmt.Sprintf("count=%d", change))
	run(t, "sync")
	run(t, "zfs", "snapshot", src+"@a")
	if _, err := pipeZFS([]string{"send", src + "@a"}, []string{"receive", "-u", dst}); err != nil {
		t.Fatalf("the floor's base: %v", err)
	}
	run(t, "dd", "if="+changeFile, "of="+filepath.Join(mnt, "big"), "bs=1M", "conv=notrunc")

	var f floorTimes
	var err error
	f.snapshot = timed(t, "zfs", "snapshot", src+"@b")
	f.rename1 = timed(t, "zfs", "rename", src, parked)
	f.bytes = sendSize(t, parked+"@a", parked+"@b")
	if f.sendRecv, err = pipeZFS([]string{"send", "-i", "@a", parked + "@b"}, []string{"receive", "-u", dst}); err != nil {
		t.Fatalf("the floor's increment: %v", err)
	}
	f.rename2 = timed(t, "zfs", "rename", dst, claimed)
	return f
}

// timed runs one command and returns how long it took.
func timed(t *testing.T, name string, args ...string) time.Duration {
	t.Helper()
	start := time.Now()
	run(t, name, args...)
	return time.Since(start)
}

// pipeZFS runs `zfs <send...> | zfs <recv...>` and returns how long the
// pipe took, from the sender's start to the receiver's end.
func pipeZFS(send, recv []string) (time.Duration, error) {
	pr, pw, err := os.Pipe()
	if err != nil {
		return 0, err
	}
	var sendErr, recvErr strings.Builder
	s, r := exec.Command("zfs", send...), exec.Command("zfs", recv...)
	s.Stdout, s.Stderr = pw, &sendErr
	r.Stdin, r.Stderr = pr, &recvErr
	start := time.Now()
	if err := r.Start(); err != nil {
		pr.Close()
		pw.Close()
		return 0, err
	}
	serr := s.Start()
	pw.Close()
	pr.Close()
	if serr == nil {
		serr = s.Wait()
	}
	rerr := r.Wait()
	took := time.Since(start)
	if serr != nil || rerr != nil {
		return 0, fmt.Errorf("zfs %s | zfs %s: %v (%s), %v (%s)", strings.Join(send, " "), strings.Join(recv, " "),
			serr, strings.TrimSpace(sendErr.String()), rerr, strings.TrimSpace(recvErr.String()))
	}
	return took, nil
}

// sendSize is zfs send's estimate of the increment from..to in bytes.
func sendSize(t *testing.T, from, to string) int64 {
	t.Helper()
	// -n prints to stdout in OpenZFS 2.1, to stderr in some older
	// releases: both are read.
	out, err := exec.Command("zfs", "send", "-nP", "-i", from, to).CombinedOutput()
	if err != nil {
		t.Fatalf("zfs send -nP -i %s %s: %v: %s", from, to, err, out)
	}
	for _, l := range strings.Split(string(out), "\n") {
		if f := strings.Fields(l); len(f) == 2 && f[0] == "size" {
			n, _ := strconv.ParseInt(f[1], 10, 64)
			return n
		}
	}
	return 0
}
