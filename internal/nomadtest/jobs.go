package nomadtest

import (
	"fmt"
	"io"
	"sort"
	"strings"
	"testing"
	"time"

	"github.com/hashicorp/nomad/api"
)

// RunJob parses jobHCL on the server (HCL2, as `nomad job run` does),
// registers it and returns the parsed job. It does not wait for placement;
// follow with WaitAllocs.
func (a *Agent) RunJob(t testing.TB, jobHCL string) *api.Job {
	t.Helper()
	c := a.Client()
	job, err := c.Jobs().ParseHCL(jobHCL, true)
	if err != nil {
		a.fatalf(t, "parsing job: %v\n%s", err, jobHCL)
	}
	if _, _, err := c.Jobs().Register(job, nil); err != nil {
		a.fatalf(t, "registering job %q: %v", *job.ID, err)
	}
	return job
}

// StopJob deregisters jobID (in the default namespace), purging it when
// purge is set. Its allocations then stop asynchronously.
func (a *Agent) StopJob(t testing.TB, jobID string, purge bool) {
	t.Helper()
	if _, _, err := a.Client().Jobs().Deregister(jobID, purge, nil); err != nil {
		a.fatalf(t, "stopping job %q: %v", jobID, err)
	}
}

// WaitAllocs polls the allocations of jobID (default namespace, all
// versions) until pred accepts them, and returns them. On timeout the
// failure lists every allocation with its task states and latest events.
func (a *Agent) WaitAllocs(t testing.TB, jobID string, pred func([]*api.AllocationListStub) bool, timeout time.Duration) []*api.AllocationListStub {
	t.Helper()
	var allocs []*api.AllocationListStub
	err := a.poll(timeout, func() (bool, string) {
		var err error
		allocs, _, err = a.Client().Jobs().Allocations(jobID, true, nil)
		if err != nil {
			return false, "listing allocations: " + err.Error()
		}
		if pred(allocs) {
			return true, ""
		}
		return false, describeAllocs(allocs)
	})
	if err != nil {
		a.fatalf(t, "waiting for allocations of job %q: %v", jobID, err)
	}
	return allocs
}

// AllocsWithStatus returns a WaitAllocs predicate that holds when there are
// exactly n allocations and every one has client status status
// (api.AllocClientStatusComplete, ...Running, ...Failed).
//
// An allocation that Nomad's own executor could not start on a busy
// machine, and that Nomad replaced, is not counted: its replacement is.
func AllocsWithStatus(n int, status string) func([]*api.AllocationListStub) bool {
	return func(allocs []*api.AllocationListStub) bool {
		counted := 0
		for _, al := range allocs {
			if executorNeverStarted(al) {
				continue
			}
			if al.ClientStatus != status {
				return false
			}
			counted++
		}
		return counted == n
	}
}

// Counted returns the allocations AllocsWithStatus counts, in order: all
// but those Nomad replaced after its executor never started. After
// WaitAllocs(..., AllocsWithStatus(1, status)), Counted(allocs)[0] is the
// one allocation, where allocs[0] may be a replaced one.
func Counted(allocs []*api.AllocationListStub) []*api.AllocationListStub {
	var out []*api.AllocationListStub
	for _, al := range allocs {
		if !executorNeverStarted(al) {
			out = append(out, al)
		}
	}
	return out
}

// executorNeverStarted reports an allocation that failed because Nomad's
// executor plugin did not start in time (a guest too busy to answer its
// handshake, seen beside other VMs on the same cores) and that Nomad has
// replaced: a failure of the machine, before any task ran.
func executorNeverStarted(al *api.AllocationListStub) bool {
	if al.ClientStatus != api.AllocClientStatusFailed || al.NextAllocation == "" {
		return false
	}
	for _, ts := range al.TaskStates {
		for _, ev := range ts.Events {
			if strings.Contains(ev.DisplayMessage, "failed to create executor") ||
				strings.Contains(ev.Details["driver_error"], "failed to create executor") {
				return true
			}
		}
	}
	return false
}

// AllocLogs returns what task of allocID wrote to stream ("stdout" or
// "stderr"), read through the client's file system API from
// alloc/logs/<task>.<stream>.0 (the first log file; enough for test output).
func (a *Agent) AllocLogs(t testing.TB, allocID, task, stream string) string {
	t.Helper()
	out, err := a.ReadAllocLogs(allocID, task, stream)
	if err != nil {
		a.fatalf(t, "%v", err)
	}
	return out
}

// ReadAllocLogs is AllocLogs for a caller that can do without the logs:
// it returns the error instead of failing the test.
func (a *Agent) ReadAllocLogs(allocID, task, stream string) (string, error) {
	c := a.Client()
	alloc, _, err := c.Allocations().Info(allocID, nil)
	if err != nil {
		return "", fmt.Errorf("reading allocation %s: %w", allocID, err)
	}
	path := fmt.Sprintf("alloc/logs/%s.%s.0", task, stream)
	r, err := c.AllocFS().Cat(alloc, path, nil)
	if err != nil {
		return "", fmt.Errorf("reading %s of allocation %s: %w", path, allocID, err)
	}
	defer r.Close()
	b, err := io.ReadAll(r)
	if err != nil {
		return "", fmt.Errorf("reading %s of allocation %s: %w", path, allocID, err)
	}
	return string(b), nil
}

// describeAllocs renders allocations for failure messages: status,
// description and, per task, its state and last three events.
func describeAllocs(allocs []*api.AllocationListStub) string {
	if len(allocs) == 0 {
		return "no allocations"
	}
	var b strings.Builder
	fmt.Fprintf(&b, "%d allocations:", len(allocs))
	for _, al := range allocs {
		fmt.Fprintf(&b, "\n  %s %s: desired=%s client=%s", al.ID[:8], al.Name, al.DesiredStatus, al.ClientStatus)
		if al.ClientDescription != "" {
			fmt.Fprintf(&b, " (%s)", al.ClientDescription)
		}
		tasks := make([]string, 0, len(al.TaskStates))
		for name := range al.TaskStates {
			tasks = append(tasks, name)
		}
		sort.Strings(tasks)
		for _, name := range tasks {
			ts := al.TaskStates[name]
			fmt.Fprintf(&b, "\n    task %s: %s failed=%t restarts=%d", name, ts.State, ts.Failed, ts.Restarts)
			events := ts.Events
			if len(events) > 3 {
				events = events[len(events)-3:]
			}
			for _, ev := range events {
				msg := ev.DisplayMessage
				if msg == "" {
					msg = ev.Message
				}
				fmt.Fprintf(&b, "\n      %s: %s", ev.Type, msg)
			}
		}
	}
	return b.String()
}
