package model_test

import (
	"math/rand/v2"
	"strings"
	"testing"
	"time"

	"github.com/nomad-device-zfs/nomad-device-zfs/model"
)

func TestDecideTakeover(t *testing.T) {
	lostAt := time.Date(2026, 11, 28, 4, 0, 0, 0, time.UTC)
	// The job of docs/node-loss.md: stop_after_client_disconnect = 1m,
	// one task with kill_timeout 20s, no shutdown delay. Takeover time:
	// lost + 60 s + 5 s (check interval) + 20 s + 30 s (margin) = +115 s.
	lost := model.LostAlloc{ID: "aaaaaaaa-0000-0000-0000-000000000001", ClientStatus: model.ClientLost, LostAt: lostAt,
		StopAfter: time.Minute, KillTimeout: 20 * time.Second}
	with := func(f func(*model.LostAlloc)) model.LostAlloc { a := lost; f(&a); return a }
	at := lostAt.Add(115 * time.Second)
	tests := []struct {
		name    string
		alloc   model.LostAlloc
		now     time.Time
		verdict model.TakeoverVerdict
		until   time.Time
		why     string
	}{
		{name: "lost with stop_after, just lost: wait for the takeover time", alloc: lost, now: lostAt,
			verdict: model.TakeoverWait, until: at, why: "may be claimed from 2026-11-28T04:01:55Z"},
		{name: "lost with stop_after, one second before: wait", alloc: lost, now: at.Add(-time.Second),
			verdict: model.TakeoverWait, until: at},
		{name: "lost with stop_after, at the takeover time: claim", alloc: lost, now: at,
			verdict: model.TakeoverClaim, until: at, why: "has been stopped by its node"},
		{name: "lost with stop_after, long after: claim", alloc: lost, now: at.Add(time.Hour),
			verdict: model.TakeoverClaim, until: at},
		{name: "kill_timeout under Nomad's default counts the default (5 s)",
			alloc: with(func(a *model.LostAlloc) { a.KillTimeout = time.Second }), now: lostAt,
			verdict: model.TakeoverWait, until: lostAt.Add(60*time.Second + 5*time.Second + 5*time.Second + model.TakeoverMargin)},
		{name: "a stop_after under 5 s checks as often: its own interval counts",
			alloc: with(func(a *model.LostAlloc) { a.StopAfter = 2 * time.Second }), now: lostAt,
			verdict: model.TakeoverWait, until: lostAt.Add(2*time.Second + 2*time.Second + 20*time.Second + model.TakeoverMargin)},
		{name: "shutdown delays run before the kill: they count",
			alloc: with(func(a *model.LostAlloc) { a.ShutdownDelay = 45 * time.Second }), now: at,
			verdict: model.TakeoverWait, until: at.Add(45 * time.Second)},
		{name: "lost without stop_after: never", alloc: with(func(a *model.LostAlloc) { a.StopAfter = 0 }), now: at.Add(time.Hour),
			verdict: model.TakeoverNever, why: "sets no stop_after_client_disconnect"},
		{name: "lost under max_client_disconnect: never", alloc: with(func(a *model.LostAlloc) { a.StopAfter, a.MaxClientDisconnect = 0, true }),
			now: at.Add(time.Hour), verdict: model.TakeoverNever, why: "max_client_disconnect"},
		{name: "lost after being unknown: never, whatever the group says now",
			alloc: with(func(a *model.LostAlloc) { a.WasUnknown = true }), now: at.Add(time.Hour),
			verdict: model.TakeoverNever, why: "max_client_disconnect"},
		{name: "lost with its node down under Nomad 1.6.2 (no AllocStates): counted from its ModifyTime",
			alloc: with(func(a *model.LostAlloc) { a.LostAt, a.ModifiedAt = time.Time{}, lostAt }), now: at.Add(-time.Second),
			verdict: model.TakeoverWait, until: at, why: "was lost at 2026-11-28T04:00:00Z"},
		{name: "counted from its ModifyTime, at the takeover time: claim",
			alloc: with(func(a *model.LostAlloc) { a.LostAt, a.ModifiedAt = time.Time{}, lostAt }), now: at,
			verdict: model.TakeoverClaim, until: at},
		{name: "a later change moves its ModifyTime: the takeover comes later",
			alloc: with(func(a *model.LostAlloc) { a.LostAt, a.ModifiedAt = time.Time{}, lostAt.Add(time.Minute) }), now: at,
			verdict: model.TakeoverWait, until: at.Add(time.Minute)},
		{name: "the AllocStates record wins over a later ModifyTime",
			alloc: with(func(a *model.LostAlloc) { a.ModifiedAt = lostAt.Add(time.Hour) }), now: at,
			verdict: model.TakeoverClaim, until: at},
		{name: "lost with no time of loss recorded: never",
			alloc: with(func(a *model.LostAlloc) { a.LostAt, a.ModifiedAt = time.Time{}, time.Time{} }),
			now:   at.Add(time.Hour), verdict: model.TakeoverNever, why: "no time of its loss"},
		{name: "unknown: never", alloc: with(func(a *model.LostAlloc) { a.ClientStatus = model.ClientUnknown }), now: at.Add(time.Hour),
			verdict: model.TakeoverNever, why: "is unknown"},
		{name: "running: never (its node has its data)", alloc: with(func(a *model.LostAlloc) { a.ClientStatus = model.ClientRunning }),
			now: at.Add(time.Hour), verdict: model.TakeoverNever, why: "not lost"},
		{name: "pending: never", alloc: with(func(a *model.LostAlloc) { a.ClientStatus = model.ClientPending }),
			now: at.Add(time.Hour), verdict: model.TakeoverNever, why: "not lost"},
		{name: "complete on its node: never (its final data is there)",
			alloc: with(func(a *model.LostAlloc) { a.ClientStatus = model.ClientComplete }), now: at.Add(time.Hour),
			verdict: model.TakeoverNever, why: "ended on its node"},
		{name: "failed on its node: never", alloc: with(func(a *model.LostAlloc) { a.ClientStatus = model.ClientFailed }),
			now: at.Add(time.Hour), verdict: model.TakeoverNever, why: "ended on its node"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			got := model.DecideTakeover(tc.alloc, tc.now)
			if got.Verdict != tc.verdict {
				t.Fatalf("verdict %s, want %s (%s)", got.Verdict, tc.verdict, got.Why)
			}
			if !got.Until.Equal(tc.until) {
				t.Errorf("until %s, want %s", got.Until, tc.until)
			}
			if got.Why == "" || !strings.Contains(got.Why, tc.why) {
				t.Errorf("why %q, want it to say %q", got.Why, tc.why)
			}
		})
	}
}

// TestTakeoverAtNeverBeforeNomadsReplacement: the plugin's takeover time
// is never earlier than Nomad's own WaitClientStop (lost + D + the longest
// kill_timeout, at least 5 s), the time after which Nomad places B.
func TestTakeoverAtNeverBeforeNomadsReplacement(t *testing.T) {
	lostAt := time.Date(2026, 11, 28, 4, 0, 0, 0, time.UTC)
	for _, d := range []time.Duration{time.Nanosecond, time.Second, 5 * time.Second, time.Minute, time.Hour} {
		for _, kill := range []time.Duration{0, time.Second, 5 * time.Second, 5 * time.Minute} {
			a := model.LostAlloc{ClientStatus: model.ClientLost, LostAt: lostAt, StopAfter: d, KillTimeout: kill}
			at, ok := model.TakeoverAt(a)
			nomad := lostAt.Add(d + max(kill, 5*time.Second))
			if !ok || at.Before(nomad.Add(model.TakeoverMargin)) {
				t.Errorf("D %s kill %s: takeover at %s (ok %v), before Nomad's %s plus the margin", d, kill, at, ok, nomad)
			}
		}
	}
}

// TestTakeoverNeverTwoWriters plays Nomad 1.6.2's own timeline of a
// cut-off client many times over, and checks that DecideTakeover says
// claim only once A has stopped writing, by the true clock:
//
//   - A's client had its last good heartbeat at lastOk; the servers mark
//     A lost at lostAt, after it (heartbeat TTL and grace);
//   - the client's heartbeat stop checks every min(5 s, D) from a phase
//     of its own, and stops A at the first check after lastOk + D, by its
//     clock (client/heartbeatstop.go);
//   - A then writes for at most its shutdown delays and kill_timeout;
//   - the servers' clock (which recorded lostAt), the client's and the
//     plugin's are each off the true clock by up to 10 s (a third of
//     TakeoverMargin; NTP keeps them far closer).
func TestTakeoverNeverTwoWriters(t *testing.T) {
	r := rand.New(rand.NewPCG(30, 1))
	const off = 10 * time.Second
	skew := func() time.Duration { return time.Duration(r.Int64N(int64(2*off))) - off }
	pick := func(ds ...time.Duration) time.Duration { return ds[r.IntN(len(ds))] }
	for i := range 5000 {
		d := pick(time.Second, 3*time.Second, 5*time.Second, 30*time.Second, time.Minute, 10*time.Minute)
		kill := pick(0, time.Second, 5*time.Second, 20*time.Second, 2*time.Minute)
		delay := pick(0, 0, 5*time.Second, 30*time.Second)
		serverSkew, clientSkew, pluginSkew := skew(), skew(), skew()
		t0 := time.Date(2026, 11, 28, 4, 0, 0, 0, time.UTC)
		lastOk := t0                                                                       // true time of the last good heartbeat
		lostAt := lastOk.Add(time.Duration(r.Int64N(int64(time.Minute))) + 10*time.Second) // true time the servers mark it lost
		interval := min(5*time.Second, d)
		phase := time.Duration(r.Int64N(int64(interval)))
		// The client's checks run at its clock's lastOk-relative ticks; it
		// stops A at the first tick after lastOk + D by its own clock.
		stopAt := lastOk.Add(d)
		for k := phase; ; k += interval {
			tick := lastOk.Add(k)
			if tick.Add(clientSkew).After(lastOk.Add(clientSkew).Add(d)) {
				stopAt = tick
				break
			}
		}
		lastWrite := stopAt.Add(delay + max(kill, 5*time.Second))
		a := model.LostAlloc{ID: "a", ClientStatus: model.ClientLost, LostAt: lostAt.Add(serverSkew),
			StopAfter: d, KillTimeout: kill, ShutdownDelay: delay}
		// The plugin's first claim is at its takeover time, by its clock.
		at, ok := model.TakeoverAt(a)
		if !ok {
			t.Fatalf("case %d: no takeover time", i)
		}
		if got := model.DecideTakeover(a, at.Add(-time.Nanosecond)); got.Verdict != model.TakeoverWait {
			t.Fatalf("case %d: %s just before the takeover time", i, got.Verdict)
		}
		if got := model.DecideTakeover(a, at); got.Verdict != model.TakeoverClaim {
			t.Fatalf("case %d: %s at the takeover time", i, got.Verdict)
		}
		if firstClaim := at.Add(-pluginSkew); firstClaim.Before(lastWrite) {
			t.Fatalf("case %d: the first claim is %s before A's last write (D %s, kill %s, delay %s, skews %s %s %s)",
				i, lastWrite.Sub(firstClaim), d, kill, delay, serverSkew, clientSkew, pluginSkew)
		}
	}
}
