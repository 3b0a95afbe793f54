//go:build e2e

package e2e

import (
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"sort"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/hashicorp/nomad/api"

	"github.com/nomad-device-zfs/nomad-device-zfs/internal/nomadtest"
)

// The sticky tests (sticky_*_test.go) run a stateful service on a class
// with sticky = true: each allocation appends a line naming itself to
// /data/history.txt, after printing what it found there, so every
// replacement tells from inside which of its predecessors' data it got.

// stickyClass is class "state": sticky, mounted at /data, with slots
// slots, the default release policy (destroy) and more lines (properties,
// sticky_wait).
func stickyClass(slots int, more string) string {
	return fmt.Sprintf(`class "state" {
  slots  = %d
  sticky = true
  mount  = "/data"
%s
}`, slots, more)
}

// historyScript prints what the slot's history holds ("found: <lines>" or
// "found nothing"), appends "v<VERSION> <alloc ID>" to it and then runs
// until stopped. VERSION comes from the job's env: changing it is a
// destructive update. The shell is PID 1 of the exec task, which ignores
// a signal it has no handler for: the trap lets it exit at once when
// Nomad stops it, rather than after kill_timeout.
const historyScript = `trap 'exit 0' INT TERM; f=/data/history.txt; ` +
	`if [ -e "$f" ]; then echo "found: $(tr '\n' ' ' < "$f")"; else echo "found nothing"; fi; ` +
	`echo "v$VERSION $NOMAD_ALLOC_ID" >> "$f" && echo "appended v$VERSION" && while :; do sleep 1; done`

// stickyService is a one-allocation service job whose task "t" (exec)
// runs script with VERSION=version and one device of class "state"; group
// is added to the group (ephemeral_disk, constraints, restart policy...).
func stickyService(id, version, script, group string) string {
	return fmt.Sprintf(`job %q {
  type = "service"
  group "g" {
%s
    task "t" {
      driver = "exec"
      env {
        VERSION = %q
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
}`, id, group, version, script)
}

// waitRunning waits until job has a running allocation that is none of
// skip and whose task "t" has printed want, and returns it and its stdout.
func waitRunning(t *testing.T, a *nomadtest.Agent, job, want string, skip ...string) (*api.Allocation, string) {
	t.Helper()
	return waitRunningWithin(t, a, job, want, jobTimeout, skip...)
}

// waitRunningWithin is waitRunning for a task that takes longer than a
// job usually does (writing a gigabyte): each of its two waits has timeout.
func waitRunningWithin(t *testing.T, a *nomadtest.Agent, job, want string, timeout time.Duration, skip ...string) (*api.Allocation, string) {
	t.Helper()
	var id, ended string
	a.WaitAllocs(t, job, func(allocs []*api.AllocationListStub) bool {
		for _, al := range allocs {
			if contains(skip, al.ID) {
				continue
			}
			switch al.ClientStatus {
			case api.AllocClientStatusRunning:
				id = al.ID
				return true
			case api.AllocClientStatusFailed, api.AllocClientStatusComplete, api.AllocClientStatusLost:
				ended = al.ID // a replacement that failed to start: no use waiting
				return true
			}
		}
		return false
	}, timeout)
	if id == "" {
		al := allocInfo(t, a, ended)
		t.Fatalf("allocation %s of %s ended (%s) before it printed %q\nstdout: %s\n%s",
			ended, job, al.ClientStatus, want, logOrErr(a, ended, "stdout"), taskEvents(al))
	}
	var out string
	waitFor(t, timeout, fmt.Sprintf("allocation %s of %s to print %q", id, job, want), func() (bool, string) {
		var err error
		out, err = allocLog(a, id, "stdout")
		if err != nil {
			return false, err.Error()
		}
		return strings.Contains(out, want), "stdout: " + out
	})
	return allocInfo(t, a, id), out
}

func contains(ss []string, s string) bool {
	for _, x := range ss {
		if x == s {
			return true
		}
	}
	return false
}

// waitAllocStatus waits until allocation id has client status status.
func waitAllocStatus(t *testing.T, a *nomadtest.Agent, id, status string) *api.Allocation {
	t.Helper()
	var al *api.Allocation
	waitFor(t, jobTimeout, "allocation "+id+" "+status, func() (bool, string) {
		var err error
		al, _, err = a.Client().Allocations().Info(id, nil)
		if err != nil {
			return false, err.Error()
		}
		return al.ClientStatus == status, "client status " + al.ClientStatus
	})
	return al
}

// historyLine is the line allocation al appended to the history.
func historyLine(version string, al *api.Allocation) string {
	return "v" + version + " " + al.ID
}

// checkDataOnlyIn checks that the data of a sticky class lives in exactly
// one place, the slot ds: its history.txt holds lines, no dataset below
// the parent is parked (parked-<alloc ID>), and no other mounted dataset
// there has a history.txt. The predecessors' data is visible to the
// replacement and to no one else.
func checkDataOnlyIn(t testing.TB, p *testPool, ds string, lines ...string) {
	t.Helper()
	want := strings.Join(lines, "\n") + "\n"
	if got, err := readFileErr(filepath.Join("/"+ds, "history.txt")); got != want {
		t.Errorf("/%s/history.txt = %q (%v), want %q", ds, got, err, want)
	}
	all, err := lookupAll(p.Parent)
	if err != nil {
		t.Fatalf("zfs list %s: %v", p.Parent, err)
	}
	for _, name := range keys(all) {
		d := all[name]
		if d.IsSnapshot() {
			continue
		}
		if strings.Contains(name, "/parked-") || d.User.Get(propState) == "parked" {
			t.Errorf("%s is still there (%s), after its data was claimed", name, describeSlot(d))
		}
		if name == ds || !d.Mounted {
			continue
		}
		if _, err := os.Stat(filepath.Join(d.Mountpoint, "history.txt")); err == nil {
			t.Errorf("%s also holds a history.txt: the data is in two places", name)
		}
	}
}

// parkedBelow returns the parked datasets directly below classDS, sorted.
func parkedBelow(t testing.TB, classDS string) []string {
	t.Helper()
	all, err := lookupAll(classDS)
	if err != nil {
		t.Fatalf("zfs list %s: %v", classDS, err)
	}
	var out []string
	for name, d := range all {
		if !d.IsSnapshot() && strings.HasPrefix(name, classDS+"/parked-") {
			out = append(out, name)
		}
	}
	sort.Strings(out)
	return out
}

// parkedFor returns the parked datasets below classDS that hold holder's
// data: parked-<holder ID>, with a suffix when the name carries one (an
// allocation holding two slots of a class parks two datasets).
func parkedFor(t testing.TB, classDS, holder string) []string {
	t.Helper()
	var out []string
	for _, name := range parkedBelow(t, classDS) {
		if strings.HasPrefix(name, classDS+"/parked-"+holder) {
			out = append(out, name)
		}
	}
	return out
}

// claimTook is the took= of the plugin's "claimed parked data" line for
// allocation id: how long the claim's zfs work took, as the plugin
// measured it. ok is false when there is no such line (the replacement
// inherited its predecessor's slot in place, with nothing to rename).
func claimTook(a *nomadtest.Agent, id string) (line string, took time.Duration, ok bool) {
	line = lastLine(a.Logs(), "claimed parked data", "alloc_id="+id)
	if line == "" {
		return "", 0, false
	}
	m := tookRE.FindStringSubmatch(line)
	if m == nil {
		return line, 0, false
	}
	if d, err := time.ParseDuration(m[1]); err == nil {
		return line, d, true
	}
	// A time.Duration logged by the plugin reaches the agent's log as
	// JSON, a number of nanoseconds: took="7.747543529e+10".
	ns, err := strconv.ParseFloat(m[1], 64)
	return line, time.Duration(ns), err == nil
}

var tookRE = regexp.MustCompile(`took="?([0-9.+a-zµ]+)"?`)

// handover describes how the data got from prev to next, for the test log:
// the plugin's claim (or that it inherited in place) and, from Nomad's
// task events, the time from prev's task's end to next's task's start.
func handover(a *nomadtest.Agent, prev, next *api.Allocation) string {
	how := "inherited in place (no claim logged)"
	if line, took, ok := claimTook(a, next.ID); ok {
		how = "claimed parked data, took " + took.String()
	} else if line != "" {
		how = "claim logged without a took: " + line
	}
	ended, started := taskFinished(prev), taskStarted(next)
	if ended.IsZero() || started.IsZero() {
		return how
	}
	return fmt.Sprintf("%s; %s task finished -> %s task started: %s", how,
		prev.ID[:8], next.ID[:8], started.Sub(ended).Round(time.Millisecond))
}

// taskFinished and taskStarted read task "t"'s times from Nomad.
func taskFinished(al *api.Allocation) time.Time {
	if ts := al.TaskStates["t"]; ts != nil {
		return ts.FinishedAt
	}
	return time.Time{}
}

func taskStarted(al *api.Allocation) time.Time {
	if ts := al.TaskStates["t"]; ts != nil {
		return ts.StartedAt
	}
	return time.Time{}
}

// statusOutput runs the operator CLI's status against agent a's
// configuration (the plugin block, and through it the agent's API).
func statusOutput(t testing.TB, a *nomadtest.Agent) string {
	t.Helper()
	cmd := exec.Command(ctlBin, "status", "-config", a.ConfigFile())
	out, err := cmd.CombinedOutput()
	if err != nil {
		t.Fatalf("%s status: %v\n%s", ctlName, err, out)
	}
	return string(out)
}

// afterLine returns what follows the first line of s that starts with
// heading (a section of status), up to the next empty line.
func afterLine(s, heading string) string {
	_, rest, ok := strings.Cut("\n"+s, "\n"+heading)
	if !ok {
		return ""
	}
	_, rest, _ = strings.Cut(rest, "\n")
	section, _, _ := strings.Cut(rest, "\n\n")
	return section
}

// stopAtCleanup stops jobs when the test ends and waits, bounded, until
// none of their allocations runs. Register it after the agents start, so
// that it runs before they stop: a service left running outlives its
// agent (the executor is killed at cleanup, the task is not), and its
// mount of a slot keeps the pool from being destroyed.
func stopAtCleanup(t *testing.T, a *nomadtest.Agent, jobs ...string) {
	t.Cleanup(func() {
		c := a.Client()
		for _, j := range jobs {
			_, _, _ = c.Jobs().Deregister(j, false, nil) // a job never registered is no error here
		}
		deadline := nomadtest.NewDeadline(jobTimeout, pace.Slowness)
		for {
			var live []string
			for _, j := range jobs {
				allocs, _, err := c.Jobs().Allocations(j, true, nil)
				if err != nil {
					continue
				}
				for _, al := range allocs {
					if al.ClientStatus == api.AllocClientStatusRunning || al.ClientStatus == api.AllocClientStatusPending {
						live = append(live, al.ID)
					}
				}
			}
			if len(live) == 0 {
				return
			}
			if deadline.Passed() {
				t.Logf("cleanup: allocations %v still run %s after their jobs were stopped", live, deadline)
				return
			}
			time.Sleep(pollInterval)
		}
	})
}
