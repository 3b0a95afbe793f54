package hooks

import (
	"context"
	"maps"
	"strconv"
	"testing"
	"time"

	"github.com/nomad-device-zfs/nomad-device-zfs/model"
	"github.com/nomad-device-zfs/nomad-device-zfs/zfs"
)

// rowsZFS answers every command of a Reserve from fixed rows: the
// benchmark measures the plugin, not zfs.
type rowsZFS struct {
	ZFS
	rows map[string][]zfs.Dataset
}

func (z rowsZFS) List(_ context.Context, root string, _ []string) ([]zfs.Dataset, error) {
	return z.rows[root], nil
}
func (z rowsZFS) Set(context.Context, string, map[string]string) error { return nil }

// BenchmarkReserve is one Reserve on a node of n slots of a slot the
// watcher's pass already recorded as held by the caller, the only
// allocation naming it (a ready slot is recorded by its first Reserve, and
// the stubs below keep no writes, so each iteration is this path); Nomad's
// answer and zfs are stubs, so what is timed is the plugin's own work (the
// lookup, the fence's decision on a fresh answer, the bookkeeping).
//
//	go test -run '^$' -bench Reserve -benchmem ./hooks
func BenchmarkReserve(b *testing.B) {
	for _, n := range []int{4, 10000} {
		b.Run(strconv.Itoa(n), func(b *testing.B) {
			cfg := &model.Config{Parent: "tank/nomad", ScanInterval: time.Hour,
				Classes: []model.Class{{Name: "scratch", Slots: n, MountPath: "/data"}}}
			mount := func(d zfs.Dataset) zfs.Dataset { d.Mountpoint, d.Mounted = "/"+d.Name, true; return d }
			sets := []zfs.Dataset{mount(zfs.Dataset{Name: "tank/nomad", Type: "filesystem"}),
				mount(zfs.Dataset{Name: "tank/nomad/scratch", Type: "filesystem", User: zfs.UserPropsOf(model.ClassProps("tank/nomad/scratch"))})}
			rows := map[string][]zfs.Dataset{}
			id := model.SlotID("scratch", n)
			for i := 1; i <= n; i++ {
				ds := cfg.SlotDataset("scratch", model.SlotID("scratch", i))
				props := model.NewSlotProps(cfg.Classes[0], ds, 1, 0, time.Unix(0, 0))
				if model.SlotID("scratch", i) == id {
					maps.Copy(props, model.HeldProps("B", 10, time.Unix(0, 0)))
				}
				d := mount(zfs.Dataset{Name: ds, Type: "filesystem", User: zfs.UserPropsOf(props)})
				sets = append(sets, d)
				rows[ds] = []zfs.Dataset{d}
			}
			fa := &fakeAllocs{}
			fa.set(alloc("B", 10, "pending", "run", id))
			m := mustManager(b, Config{Slots: cfg, ZFS: rowsZFS{rows: rows}, Allocs: fa})
			m.publish(model.BuildView(cfg, model.Scan{At: time.Now(), Pools: []zfs.Pool{{Name: "tank", Health: "ONLINE"}}, Sets: sets}, nil))
			m.storeSnapshot(model.Snapshot{})
			b.ReportAllocs()
			for b.Loop() {
				if _, err := m.Reserve(b.Context(), []string{id}); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}
