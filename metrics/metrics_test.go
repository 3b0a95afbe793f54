package metrics

import (
	"errors"
	"fmt"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	hclog "github.com/hashicorp/go-hclog"
	"github.com/prometheus/client_golang/prometheus/testutil/promlint"

	"github.com/nomad-device-zfs/nomad-device-zfs/hooks"
	"github.com/nomad-device-zfs/nomad-device-zfs/model"
	"github.com/nomad-device-zfs/nomad-device-zfs/transfer"
	"github.com/nomad-device-zfs/nomad-device-zfs/zfs"
	"github.com/nomad-device-zfs/nomad-device-zfs/zfs/zfstest"
)

var scratch = model.Class{Name: "scratch", Slots: 2, MountPath: "/data", Properties: map[string]string{"quota": "1G"}}

// TestSlotSeriesFollowTheHolder walks a slot through its life on the fake
// zfs, scraping the endpoint at each step: the held slot's series carry
// its holder's labels, and are gone once the holder has ended and the slot
// is released; the release is counted and timed from the holder's end.
func TestSlotSeriesFollowTheHolder(t *testing.T) {
	r := newRig(t, scratch)
	r.mgr.Reconcile(t.Context())
	ctx := map[string]string{"pool": "tank", "class": "scratch"}
	with := func(kv ...string) map[string]string {
		m := map[string]string{"pool": "tank", "class": "scratch"}
		for i := 0; i+1 < len(kv); i += 2 {
			m[kv[i]] = kv[i+1]
		}
		return m
	}

	fs := r.scrape()
	expect(t, fs, "nomad_device_zfs_slots", with("state", "ready"), 2)
	expect(t, fs, "nomad_device_zfs_slots", with("state", "held"), 0)
	expect(t, fs, "nomad_device_zfs_slots_free", ctx, 2)
	expect(t, fs, "nomad_device_zfs_slots_unhealthy", ctx, 0)
	expect(t, fs, "nomad_device_zfs_pool_health", map[string]string{"pool": "tank", "health": "ONLINE"}, 1)
	expect(t, fs, "nomad_device_zfs_pool_health", map[string]string{"pool": "tank", "health": "DEGRADED"}, 0)
	if ms := fs.find("nomad_device_zfs_slot_used_bytes", nil); len(ms) != 0 {
		t.Errorf("slot series with no slot held: %d", len(ms))
	}

	id := uuid("a1")
	r.deliver(alloc(id, model.ClientRunning, "scratch", "scratch-1"))
	fs = r.scrape()
	holder := with("slot", "scratch-1", "alloc_id", id, "namespace", "prod", "job", "web", "task_group", "g")
	expect(t, fs, "nomad_device_zfs_slots", with("state", "held"), 1)
	expect(t, fs, "nomad_device_zfs_slots_free", ctx, 1)
	expect(t, fs, "nomad_device_zfs_slot_quota_bytes", holder, 1<<30)
	if _, ok := fs.value("nomad_device_zfs_slot_used_bytes", holder); !ok {
		t.Errorf("no used bytes for the held slot with its holder's labels; got %v", fs.find("nomad_device_zfs_slot_used_bytes", nil))
	}
	if _, ok := fs.value("nomad_device_zfs_slot_referenced_bytes", holder); !ok {
		t.Error("no referenced bytes for the held slot")
	}

	ended := alloc(id, model.ClientComplete, "scratch", "scratch-1")
	ended.FinishedAt = time.Now().Add(-3 * time.Second)
	r.deliver(ended)
	fs = r.scrape()
	for name, f := range fs {
		for _, m := range f.Metric {
			if label(m, "alloc_id") == id {
				t.Errorf("%s still has a series of the ended allocation: %v", name, m)
			}
		}
	}
	expect(t, fs, "nomad_device_zfs_slots", with("state", "ready"), 2)
	expect(t, fs, "nomad_device_zfs_releases_total", with("policy", "destroy", "outcome", "complete", "result", "ok"), 1)
	expect(t, fs, "nomad_device_zfs_release_latency_seconds", with("policy", "destroy"), 1)
	expect(t, fs, "nomad_device_zfs_release_duration_seconds", with("policy", "destroy"), 1)
	if lat := fs.find("nomad_device_zfs_release_latency_seconds", ctx); len(lat) != 1 || lat[0].Histogram.GetSampleSum() < 3 {
		t.Errorf("release latency not measured from the holder's end 3 s ago: %v", lat)
	}
	if ms := fs.find("nomad_device_zfs_command_duration_seconds", map[string]string{"pool": "tank", "command": "zfs", "subcommand": "destroy", "result": "ok"}); len(ms) != 1 {
		t.Errorf("the release's zfs destroy is not counted: %v", ms)
	}
	if ms := fs.find("nomad_device_zfs_command_duration_seconds", map[string]string{"pool": "tank", "command": "zpool", "subcommand": "list", "result": "ok"}); len(ms) != 1 {
		t.Errorf("the scans' zpool list is not counted: %v", ms)
	}
	if n, _ := fs.value("nomad_device_zfs_scan_duration_seconds", map[string]string{"pool": "tank", "result": "ok"}); n < 1 {
		t.Errorf("%v scans timed, want at least 1", n)
	}

	// A DEGRADED pool shows, and its slots are not offered.
	if err := r.f.SetPoolHealth("tank", zfs.PoolDegraded); err != nil {
		t.Fatal(err)
	}
	r.mgr.Reconcile(t.Context())
	fs = r.scrape()
	expect(t, fs, "nomad_device_zfs_pool_health", map[string]string{"pool": "tank", "health": "DEGRADED"}, 1)
	expect(t, fs, "nomad_device_zfs_pool_health", map[string]string{"pool": "tank", "health": "ONLINE"}, 0)
	expect(t, fs, "nomad_device_zfs_slots_free", ctx, 0)
	expect(t, fs, "nomad_device_zfs_slots_unhealthy", ctx, 2)
}

// TestBusyReleaseCounted: a release refused by a busy dataset is counted
// with result busy and the slot's series stay, with the holder's labels,
// while it is releasing; once the dataset is free the retry succeeds.
func TestBusyReleaseCounted(t *testing.T) {
	r := newRig(t, scratch)
	r.mgr.Reconcile(t.Context())
	id := uuid("b1")
	r.deliver(alloc(id, model.ClientRunning, "scratch", "scratch-2"))
	if err := r.f.SetBusy("tank/nomad/scratch/scratch-2", true); err != nil {
		t.Fatal(err)
	}
	r.deliver(alloc(id, model.ClientFailed, "scratch", "scratch-2"))
	fs := r.scrape()
	expect(t, fs, "nomad_device_zfs_releases_total", map[string]string{"class": "scratch", "outcome": "failed", "result": "busy"}, 1)
	expect(t, fs, "nomad_device_zfs_slots", map[string]string{"class": "scratch", "state": "releasing"}, 1)
	if _, ok := fs.value("nomad_device_zfs_slot_used_bytes", map[string]string{"slot": "scratch-2", "alloc_id": id, "job": "web"}); !ok {
		t.Error("a slot whose release waits lost its series: it still holds the allocation's data")
	}
	if ms := fs.find("nomad_device_zfs_release_latency_seconds", nil); len(ms) != 0 {
		t.Errorf("a failed release was timed: %v", ms)
	}

	if err := r.f.SetBusy("tank/nomad/scratch/scratch-2", false); err != nil {
		t.Fatal(err)
	}
	r.mgr.Settle(t.Context())
	fs = r.scrape()
	expect(t, fs, "nomad_device_zfs_releases_total", map[string]string{"class": "scratch", "outcome": "failed", "result": "ok"}, 1)
	if ms := fs.find("nomad_device_zfs_slot_used_bytes", nil); len(ms) != 0 {
		t.Errorf("series left after the release: %v", ms)
	}
}

// TestReleaseDone: what each kind of release counts and times.
func TestReleaseDone(t *testing.T) {
	now := time.Now()
	slot := model.Slot{ID: "scratch-1", Class: "scratch", Dataset: "tank/nomad/scratch/scratch-1"}
	orphan := slot
	orphan.Orphan = true
	ended := model.Alloc{ID: uuid("c1"), FinishedAt: now.Add(-2 * time.Second)}
	busy := fmt.Errorf("releasing: %w", &zfs.Error{Cmd: "zfs", Kind: zfs.ErrBusy})
	cases := []struct {
		name        string
		ev          hooks.ReleaseEvent
		labels      map[string]string
		timed, late bool
	}{
		{"complete, destroyed", hooks.ReleaseEvent{Slot: slot, Holder: ended, Outcome: "complete", Policy: "destroy"},
			map[string]string{"policy": "destroy", "outcome": "complete", "result": "ok"}, true, true},
		{"parked for a replacement", hooks.ReleaseEvent{Slot: slot, Holder: ended, Outcome: "complete", Policy: hooks.PolicyPark},
			map[string]string{"policy": "park", "result": "ok"}, true, true},
		{"lost, end unknown", hooks.ReleaseEvent{Slot: slot, Holder: model.Alloc{ID: ended.ID}, Outcome: "lost", Policy: "snapshot"},
			map[string]string{"policy": "snapshot", "outcome": "lost", "result": "ok"}, true, false},
		{"an operator's release", hooks.ReleaseEvent{Slot: slot, Holder: ended, Outcome: "operator", Policy: "destroy"},
			map[string]string{"outcome": "operator", "result": "ok"}, true, false},
		{"an orphan retired", hooks.ReleaseEvent{Slot: orphan, Holder: ended, Outcome: "complete", Policy: "destroy"},
			map[string]string{"outcome": "complete", "result": "ok"}, true, false},
		{"busy", hooks.ReleaseEvent{Slot: slot, Holder: ended, Outcome: "failed", Policy: "rollback", Err: busy},
			map[string]string{"policy": "rollback", "outcome": "failed", "result": "busy"}, false, false},
		{"refused: something foreign below", hooks.ReleaseEvent{Slot: slot, Holder: ended, Outcome: "complete", Err: errors.New("not released: tank/nomad/scratch/scratch-1/x")},
			map[string]string{"policy": "none", "result": "refused"}, false, false},
		{"an outcome from a newer model", hooks.ReleaseEvent{Slot: slot, Holder: ended, Outcome: "vanished", Policy: "destroy"},
			map[string]string{"outcome": "other"}, true, true},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			m := New(&model.Config{Parent: "tank/nomad", Classes: []model.Class{scratch}}, "test")
			tc.ev.Started, tc.ev.Done = now.Add(-time.Second), now
			m.ReleaseDone(tc.ev)
			fs := scrapeHandler(t, m)
			tc.labels["pool"], tc.labels["class"] = "tank", "scratch"
			expect(t, fs, "nomad_device_zfs_releases_total", tc.labels, 1)
			if got := len(fs.find("nomad_device_zfs_release_duration_seconds", nil)); got != b2i(tc.timed) {
				t.Errorf("%d duration series, want %d", got, b2i(tc.timed))
			}
			lat := fs.find("nomad_device_zfs_release_latency_seconds", nil)
			if len(lat) != b2i(tc.late) {
				t.Fatalf("%d latency series, want %d", len(lat), b2i(tc.late))
			}
			if tc.late && lat[0].Histogram.GetSampleSum() != 2 {
				t.Errorf("latency %v s, want 2 (from the holder's end to the release's)", lat[0].Histogram.GetSampleSum())
			}
		})
	}
}

// TestReserveDone: Reserve is timed under the class of the IDs it got,
// by the Manager's kind of error.
func TestReserveDone(t *testing.T) {
	cases := []struct {
		name  string
		ids   []string
		err   error
		class string
		res   string
	}{
		{"granted", []string{"scratch-2"}, nil, "scratch", "ok"},
		{"not ready", []string{"scratch-1"}, fmt.Errorf("%w: scratch-1: pool DEGRADED", hooks.ErrNotReady), "scratch", "not_ready"},
		{"refused", []string{"scratch-1"}, fmt.Errorf("%w scratch-1: still held", hooks.ErrRefused), "scratch", "refused"},
		{"an ID the node does not have", []string{"bogus-7"}, fmt.Errorf("%w %q", hooks.ErrUnknownSlot, "bogus-7"), "", "unknown_slot"},
		{"a slot the configuration no longer has", []string{"scratch-3"}, errors.New("x"), "", "error"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			m := New(&model.Config{Parent: "tank/nomad", Classes: []model.Class{scratch}}, "test")
			m.ReserveDone(tc.ids, 30*time.Millisecond, tc.err)
			pool := "tank"
			if tc.class == "" {
				pool = ""
			}
			expect(t, scrapeHandler(t, m), "nomad_device_zfs_reserve_duration_seconds",
				map[string]string{"pool": pool, "class": tc.class, "result": tc.res}, 1)
		})
	}
}

// TestWatcherCounts: the watcher's failed queries by reason, and index
// resets.
func TestWatcherCounts(t *testing.T) {
	m := New(&model.Config{Parent: "tank/nomad"}, "test")
	m.QueryFailed("unreachable")
	m.QueryFailed("unreachable")
	m.QueryFailed("permission_denied")
	m.IndexReset()
	fs := scrapeHandler(t, m)
	expect(t, fs, "nomad_device_zfs_watcher_errors_total", map[string]string{"reason": "unreachable"}, 2)
	expect(t, fs, "nomad_device_zfs_watcher_errors_total", map[string]string{"reason": "permission_denied"}, 1)
	expect(t, fs, "nomad_device_zfs_watcher_index_resets_total", nil, 1)
	expect(t, fs, "nomad_device_zfs_build_info", map[string]string{"version": "test"}, 1)
}

// TestOff: with the endpoint off the plugin holds a nil *Metrics, which
// takes every report and leaves the runner as it was.
func TestOff(t *testing.T) {
	var m *Metrics
	m.ReleaseDone(hooks.ReleaseEvent{})
	m.ScanDone(hooks.ScanEvent{})
	m.ReserveDone([]string{"a-1"}, time.Second, nil)
	m.QueryFailed("x")
	m.IndexReset()
	m.Sent(transfer.KindReplica, 1)
	m.Received(transfer.KindReplica, 1)
	m.Watch(nil, nil)
	next := zfstest.New(zfstest.Options{MountRoot: t.TempDir()})
	if got := m.Commands(next); got != zfs.Runner(next) {
		t.Errorf("Commands wrapped the runner with the endpoint off")
	}
}

// TestLint holds the output to Prometheus's naming conventions (units in
// names, _total on counters, base units), as promtool check metrics does.
func TestLint(t *testing.T) {
	r := newRig(t, scratch)
	r.mgr.Reconcile(t.Context())
	r.deliver(alloc(uuid("d1"), model.ClientRunning, "scratch", "scratch-1"))
	resp, err := http.Get(r.srv.URL)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	problems, err := promlint.New(resp.Body).Lint()
	if err != nil {
		t.Fatal(err)
	}
	for _, p := range problems {
		if len(p.Metric) > len("nomad_device_zfs_") && p.Metric[:len("nomad_device_zfs_")] == "nomad_device_zfs_" {
			t.Errorf("%s: %s", p.Metric, p.Text)
		}
	}
}

func expect(t *testing.T, fs families, name string, labels map[string]string, want float64) {
	t.Helper()
	got, ok := fs.value(name, labels)
	if !ok {
		t.Errorf("%s%v: not exactly one series (have %d)", name, labels, len(fs.find(name, labels)))
		return
	}
	if got != want {
		t.Errorf("%s%v = %v, want %v", name, labels, got, want)
	}
}

func scrapeHandler(t *testing.T, m *Metrics) families {
	t.Helper()
	srv := httptest.NewServer(m.Handler(hclog.NewNullLogger()))
	defer srv.Close()
	return scrapeURL(t, srv.URL)
}

func b2i(b bool) int {
	if b {
		return 1
	}
	return 0
}

// TestSeriesStayBounded: allocations come and go through the same slots;
// the endpoint's series do not grow with them.
func TestSeriesStayBounded(t *testing.T) {
	r := newRig(t, scratch)
	r.mgr.Reconcile(t.Context())
	count := func() int {
		n := 0
		for name, f := range r.scrape() {
			if strings.HasPrefix(name, "nomad_device_zfs_") {
				n += len(f.Metric)
			}
		}
		return n
	}
	var after []int
	for i := 0; i < 12; i++ {
		id := uuid(fmt.Sprintf("e%d", i))
		slot := fmt.Sprintf("scratch-%d", i%2+1)
		r.deliver(alloc(id, model.ClientRunning, "scratch", slot))
		ended := alloc(id, model.ClientComplete, "scratch", slot)
		ended.FinishedAt = time.Now()
		r.deliver(ended)
		after = append(after, count())
	}
	if after[3] != after[len(after)-1] {
		t.Errorf("series after each allocation's end: %v; they grow with the allocations", after)
	}
}

// TestPoolsOfEveryParent: with a class on a parent in another pool, each
// pool has its health, size and scan, its class's series carry its pool,
// and a pool that degrades shows on its own series and its own class's
// slots only.
func TestPoolsOfEveryParent(t *testing.T) {
	fast := model.Class{Name: "fast", Parent: "nvme/nomad", Slots: 1, MountPath: "/fast"}
	r := newRig(t, scratch, fast)
	if err := r.f.AddPool("nvme", 1<<30); err != nil {
		t.Fatal(err)
	}
	if err := zfs.NewClient(r.f).Create(t.Context(), "nvme/nomad", nil); err != nil {
		t.Fatal(err)
	}
	r.mgr.Reconcile(t.Context())
	fs := r.scrape()
	for _, pool := range []string{"tank", "nvme"} {
		expect(t, fs, "nomad_device_zfs_pool_health", map[string]string{"pool": pool, "health": "ONLINE"}, 1)
		if _, ok := fs.value("nomad_device_zfs_pool_size_bytes", map[string]string{"pool": pool}); !ok {
			t.Errorf("no size of pool %s", pool)
		}
		if n, _ := fs.value("nomad_device_zfs_scan_duration_seconds", map[string]string{"pool": pool, "result": "ok"}); n < 1 {
			t.Errorf("pool %s: %v scans timed, want at least 1", pool, n)
		}
	}
	expect(t, fs, "nomad_device_zfs_slots_free", map[string]string{"pool": "nvme", "class": "fast"}, 1)
	expect(t, fs, "nomad_device_zfs_slots_free", map[string]string{"pool": "tank", "class": "scratch"}, 2)

	if err := r.f.SetPoolHealth("nvme", zfs.PoolDegraded); err != nil {
		t.Fatal(err)
	}
	r.mgr.Reconcile(t.Context())
	fs = r.scrape()
	expect(t, fs, "nomad_device_zfs_pool_health", map[string]string{"pool": "nvme", "health": "DEGRADED"}, 1)
	expect(t, fs, "nomad_device_zfs_pool_health", map[string]string{"pool": "tank", "health": "ONLINE"}, 1)
	expect(t, fs, "nomad_device_zfs_slots_unhealthy", map[string]string{"pool": "nvme", "class": "fast"}, 1)
	expect(t, fs, "nomad_device_zfs_slots_free", map[string]string{"pool": "tank", "class": "scratch"}, 2)
}

// TestReplicasCounted: a replica beside the slots (another node's held
// slot's copy, issue 30) is counted apart, with the space it uses; it is
// not a slot (the slot counts do not move) and nothing releases it.
func TestReplicasCounted(t *testing.T) {
	r := newRig(t, scratch)
	r.mgr.Reconcile(t.Context())
	ctx := map[string]string{"pool": "tank", "class": "scratch"}
	expect(t, r.scrape(), "nomad_device_zfs_replica_datasets", ctx, 0)

	cfg := &model.Config{Parent: "tank/nomad", Classes: []model.Class{scratch}}
	source := model.Alloc{ID: uuid("b1"), NodeID: "node-2", Namespace: "prod", JobID: "web", TaskGroup: "g"}
	name := cfg.ReplicaName("scratch", source.ID, "scratch-1")
	c := zfs.NewClient(r.f)
	if err := c.Create(t.Context(), name, model.ReplicaProps(scratch, name, source, "scratch-1", time.Now())); err != nil {
		t.Fatal(err)
	}
	if err := c.Snapshot(t.Context(), name+"@"+model.ReplicaSnapshot(1), nil); err != nil {
		t.Fatal(err)
	}
	r.mgr.Reconcile(t.Context())
	fs := r.scrape()
	expect(t, fs, "nomad_device_zfs_replica_datasets", ctx, 1)
	if n, ok := fs.value("nomad_device_zfs_replica_bytes", ctx); !ok || n <= 0 {
		t.Errorf("replica bytes %v (%v), want its space", n, ok)
	}
	expect(t, fs, "nomad_device_zfs_slots", map[string]string{"pool": "tank", "class": "scratch", "state": "ready"}, 2)
	expect(t, fs, "nomad_device_zfs_slots_free", ctx, 2)
	expect(t, fs, "nomad_device_zfs_parked_datasets", ctx, 0)
	if ms := fs.find("nomad_device_zfs_releases_total", nil); len(ms) != 0 {
		t.Errorf("releases counted: %v", ms)
	}
}
