package allocwatch

import (
	"fmt"
	"testing"
	"time"

	"github.com/nomad-device-zfs/nomad-device-zfs/internal/nomadapi"
	"github.com/nomad-device-zfs/nomad-device-zfs/internal/nomadfake"
	"github.com/nomad-device-zfs/nomad-device-zfs/model"
)

// These benchmarks count HTTP requests, not seconds: what the watcher costs
// the agent and the servers. Run with
//
//	go test -run '^$' -bench Requests ./allocwatch

func totalRequests(w *Watcher) uint64 {
	var n uint64
	for _, v := range w.Requests() {
		n += v
	}
	return n
}

// BenchmarkRequestsPerStateChange: one allocation changes state, the
// watcher delivers it, then the next change. Expect 1 request per change:
// the blocked query returns with the change and the next one blocks.
func BenchmarkRequestsPerStateChange(b *testing.B) {
	cases := []struct {
		name        string
		minInterval time.Duration
		burst       int // changes made at once before waiting for the last
	}{
		{name: "one change at a time", minInterval: time.Millisecond, burst: 1},
		{name: "bursts of 10 within MinInterval", minInterval: 50 * time.Millisecond, burst: 10},
	}
	for _, tc := range cases {
		b.Run(tc.name, func(b *testing.B) {
			f := nomadfake.New(b, id(9))
			f.Upsert(apiAlloc(1, "pending"))
			w, err := New(Config{Config: nomadapi.Config{Address: f.URL()}, NodeID: id(9), MinInterval: tc.minInterval, WaitTime: time.Minute}, nil)
			if err != nil {
				b.Fatal(err)
			}
			snaps, stop := runWatcher(b, w)
			defer stop()
			waitFor(b, snaps, func(model.Snapshot) bool { return true })

			before := totalRequests(w)
			b.ResetTimer()
			changes := 0
			for range b.N {
				// Each change sets a status never used before, so the
				// snapshot that shows it is unambiguous.
				var want string
				for range tc.burst {
					changes++
					want = fmt.Sprintf("state-%d", changes)
					f.SetStatus(id(1), want)
				}
				waitFor(b, snaps, func(s model.Snapshot) bool { return statusOf(s, id(1)) == want })
			}
			b.StopTimer()
			reqs := totalRequests(w) - before
			b.ReportMetric(float64(reqs)/float64(changes), "req/change")
			b.ReportMetric(0, "ns/op")
		})
	}
}

// BenchmarkRequestsIdle: nothing changes for b.N blocking waits. Expect 1
// request per wait period: with the default 1m WaitTime, 60 an hour.
func BenchmarkRequestsIdle(b *testing.B) {
	const wait = 20 * time.Millisecond
	f := nomadfake.New(b, id(9))
	f.Upsert(apiAlloc(1, "running"))
	w, err := New(Config{Config: nomadapi.Config{Address: f.URL()}, NodeID: id(9), MinInterval: time.Millisecond, WaitTime: wait}, nil)
	if err != nil {
		b.Fatal(err)
	}
	snaps, stop := runWatcher(b, w)
	defer stop()
	waitFor(b, snaps, func(model.Snapshot) bool { return true })

	before := totalRequests(w)
	b.ResetTimer()
	time.Sleep(time.Duration(b.N) * wait)
	b.StopTimer()
	reqs := totalRequests(w) - before
	perPeriod := float64(reqs) / float64(b.N)
	b.ReportMetric(perPeriod, "req/wait-period")
	b.ReportMetric(perPeriod*float64(time.Hour/DefaultWaitTime), "req/hour@5m")
	b.ReportMetric(0, "ns/op")
}

func waitFor(b *testing.B, snaps <-chan model.Snapshot, pred func(model.Snapshot) bool) {
	b.Helper()
	timeout := time.After(testTimeout)
	for {
		select {
		case s := <-snaps:
			if pred(s) {
				return
			}
		case <-timeout:
			b.Fatal("no matching snapshot")
		}
	}
}
