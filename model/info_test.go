package model

import (
	"errors"
	"slices"
	"testing"

	"github.com/nomad-device-zfs/nomad-device-zfs/zfs"
)

// TestInfoKeepsWhatTheRowSays: a slot's Info answers as its row did, for
// every user property the scan reads and for one it does not, and the
// columns the fingerprint, Stats and status read are the row's.
func TestInfoKeepsWhatTheRowSays(t *testing.T) {
	full := map[string]string{}
	for i, p := range UserProps {
		full[p] = "v" + string(rune('a'+i))
	}
	tests := []struct {
		name string
		user map[string]string
	}{
		{name: "no properties", user: nil},
		{name: "every property", user: full},
		{name: "first and last only", user: map[string]string{UserProps[0]: "x", UserProps[len(UserProps)-1]: "y"}},
		{name: "a middle one", user: map[string]string{PropHolder: "alloc-1"}},
		{name: "someone else's property too", user: map[string]string{PropOwner: "tank/a", "other:prop": "z"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			d := zfs.Dataset{Name: "tank/a", Type: "filesystem", Used: 1, Available: 2, Referenced: 3,
				Quota: 4, Refquota: 5, Reservation: 6, Recordsize: 7, CompressRatio: 1.5,
				Compression: "lz4", Encryption: "off", Origin: "tank/golden@seed", GUID: "123456789",
				User: zfs.UserPropsOf(tt.user)}
			i := InfoOf(&d)
			for _, p := range append(slices.Clone(UserProps), "") {
				if got, want := i.User.Get(p), d.User.Get(p); got != want {
					t.Errorf("%s: %q, the row says %q", p, got, want)
				}
			}
			if i.User.Get("other:prop") != "" {
				t.Errorf("a property the scan does not read: %q", i.User.Get("other:prop"))
			}
			want := Info{Used: 1, Available: 2, Referenced: 3, Quota: 4, Refquota: 5,
				Reservation: 6, Recordsize: 7, CompressRatio: 1.5, Compression: "lz4", Encryption: "off",
				Origin: d.Origin, GUID: d.GUID, User: i.User}
			if i != want {
				t.Errorf("got %+v, want %+v", i, want)
			}
		})
	}
}

// TestKeptRowRebuildsTheSlot: after a failed scan, a slot rebuilt from
// the previous view's Info is the slot that view had.
func TestKeptRowRebuildsTheSlot(t *testing.T) {
	row := ownedRow("tank/nomad/scratch/scratch-1", StateHeld)
	row.User = zfs.UserPropsOf(map[string]string{PropOwner: row.Name, PropState: string(StateHeld),
		PropHolder: "alloc-1", PropGeneration: "3", PropSince: "0", PropHolderIndex: "42", PropRetainAs: "tank/x"})
	row.Origin, row.GUID, row.Used = "tank/golden@seed", "99", 1234
	good := BuildView(testCfg, Scan{Pools: onlinePool(), Sets: []zfs.Dataset{
		fsRow("tank/nomad", nil), ownedRow("tank/nomad/scratch", ""), row,
	}}, nil)
	failed := BuildView(testCfg, Scan{Pools: onlinePool(), ListErrs: map[string]error{"tank/nomad": errors.New("zfs list: signal: killed")}}, good)
	was, is := good.Classes[0].Slots[0], failed.Classes[0].Slots[0]
	is.Healthy, is.Reason = was.Healthy, was.Reason
	if was.Since.IsZero() || was.Holder != "alloc-1" || was.Generation != 3 || was.Info.User.Get(PropRetainAs) != "tank/x" {
		t.Fatalf("the first view did not read the row: %+v", was)
	}
	if !was.Same(is) || was.Since != is.Since || was.HolderIndex != is.HolderIndex || was.Info != is.Info ||
		was.Mountpoint != is.Mountpoint || was.Mounted != is.Mounted {
		t.Errorf("rebuilt\n%+v\nwas\n%+v", is, was)
	}
}
