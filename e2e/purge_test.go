//go:build e2e

package e2e

import (
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/hashicorp/nomad/api"

	"github.com/nomad-device-zfs/nomad-device-zfs/internal/nomadtest"
)

// purgeReleaseBound is how long after its holder's task has ended a slot
// may stay held when the servers forgot the holder first: the plugin asks
// again on its own clock, at most model.RecheckCeiling (30 s) apart, and
// no other allocation needs to move the node's list. Without that clock
// the slot stayed held for minutes, or for good (issue 31).
const purgeReleaseBound = 30 * time.Second

// purgeScan is the test's scan_interval: far beyond purgeReleaseBound.
const purgeScan = 10 * time.Minute

// stubbornKill is the task's kill_timeout: it ignores SIGINT and SIGTERM,
// so it outlives the stop by this much and dies of the SIGKILL that
// follows; the servers may forget it meanwhile.
const stubbornKill = 8 * time.Second

// TestPurgeReleasesWithoutOtherJobs: a service holding a slot, whose task
// ignores the stop's signal for kill_timeout, is stopped as operators stop
// it; its slot is ready again within purgeReleaseBound of the task's end,
// with no other job on the node to move the node's allocation list. The
// stop is `nomad job stop -purge`, or a plain stop followed by `nomad
// system gc` (right after the stop, while the task ignores the signal, and
// again right after its end: the collection the first cannot make, since
// Nomad collects nothing its client still runs).
func TestPurgeReleasesWithoutOtherJobs(t *testing.T) {
	t.Parallel()
	cases := []struct {
		name  string
		pool  string
		purge bool
		gc    bool
	}{
		{name: "job stop -purge", pool: "e2epurge", purge: true},
		{name: "job stop then system gc", pool: "e2epurgegc", gc: true},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			p := newPool(t, tc.pool, false)
			// A scan every ten minutes: the release must come from the
			// watcher's news or the slot's own clock, not from the
			// periodic scan. On Nomad 1.6.2 the news comes: the servers
			// list the allocation until its client reports its end, even
			// after -purge or system gc, so this passes with the clock
			// removed too (mutant recheck-never-scheduled, run
			// 2026-11-27: ready 2.4 s after the task's end). Servers that
			// forget first, where only the clock helps, are the
			// simulation's (sim.TestSeedRegressions, seeds 195 and 415).
			a := startAgentScan(t, p, purgeScan, `class "svc" {
  slots = 1
  mount = "/data"
  release {
    policy = "destroy"
  }
}`)
			a.WaitForNodeDevice(t, "zfs", "dataset", "svc", 1, deviceTimeout)
			ds := p.Parent + "/svc/svc-1"
			gen := generation(mustLookup(t, ds))
			beat := filepath.Join(t.TempDir(), "beat")

			a.RunJob(t, stubbornService("stubborn", "svc", beat))
			stubs := nomadtest.Counted(a.WaitAllocs(t, "stubborn", nomadtest.AllocsWithStatus(1, api.AllocClientStatusRunning), jobTimeout))
			waitHolder(t, ds, stubs[0].ID)
			waitFor(t, jobTimeout, "the task to beat", func() (bool, string) {
				_, err := os.Stat(beat)
				return err == nil, fmt.Sprint(err)
			})

			stopped := time.Now()
			a.StopJob(t, "stubborn", tc.purge)
			if tc.gc {
				systemGC(t, a)
			}
			end := waitBeatsStop(t, beat)
			if outlived := end.Sub(stopped); outlived < stubbornKill/2 {
				t.Fatalf("the task ended %s after the stop: it did not ignore the stop's signal, so the servers had no time to forget it first", outlived.Round(time.Millisecond))
			}
			if tc.gc {
				systemGC(t, a)
			}
			t.Logf("the task ended %s after the stop", end.Sub(stopped).Round(time.Millisecond))
			// Its data stayed until it ended: the token it wrote into its slot
			// was there at every beat (a release while it ran, e.g. on a
			// client that dropped the runner before the task died, would show).
			if b, err := os.ReadFile(beat + ".gone"); err == nil {
				t.Errorf("the slot was released while its holder's task still ran: %s", b)
			}

			waitFor(t, purgeReleaseBound, fmt.Sprintf("%s ready (generation %d) after its holder's end, with no other job", ds, gen+1), func() (bool, string) {
				d, ok, err := lookup(ds)
				if err != nil || !ok {
					return false, fmt.Sprintf("exists %v: %v", ok, err)
				}
				return d.User.Get(propState) == "ready" && generation(d) == gen+1 && d.Mounted, describeSlot(d)
			})
			t.Logf("%s ready %s after its holder's task ended", ds, time.Since(end).Round(time.Millisecond))

			// The release was the plugin's own doing: no job but the stopped
			// one ever ran on the node.
			jobs, _, err := a.Client().Jobs().List(nil)
			if err != nil {
				t.Fatalf("listing jobs: %v", err)
			}
			for _, j := range jobs {
				if j.ID != "stubborn" {
					t.Errorf("job %s is on the node: the release may have waited for it", j.ID)
				}
			}
		})
	}
}

// stubbornService is service job id: one raw_exec task on a slot of class
// that ignores SIGINT and SIGTERM and touches beat every 0.2 s until
// kill_timeout's SIGKILL ends it. It writes a token into its slot first,
// and at every beat it finds the token gone it says so in beat.gone.
func stubbornService(id, class, beat string) string {
	env := "ZFS_" + strings.ToUpper(class) + "_HOST_PATH"
	script := fmt.Sprintf(`f=$%s/token; echo "$NOMAD_ALLOC_ID" > "$f"; trap '' INT TERM; `+
		`while :; do touch %q; [ -e "$f" ] || echo "token gone at $(date +%%s)" >> %q; sleep 0.2; done`, env, beat, beat+".gone")
	return fmt.Sprintf(`job %q {
  type = "service"
  group "g" {
%s
    task "t" {
      driver       = "raw_exec"
      kill_timeout = %q
      config {
        command = "/bin/sh"
        args    = ["-c", %q]
      }
      resources {
        cpu    = 50
        memory = 32
        device "zfs/dataset/%s" {}
      }
    }
  }
}`, id, noRetry, stubbornKill.String(), script, class)
}

// waitBeatsStop waits until the task stopped touching beat (no touch for
// 2 s) and returns its last touch: when the task ended.
func waitBeatsStop(t *testing.T, beat string) time.Time {
	t.Helper()
	var last time.Time
	waitFor(t, jobTimeout, "the task to end", func() (bool, string) {
		fi, err := os.Stat(beat)
		if err != nil {
			return false, err.Error()
		}
		last = fi.ModTime()
		return time.Since(last) > 2*time.Second, "last beat " + last.Format(time.RFC3339Nano)
	})
	return last
}

// systemGC is `nomad system gc`.
func systemGC(t *testing.T, a *nomadtest.Agent) {
	t.Helper()
	if err := a.Client().System().GarbageCollect(); err != nil {
		t.Fatalf("nomad system gc: %v", err)
	}
}
