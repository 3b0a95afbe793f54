package allocwatch

import (
	"context"
	"testing"
	"time"

	"github.com/hashicorp/nomad/api"

	"github.com/nomad-device-zfs/nomad-device-zfs/model"
)

// answer is one answer of chanSource.
type answer struct {
	allocs []*api.Allocation
	index  uint64
}

// chanSource answers Run's queries (they carry a wait) and Refresh's (no
// wait) from a channel each, so a test orders them.
type chanSource struct {
	scriptSource
	run, refresh chan answer
}

func (s *chanSource) NodeAllocations(ctx context.Context, _ string, _ uint64, wait time.Duration) ([]*api.Allocation, uint64, error) {
	ch := s.refresh
	if wait > 0 {
		ch = s.run
	}
	select {
	case a := <-ch:
		return a.allocs, a.index, nil
	case <-ctx.Done():
		return nil, 0, ctx.Err()
	}
}

// TestRunDeliversWhatDiffersFromRefresh: Run delivers an answer whose
// content differs from the newest snapshot the watcher handed out, by Run
// or by Refresh (a Reserve's fresh answer, which the Manager keeps as the
// newest). Seed 1885: Run last delivered an empty node; a Reserve's Refresh
// showed an allocation; the servers' state was restored from a snapshot
// older than it, so Run's next answer was empty again, the same as what Run
// had delivered: it was not delivered, and the Manager kept taking the
// vanished allocation for live, its slot held, until the resync five
// minutes later.
func TestRunDeliversWhatDiffersFromRefresh(t *testing.T) {
	src := &chanSource{run: make(chan answer), refresh: make(chan answer)}
	w := newWatcher(Config{NodeID: id(9)}.withDefaults(), testLogger(t, nil), src)
	w.cfg.MinInterval = time.Millisecond
	snaps, _ := runWatcher(t, w)
	send := func(ch chan answer, a answer) {
		t.Helper()
		select {
		case ch <- a:
		case <-time.After(testTimeout):
			t.Fatal("the watcher did not query")
		}
	}

	send(src.run, answer{index: 5})
	next(t, snaps, "the first, empty answer", func(s model.Snapshot) bool { return len(s.Allocs) == 0 })
	done := make(chan error, 1)
	go func() {
		_, err := w.Refresh(context.Background())
		done <- err
	}()
	send(src.refresh, answer{allocs: []*api.Allocation{apiAlloc(1, "pending")}, index: 7})
	if err := <-done; err != nil {
		t.Fatal(err)
	}
	send(src.run, answer{index: 9}) // the allocation is gone again
	next(t, snaps, "the empty answer after the Refresh showed an allocation", func(s model.Snapshot) bool { return len(s.Allocs) == 0 && s.Index == 9 })
}
