package plugin

import (
	"reflect"
	"testing"

	"github.com/hashicorp/nomad/plugins/device"
	"github.com/hashicorp/nomad/plugins/shared/structs"

	"github.com/nomad-device-zfs/nomad-device-zfs/hooks"
	"github.com/nomad-device-zfs/nomad-device-zfs/model"
	"github.com/nomad-device-zfs/nomad-device-zfs/zfs"
)

func slotRow(name string) model.Info {
	return model.InfoOf(&zfs.Dataset{
		Name: name, Type: "filesystem", Mountpoint: "/" + name, Mounted: true,
		Quota: 1 << 30, Compression: "lz4", Encryption: "off", Recordsize: 128 << 10,
		Used: 100, Available: 900, Referenced: 50, CompressRatio: 1.5,
	})
}

func testView() *model.View {
	return &model.View{
		Pool: &zfs.Pool{Name: "tank", Health: "ONLINE"},
		Classes: []model.ClassView{{
			Class:   model.Class{Name: "scratch", Slots: 2, MountPath: "/data"},
			Dataset: "tank/nomad/scratch",
			Slots: []model.Slot{
				{ID: "scratch-1", Class: "scratch", Dataset: "tank/nomad/scratch/scratch-1", Exists: true, Healthy: true,
					Mountpoint: "/tank/nomad/scratch/scratch-1", Info: slotRow("tank/nomad/scratch/scratch-1")},
				{ID: "scratch-2", Class: "scratch", Dataset: "tank/nomad/scratch/scratch-2", Reason: "not created yet"},
			},
		}},
	}
}

func TestDeviceGroups(t *testing.T) {
	groups := deviceGroups(testView())
	if len(groups) != 1 {
		t.Fatalf("got %d groups", len(groups))
	}
	g := groups[0]
	if err := g.Validate(); err != nil {
		t.Fatalf("Nomad would reject the group: %v", err)
	}
	if g.Vendor != "zfs" || g.Type != "dataset" || g.Name != "scratch" {
		t.Errorf("group %s/%s/%s", g.Vendor, g.Type, g.Name)
	}
	wantDevices := []*device.Device{
		{ID: "scratch-1", Healthy: true},
		{ID: "scratch-2", Healthy: false, HealthDesc: "not created yet"},
	}
	if !reflect.DeepEqual(g.Devices, wantDevices) {
		t.Errorf("devices %+v", g.Devices)
	}
	wantAttrs := map[string]*structs.Attribute{
		"pool":        structs.NewStringAttribute("tank"),
		"dataset":     structs.NewStringAttribute("tank/nomad/scratch"),
		"mount":       structs.NewStringAttribute("/data"),
		"slots":       structs.NewIntAttribute(2, ""),
		"compression": structs.NewStringAttribute("lz4"),
		"encryption":  structs.NewStringAttribute("off"),
		"recordsize":  structs.NewIntAttribute(128, structs.UnitKiB),
		"quota":       structs.NewIntAttribute(1024, structs.UnitMiB),
	}
	if !reflect.DeepEqual(g.Attributes, wantAttrs) {
		t.Errorf("attributes\n got %v\nwant %v", g.Attributes, wantAttrs)
	}
	// A job constraint `${device.attr.quota} >= "1 GiB"` must hold.
	want := structs.ParseAttribute("1 GiB")
	if cmp, ok := g.Attributes["quota"].Compare(want); !ok || cmp < 0 {
		t.Errorf("quota attribute does not compare >= 1 GiB: cmp=%d ok=%v", cmp, ok)
	}
}

// TestDeviceGroupsStableAcrossUsage: sizes change with every write; they
// must not change the fingerprint (each change re-registers the node).
func TestDeviceGroupsStableAcrossUsage(t *testing.T) {
	a, b := testView(), testView()
	b.Classes[0].Slots[0].Info.Used = 12345
	b.Classes[0].Slots[0].Info.Available = 1
	b.Classes[0].Slots[0].Info.Referenced = 999
	if !reflect.DeepEqual(deviceGroups(a), deviceGroups(b)) {
		t.Fatal("usage changed the fingerprint")
	}
}

func TestReservation(t *testing.T) {
	scratch := model.Class{Name: "scratch", MountPath: "/data"}
	pg := model.Class{Name: "pg-seed", MountPath: "/zfs/pg-seed"}
	slot := func(id, ds string) model.Slot {
		return model.Slot{ID: id, Dataset: ds, Mountpoint: "/" + ds, WantMountpoint: "/" + ds}
	}

	cases := []struct {
		name       string
		grants     []hooks.Grant
		wantMounts []*device.Mount
		wantEnvs   map[string]string
	}{
		{
			name:       "one slot",
			grants:     []hooks.Grant{{Slot: slot("scratch-1", "tank/nomad/scratch/scratch-1"), Class: scratch}},
			wantMounts: []*device.Mount{{TaskPath: "/data", HostPath: "/tank/nomad/scratch/scratch-1"}},
			wantEnvs: map[string]string{
				"ZFS_SCRATCH_DATASET":   "tank/nomad/scratch/scratch-1",
				"ZFS_SCRATCH_HOST_PATH": "/tank/nomad/scratch/scratch-1",
				"ZFS_SCRATCH_MOUNT":     "/data",
				"ZFS_SCRATCH_ID":        "scratch-1",
			},
		},
		{
			name: "two slots of one class (count = 2)",
			grants: []hooks.Grant{
				{Slot: slot("scratch-2", "tank/nomad/scratch/scratch-2"), Class: scratch},
				{Slot: slot("scratch-1", "tank/nomad/scratch/scratch-1"), Class: scratch},
			},
			wantMounts: []*device.Mount{
				{TaskPath: "/data/scratch-2", HostPath: "/tank/nomad/scratch/scratch-2"},
				{TaskPath: "/data/scratch-1", HostPath: "/tank/nomad/scratch/scratch-1"},
			},
			wantEnvs: map[string]string{
				"ZFS_SCRATCH_DATASET":   "tank/nomad/scratch/scratch-2,tank/nomad/scratch/scratch-1",
				"ZFS_SCRATCH_HOST_PATH": "/tank/nomad/scratch/scratch-2,/tank/nomad/scratch/scratch-1",
				"ZFS_SCRATCH_MOUNT":     "/data/scratch-2,/data/scratch-1",
				"ZFS_SCRATCH_ID":        "scratch-2,scratch-1",
			},
		},
		{
			name:       "class name with dash",
			grants:     []hooks.Grant{{Slot: slot("pg-seed-1", "tank/nomad/pg-seed/pg-seed-1"), Class: pg}},
			wantMounts: []*device.Mount{{TaskPath: "/zfs/pg-seed", HostPath: "/tank/nomad/pg-seed/pg-seed-1"}},
			wantEnvs: map[string]string{
				"ZFS_PG_SEED_DATASET":   "tank/nomad/pg-seed/pg-seed-1",
				"ZFS_PG_SEED_HOST_PATH": "/tank/nomad/pg-seed/pg-seed-1",
				"ZFS_PG_SEED_MOUNT":     "/zfs/pg-seed",
				"ZFS_PG_SEED_ID":        "pg-seed-1",
			},
		},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			res := reservation(tc.grants)
			if !reflect.DeepEqual(res.Mounts, tc.wantMounts) {
				t.Errorf("mounts %+v", res.Mounts)
			}
			if !reflect.DeepEqual(res.Envs, tc.wantEnvs) {
				t.Errorf("envs %v", res.Envs)
			}
		})
	}
}

func TestStatsGroups(t *testing.T) {
	groups := statsGroups(testView())
	st := groups[0].InstanceStats
	if len(st) != 1 {
		t.Fatalf("stats for %d instances, want only the existing one", len(st))
	}
	s := st["scratch-1"]
	attr := s.Stats.Attributes
	if *attr["used"].IntNumeratorVal != 100 || *attr["available"].IntNumeratorVal != 900 ||
		*attr["referenced"].IntNumeratorVal != 50 || *attr["compressratio"].FloatNumeratorVal != 1.5 {
		t.Errorf("stats %+v", attr)
	}
	if *s.Summary.IntNumeratorVal != 100 || *s.Summary.IntDenominatorVal != 1000 {
		t.Errorf("summary %+v", s.Summary)
	}
}

// TestSameStats: a view is sent again only when an instance's numbers
// changed, or which slots exist.
func TestSameStats(t *testing.T) {
	cases := []struct {
		name   string
		change func(v *model.View)
		same   bool
	}{
		{name: "rescanned, nothing changed", change: func(v *model.View) { v.Classes[0].Slots[0].Healthy = false }, same: true},
		{name: "used grew", change: func(v *model.View) { v.Classes[0].Slots[0].Info.Used++ }},
		{name: "available shrank", change: func(v *model.View) { v.Classes[0].Slots[0].Info.Available-- }},
		{name: "referenced changed", change: func(v *model.View) { v.Classes[0].Slots[0].Info.Referenced = 7 }},
		{name: "compressratio changed", change: func(v *model.View) { v.Classes[0].Slots[0].Info.CompressRatio = 2 }},
		{name: "a slot was created", change: func(v *model.View) { v.Classes[0].Slots[1].Exists = true }},
		{name: "a class more", change: func(v *model.View) { v.Classes = append(v.Classes, v.Classes[0]) }},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			v := testView()
			tc.change(v)
			if got := sameStats(testView(), v); got != tc.same {
				t.Errorf("sameStats = %v, want %v", got, tc.same)
			}
		})
	}
}

// TestFingerprintDigest: the fingerprint is sent again exactly when a
// value in its groups changed.
func TestFingerprintDigest(t *testing.T) {
	cases := []struct {
		name   string
		change func(v *model.View)
		same   bool
	}{
		{name: "rescanned, nothing changed", change: func(v *model.View) { v.Classes[0].Slots[0].Info.Used++ }, same: true},
		{name: "a slot turned unhealthy", change: func(v *model.View) { v.Classes[0].Slots[0].Healthy = false }},
		{name: "another reason", change: func(v *model.View) { v.Classes[0].Slots[1].Reason = "cannot create" }},
		{name: "an attribute changed", change: func(v *model.View) { v.Classes[0].Slots[0].Info.Quota = 2 << 30 }},
		{name: "a slot more", change: func(v *model.View) {
			v.Classes[0].Slots = append(v.Classes[0].Slots, model.Slot{ID: "scratch-3"})
		}},
		{name: "a class more", change: func(v *model.View) { v.Classes = append(v.Classes, v.Classes[0]) }},
	}
	want, ok := digest(deviceGroups(testView()))
	if !ok {
		t.Fatal("the test view's groups have no digest")
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			v := testView()
			tc.change(v)
			got, ok := digest(deviceGroups(v))
			if !ok || (got == want) != tc.same {
				t.Errorf("same digest %v (ok %v), want %v", got == want, ok, tc.same)
			}
		})
	}
}
