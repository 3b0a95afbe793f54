//go:build e2e

package e2e

import (
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/nomad-device-zfs/nomad-device-zfs/transfer/transfertest"
)

// Migrations of data big enough to take a while in the emulated guest
// (TestMigrateSenderKilled, TestMigrateCutover): the old allocation writes
// the data and then, once Nomad stops it, keeps running until the test
// lets it end, so that the test decides when the pre-copy is over and when
// the cutover begins.

// dataCluster is migrateCluster for holding allocations: the nodes let a
// task's kill_timeout run to holdKill (Nomad caps it at 30 s by default),
// and disks, if given, are the nodes' pools' block devices, one per node.
func dataCluster(t *testing.T, name string, disks ...string) (*testCluster, string, string) {
	t.Helper()
	pki := transfertest.NewPKI(t, nomadBin)
	var specs []nodeSpec
	for i := 1; i <= 2; i++ {
		cfg := pki.Config(t, "127.0.0.1:"+freePort(t))
		transferHCL := fmt.Sprintf("transfer {\n  address   = %q\n  ca_file   = %q\n  cert_file = %q\n  key_file  = %q\n}\n",
			cfg.Address, cfg.CAFile, cfg.CertFile, cfg.KeyFile)
		s := nodeSpec{Pool: fmt.Sprintf("%s%d", name, i),
			Classes:  transferHCL + stickyClass(2, "  migrate {\n    timeout = \"30m\"\n  }\n"),
			ExtraHCL: fmt.Sprintf("client {\n  max_kill_timeout = %q\n}\n", holdKill)}
		if len(disks) >= i {
			s.Disk = disks[i-1]
		}
		specs = append(specs, s)
	}
	c := startCluster(t, heartbeats{}, specs...)
	for _, n := range c.Nodes {
		n.WaitForNodeDevice(t, "zfs", "dataset", "state", 2, deviceTimeout)
	}
	return c, c.Nodes[0].NodeID(), c.Nodes[1].NodeID()
}

// holdKill is how long a holding allocation may take to stop: far beyond
// any pre-copy the tests wait for, and never reached (the test lets it go,
// or its cleanup does).
const holdKill = "2h"

// bigData is one version of a service job whose task "t" (exec) holds a
// slot of class "state" and a file of MiB random MiB in it, /data/big.
type bigData struct {
	Version string
	// MiB is the size of /data/big, written if the slot has none.
	MiB int
	// Hold: once stopped, the task keeps running until the test lets it
	// go (letGo), then overwrites the first Change MiB of /data/big with
	// random data and exits.
	Hold   bool
	Change int
	// Sum: print /data/big's sha256 (seconds per 100 MiB in the guest).
	Sum bool
	// Group is added to the group (an affinity, an update block).
	Group string
}

// bigDataScript prints what the slot holds ("found: <history>" or "found
// nothing", then "big: <bytes> bytes[ sha256 <sum>]"), writes /data/big
// if there is none, appends "v<VERSION> <alloc ID>" to /data/history.txt
// and runs until stopped. The change is written to the task's local dir
// beforehand, so that the cutover's last increment carries it whatever the
// guest's random source costs.
const bigDataScript = `trap 'if [ -n "$HOLD" ]; then stop=1; else exit 0; fi' INT TERM; f=/data/history.txt; ` +
	`if [ -e "$f" ]; then echo "found: $(tr '\n' ' ' < "$f")"; else echo "found nothing"; fi; ` +
	`[ -e /data/big ] || { dd if=/dev/urandom of=/data/big bs=1M count="$MIB" 2>/dev/null && sync; }; ` +
	`s=""; [ -z "$SUM" ] || s=" sha256 $(sha256sum < /data/big | cut -d ' ' -f 1)"; echo "big: $(wc -c < /data/big) bytes$s"; ` +
	`[ "$CHANGE" = 0 ] || dd if=/dev/urandom of="$NOMAD_TASK_DIR/change" bs=1M count="$CHANGE" 2>/dev/null; ` +
	`echo "v$VERSION $NOMAD_ALLOC_ID" >> "$f" && echo "appended v$VERSION"; ` +
	`while :; do if [ -n "$stop" ] && [ -e "$NOMAD_TASK_DIR/finish" ]; then ` +
	`[ "$CHANGE" = 0 ] || dd if="$NOMAD_TASK_DIR/change" of=/data/big bs=1M conv=notrunc 2>/dev/null; exit 0; fi; sleep 1; done`

// job is the job's HCL.
func (v bigData) job(id string) string {
	hold, sum := "", ""
	if v.Hold {
		hold = "1"
	}
	if v.Sum {
		sum = "1"
	}
	return fmt.Sprintf(`job %q {
  type = "service"
  group "g" {
%s
    # Nomad wants the kill_timeout below the progress_deadline, and the
    # replacement's deployment must not fail while it waits minutes for
    # a pre-copy (the default healthy_deadline is 5m).
    update {
      min_healthy_time  = "1s"
      healthy_deadline  = "2h"
      progress_deadline = "3h"
    }
    task "t" {
      driver       = "exec"
      kill_timeout = %q
      env {
        VERSION = %q
        MIB     = "%d"
        HOLD    = %q
        CHANGE  = "%d"
        SUM     = %q
      }
      config {
        command = "/bin/sh"
        args    = ["-c", %q]
      }
      resources {
        cpu    = 100
        memory = 128
        device "zfs/dataset/state" {}
      }
    }
  }
}`, id, v.Group, holdKill, v.Version, v.MiB, hold, v.Change, sum, bigDataScript)
}

// letGo lets a holding allocation's task end (bigData.Hold), once Nomad
// has stopped it. An allocation whose directory is gone has ended already.
func letGo(a *clusterNode, allocID string) error {
	err := os.WriteFile(filepath.Join(a.DataDir(), "alloc", allocID, "t", "local", "finish"), nil, 0o644)
	if os.IsNotExist(err) {
		return nil
	}
	return err
}

// logField is the value of key in an agent log line (key=value, or
// key="value"), "" if the line has none. go-plugin passes a plugin's
// fields through JSON, so their order in the line is not the plugin's.
func logField(line, key string) string {
	for _, f := range strings.Fields(line) {
		if v, ok := strings.CutPrefix(f, key+"="); ok {
			return strings.Trim(v, `"`)
		}
	}
	return ""
}

// logBytes is a byte count field of a log line: 123 or, through JSON,
// 1.23e+08; -1 if there is none.
func logBytes(line, key string) int64 {
	f, err := strconv.ParseFloat(logField(line, key), 64)
	if err != nil {
		return -1
	}
	return int64(f)
}

// logLines are the lines of logs holding every one of subs whose field
// key is value ("" for any), oldest first.
func logLines(logs, key, value string, subs ...string) []string {
	var out []string
	for _, l := range strings.Split(logs, "\n") {
		if countLines(l, subs...) == 1 && (value == "" || logField(l, key) == value) {
			out = append(out, strings.TrimSpace(l))
		}
	}
	return out
}

// firstAfter is the time of the first of lines stamped at or after since.
func firstAfter(lines []string, since time.Time) (time.Time, string) {
	for _, l := range lines {
		if at, ok := lineTime(l); ok && !at.Before(since) {
			return at, l
		}
	}
	return time.Time{}, ""
}
