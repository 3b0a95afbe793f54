package model

import (
	"strconv"
	"testing"
	"time"

	"github.com/nomad-device-zfs/nomad-device-zfs/zfs"
)

// scanOf is one scan's rows for n ready slots of class scratch, each with
// the plugin's user properties, as zfs list returns them.
func scanOf(n int) (*Config, Scan) {
	cfg := &Config{Parent: "tank/nomad", Classes: []Class{{Name: "scratch", Slots: n}}}
	sets := []zfs.Dataset{fsRow("tank/nomad", nil), ownedRow("tank/nomad/scratch", "")}
	for i := 1; i <= n; i++ {
		sets = append(sets, ownedRow(cfg.SlotDataset("scratch", SlotID("scratch", i)), StateReady))
	}
	return cfg, Scan{At: time.Unix(1700000000, 0), Pools: onlinePool(), Sets: sets}
}

// BenchmarkBuildView is the model's share of one scan: rows in, View out.
//
//	go test -run '^$' -bench BuildView -benchmem ./model
func BenchmarkBuildView(b *testing.B) {
	for _, n := range []int{10, 1000, 10000} {
		b.Run(strconv.Itoa(n), func(b *testing.B) {
			cfg, s := scanOf(n)
			b.ReportAllocs()
			for b.Loop() {
				BuildView(cfg, s, nil)
			}
		})
	}
}

// BenchmarkBuildViewTwoParents is BuildView of n slots in two classes, one
// below the block's parent and one below a parent of its own on another
// pool: what a second parent adds to the same number of rows.
//
//	go test -run '^$' -bench BuildView -benchmem ./model
func BenchmarkBuildViewTwoParents(b *testing.B) {
	for _, n := range []int{1000, 10000} {
		b.Run(strconv.Itoa(n), func(b *testing.B) {
			cfg := &Config{Parent: "tank/nomad", Classes: []Class{{Name: "bulk", Slots: n / 2}, {Name: "fast", Parent: "nvme/nomad", Slots: n / 2}}}
			sets := []zfs.Dataset{fsRow("tank/nomad", nil), ownedRow("tank/nomad/bulk", ""), fsRow("nvme/nomad", nil), ownedRow("nvme/nomad/fast", "")}
			for _, c := range cfg.Classes {
				for i := 1; i <= c.Slots; i++ {
					sets = append(sets, ownedRow(cfg.SlotDataset(c.Name, SlotID(c.Name, i)), StateReady))
				}
			}
			s := Scan{At: time.Unix(1700000000, 0), Pools: []zfs.Pool{{Name: "tank", Health: "ONLINE"}, {Name: "nvme", Health: "ONLINE"}}, Sets: sets}
			b.ReportAllocs()
			for b.Loop() {
				BuildView(cfg, s, nil)
			}
		})
	}
}

// BenchmarkViewSlot is the lookup Reserve and the fence make per slot.
func BenchmarkViewSlot(b *testing.B) {
	cfg, s := scanOf(10000)
	v := BuildView(cfg, s, nil)
	b.ReportAllocs()
	for b.Loop() {
		if sl, _ := v.Slot("scratch-7777"); sl == nil {
			b.Fatal("not found")
		}
	}
}

// BenchmarkPlanLifecycle is the model's share of a pass on the watcher's
// news: the plan over every slot of a view of n ready slots, one of them
// held by an allocation that has ended (the release to start).
//
//	go test -run '^$' -bench PlanLifecycle -benchmem ./model
func BenchmarkPlanLifecycle(b *testing.B) {
	for _, n := range []int{1, 1000, 10000} {
		b.Run(strconv.Itoa(n), func(b *testing.B) {
			cfg, s := scanOf(n)
			v := BuildView(cfg, s, nil)
			held := &v.Classes[0].Slots[n-1]
			held.State, held.Holder = StateHeld, "A"
			snap := &Snapshot{Allocs: []Alloc{{ID: "A", ClientStatus: "complete", DesiredStatus: "run"}}}
			b.ReportAllocs()
			for b.Loop() {
				if steps := PlanLifecycle(v, snap); len(steps) != 1 {
					b.Fatalf("%d steps, want the release", len(steps))
				}
			}
		})
	}
}

// BenchmarkPlanLifecycleBusyNode is PlanLifecycle on a node where every
// slot is held by a running allocation and one has ended: the snapshot
// has n allocations, and each held slot's holder is found by a search of
// it, so the pass grows as n². Issue 31's item 6 (the ended holder found
// from the watcher's change set) is to make this flat.
//
//	go test -run '^$' -bench PlanLifecycleBusyNode -benchmem ./model
func BenchmarkPlanLifecycleBusyNode(b *testing.B) {
	for _, n := range []int{1, 1000} {
		b.Run(strconv.Itoa(n), func(b *testing.B) {
			cfg, s := scanOf(n)
			v := BuildView(cfg, s, nil)
			snap := &Snapshot{}
			for i := range v.Classes[0].Slots {
				sl := &v.Classes[0].Slots[i]
				id := "alloc-" + strconv.Itoa(i)
				sl.State, sl.Holder = StateHeld, id
				status := "running"
				if i == n-1 {
					status = "complete"
				}
				snap.Allocs = append(snap.Allocs, Alloc{ID: id, ClientStatus: status, DesiredStatus: "run",
					Devices: []Device{{Task: "t", Vendor: Vendor, Type: DeviceType, Name: "scratch", IDs: []string{sl.ID}}}})
			}
			b.ReportAllocs()
			for b.Loop() {
				if steps := PlanLifecycle(v, snap); len(steps) != 1 {
					b.Fatalf("%d steps, want the release", len(steps))
				}
				StoppingWaits(v, snap)
			}
		})
	}
}
