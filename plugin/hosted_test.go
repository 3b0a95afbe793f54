package plugin

import (
	"context"
	"testing"
	"time"

	hclog "github.com/hashicorp/go-hclog"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	"github.com/nomad-device-zfs/nomad-device-zfs/hooks"
	"github.com/nomad-device-zfs/nomad-device-zfs/model"
	"github.com/nomad-device-zfs/nomad-device-zfs/zfs"
	"github.com/nomad-device-zfs/nomad-device-zfs/zfs/zfstest"
)

// stoppingHolder is the allocation source of a slot held by an allocation
// that is stopping, and its replacement placed on it: a Reserve waits.
type stoppingHolder struct{ snap model.Snapshot }

func (s *stoppingHolder) Refresh(context.Context) (model.Snapshot, error) {
	snap := s.snap
	snap.At = time.Now()
	return snap, nil
}

func (s *stoppingHolder) Lookup(context.Context, string) (model.Alloc, bool, error) {
	return model.Alloc{}, false, nil
}

func (s *stoppingHolder) RunningLocally(context.Context, string) (bool, error) { return true, nil }

func onSlot(id string, index uint64, client, desired string) model.Alloc {
	return model.Alloc{ID: id, Namespace: "default", CreateIndex: index, ClientStatus: client, DesiredStatus: desired,
		Devices: []model.Device{{Task: "t", Vendor: Vendor, Type: DeviceType, Name: "scratch", IDs: []string{"scratch-1"}}}}
}

// TestHostedReserveTimeoutCountsOnTheHostsClock: a hosted plugin's Reserve
// ends at the host's clock plus reserve_timeout, so a simulation's time
// ends a waiting Reserve. Here the host's clock is two minutes behind:
// the deadline has passed, and the wait on a stopping holder ends at once
// (by the real clock it would take reserve_timeout, a minute).
func TestHostedReserveTimeoutCountsOnTheHostsClock(t *testing.T) {
	f := zfstest.New(zfstest.Options{MountRoot: t.TempDir()})
	must(t, f.AddPool("tank", 1<<30))
	must(t, zfs.NewClient(f).Create(t.Context(), "tank/nomad", nil))
	cfg := model.Config{Parent: "tank/nomad", ScanInterval: time.Hour,
		Classes: []model.Class{{Name: "scratch", Slots: 1, MountPath: "/data"}}}
	allocs := &stoppingHolder{snap: model.Snapshot{NodeID: "node", Index: 30,
		Allocs: []model.Alloc{onSlot("A", 10, "running", "run")}}}
	mgr, err := hooks.NewManager(hooks.Config{Slots: &cfg, ZFS: zfs.NewClient(f), Allocs: allocs})
	must(t, err)
	mgr.OnAllocs(allocs.snap)
	mgr.Reconcile(t.Context()) // creates scratch-1
	mgr.Reconcile(t.Context()) // records A
	if v, _ := mgr.View(); v.Classes[0].Slots[0].Holder != "A" {
		t.Fatalf("scratch-1 is not held by A: %+v", v.Classes[0].Slots[0])
	}
	allocs.snap.Allocs = []model.Alloc{onSlot("A", 10, "running", "stop"), onSlot("B", 20, "pending", "run")}

	behind := func() time.Time { return time.Now().Add(-2 * time.Minute) }
	p := NewHosted(hclog.NewNullLogger(), &Settings{Slots: cfg, ReserveTimeout: time.Minute}, Host{Manager: mgr, Now: behind})
	t.Cleanup(p.Shutdown)
	done := make(chan error, 1)
	go func() {
		_, err := p.Reserve([]string{"scratch-1"})
		done <- err
	}()
	select {
	case err := <-done:
		if status.Code(err) != codes.Unavailable {
			t.Errorf("Reserve = %v, want Unavailable: it gave up waiting for the stopping holder", err)
		}
	case <-time.After(20 * time.Second):
		t.Fatal("Reserve still waits: its deadline does not come from the host's clock")
	}
}
