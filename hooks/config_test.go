package hooks

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/nomad-device-zfs/nomad-device-zfs/model"
)

// TestNewManagerConfig: NewManager refuses a Config without what every
// Manager needs, and builds the rest from the Config alone: the plugin's
// defaults for what is left unset, the simulation's clock and order when
// Sim is set.
func TestNewManagerConfig(t *testing.T) {
	_, z := newFakeZFS(t)
	slots := &model.Config{Parent: "tank/nomad", ScanInterval: time.Hour}
	simNow := time.Unix(1e9, 0)
	tests := []struct {
		name    string
		cfg     Config
		wantErr string
		check   func(t *testing.T, m *Manager)
	}{
		{name: "no slot configuration", cfg: Config{ZFS: z}, wantErr: "Config.Slots is required"},
		{name: "no zfs", cfg: Config{Slots: slots}, wantErr: "Config.ZFS is required"},
		{name: "the plugin's defaults", cfg: Config{Slots: slots, ZFS: z}, check: func(t *testing.T, m *Manager) {
			if _, ok := m.observer.(nopObserver); !ok {
				t.Errorf("observer %T, want the no-op", m.observer)
			}
			if m.concurrency != createConcurrency || m.pulls.spawn != nil || m.fetcher != nil || m.allocs != nil {
				t.Errorf("concurrency %d, spawn set %v, fetcher %v, allocs %v; want %d, unset, nil, nil",
					m.concurrency, m.pulls.spawn != nil, m.fetcher, m.allocs, createConcurrency)
			}
			if d := time.Since(m.now()); d < 0 || d > time.Minute {
				t.Errorf("clock %s off the real one", d)
			}
		}},
		{name: "an observer", cfg: Config{Slots: slots, ZFS: z, Observer: &recordingObserver{}}, check: func(t *testing.T, m *Manager) {
			if _, ok := m.observer.(*recordingObserver); !ok {
				t.Errorf("observer %T, want the one configured", m.observer)
			}
		}},
		{name: "the simulation's clock and order", cfg: Config{Slots: slots, ZFS: z, Sim: &Simulation{
			Now:        func() time.Time { return simNow },
			Sleep:      func(context.Context, time.Duration) error { return context.Canceled },
			Spawn:      func(fn func()) { go fn() },
			Sequential: true,
		}}, check: func(t *testing.T, m *Manager) {
			if !m.now().Equal(simNow) || m.sleep(t.Context(), time.Hour) != context.Canceled {
				t.Errorf("now %s, sleep %v: not the simulation's", m.now(), m.sleep(t.Context(), time.Hour))
			}
			if m.concurrency != 1 || m.pulls.spawn == nil {
				t.Errorf("concurrency %d, spawn set %v; want 1, set", m.concurrency, m.pulls.spawn != nil)
			}
		}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			m, err := NewManager(tc.cfg)
			if tc.wantErr != "" {
				if err == nil || !strings.Contains(err.Error(), tc.wantErr) {
					t.Fatalf("NewManager: %v, want %q", err, tc.wantErr)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			tc.check(t, m)
		})
	}
}
