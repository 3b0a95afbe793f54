package allocwatch

import (
	"bytes"
	"context"
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/hashicorp/go-hclog"
	"github.com/hashicorp/nomad/api"
	"github.com/nomad-device-zfs/nomad-device-zfs/model"
)

// testTimeout bounds every channel read in these tests.
const testTimeout = 10 * time.Second

// id returns a valid Nomad-style ID numbered n.
func id(n int) string { return fmt.Sprintf("00000000-0000-4000-8000-%012d", n) }

// allocOpt edits an allocation built by apiAlloc.
type allocOpt func(*api.Allocation)

// apiAlloc builds an allocation of job "web", client status status,
// desired "run".
func apiAlloc(n int, status string, opts ...allocOpt) *api.Allocation {
	a := &api.Allocation{
		ID:            id(n),
		Namespace:     "default",
		JobID:         "web",
		Job:           &api.Job{Type: new("service")},
		TaskGroup:     "g",
		ClientStatus:  status,
		DesiredStatus: api.AllocDesiredStatusRun,
	}
	for _, o := range opts {
		o(a)
	}
	return a
}

func inNamespace(ns string) allocOpt { return func(a *api.Allocation) { a.Namespace = ns } }

func desired(s string) allocOpt { return func(a *api.Allocation) { a.DesiredStatus = s } }

// withDevice assigns one device block's instances to task.
func withDevice(task, vendor, typ, name string, ids ...string) allocOpt {
	return func(a *api.Allocation) {
		if a.AllocatedResources == nil {
			a.AllocatedResources = &api.AllocatedResources{Tasks: map[string]*api.AllocatedTaskResources{}}
		}
		tr := a.AllocatedResources.Tasks[task]
		if tr == nil {
			tr = &api.AllocatedTaskResources{}
			a.AllocatedResources.Tasks[task] = tr
		}
		tr.Devices = append(tr.Devices, &api.AllocatedDeviceResource{Vendor: vendor, Type: typ, Name: name, DeviceIDs: ids})
	}
}

func withTaskState(task, state string) allocOpt {
	return func(a *api.Allocation) {
		if a.TaskStates == nil {
			a.TaskStates = map[string]*api.TaskState{}
		}
		a.TaskStates[task] = &api.TaskState{State: state}
	}
}

// fakeClock is a settable clock for the delivery and resync rules.
type fakeClock struct {
	mu sync.Mutex
	t  time.Time
}

func newFakeClock() *fakeClock { return &fakeClock{t: time.Date(2026, 3, 11, 9, 0, 0, 0, time.UTC)} }

func (c *fakeClock) Now() time.Time {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.t
}

func (c *fakeClock) Advance(d time.Duration) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.t = c.t.Add(d)
}

// logBuffer is a goroutine-safe log sink.
type logBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (l *logBuffer) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.Write(p)
}

func (l *logBuffer) String() string {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.String()
}

// testLogger logs to t and, if buf is not nil, to buf.
func testLogger(t testing.TB, buf *logBuffer) hclog.Logger {
	opts := &hclog.LoggerOptions{Name: t.Name(), Level: hclog.Debug, Output: hclog.DefaultOutput}
	if buf != nil {
		opts.Output = buf
	} else {
		opts.Output = testWriter{t}
	}
	return hclog.New(opts)
}

type testWriter struct{ t testing.TB }

func (w testWriter) Write(p []byte) (int, error) {
	w.t.Helper()
	w.t.Log(string(bytes.TrimRight(p, "\n")))
	return len(p), nil
}

// runWatcher runs w.Run in a goroutine and sends its snapshots to the
// returned channel; stop cancels Run and returns its error.
func runWatcher(t testing.TB, w *Watcher) (snaps <-chan model.Snapshot, stop func() error) {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	ch := make(chan model.Snapshot, 64)
	errc := make(chan error, 1)
	go func() {
		errc <- w.Run(ctx, func(s model.Snapshot) {
			select {
			case ch <- s:
			case <-ctx.Done():
			}
		})
	}()
	var once sync.Once
	var err error
	stop = func() error {
		once.Do(func() {
			cancel()
			select {
			case err = <-errc:
			case <-time.After(testTimeout):
				t.Errorf("Run did not return within %s of cancel", testTimeout)
			}
		})
		return err
	}
	t.Cleanup(func() { stop() })
	return ch, stop
}

// next waits for a snapshot that pred accepts, dropping others, and fails
// the test after testTimeout.
func next(t *testing.T, snaps <-chan model.Snapshot, what string, pred func(model.Snapshot) bool) model.Snapshot {
	t.Helper()
	return nextWithin(t, snaps, testTimeout, what, pred)
}

// nextWithin is next with its own timeout.
func nextWithin(t *testing.T, snaps <-chan model.Snapshot, d time.Duration, what string, pred func(model.Snapshot) bool) model.Snapshot {
	t.Helper()
	timeout := time.After(d)
	var last model.Snapshot
	for {
		select {
		case s := <-snaps:
			if pred(s) {
				return s
			}
			last = s
		case <-timeout:
			t.Fatalf("no snapshot with %s within %s; last: %s", what, d, describe(last))
			return model.Snapshot{}
		}
	}
}

// none checks that no snapshot arrives within d.
func none(t *testing.T, snaps <-chan model.Snapshot, d time.Duration) {
	t.Helper()
	select {
	case s := <-snaps:
		t.Fatalf("unexpected snapshot %s", describe(s))
	case <-time.After(d):
	}
}

// statusOf returns the client status of allocation allocID in s, or "".
func statusOf(s model.Snapshot, allocID string) string {
	for _, a := range s.Allocs {
		if a.ID == allocID {
			return a.ClientStatus
		}
	}
	return ""
}

func describe(s model.Snapshot) string {
	out := fmt.Sprintf("index %d:", s.Index)
	for _, a := range s.Allocs {
		out += fmt.Sprintf(" %s/%s/%s", a.ID[len(a.ID)-4:], a.ClientStatus, a.DesiredStatus)
	}
	return out
}
