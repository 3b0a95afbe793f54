package zfs

import (
	"testing"

	gozfs "github.com/mistifyio/go-zfs/v3"
)

// TestNamesMatchGoZFS holds the dataset types and pool health this package
// reports to go-zfs's constants, the names the ecosystem uses.
func TestNamesMatchGoZFS(t *testing.T) {
	cases := []struct{ name, ours, theirs string }{
		{"filesystem", DatasetFilesystem, gozfs.DatasetFilesystem},
		{"snapshot", DatasetSnapshot, gozfs.DatasetSnapshot},
		{"volume", DatasetVolume, gozfs.DatasetVolume},
		{"online", PoolOnline, gozfs.ZpoolOnline},
		{"degraded", PoolDegraded, gozfs.ZpoolDegraded},
		{"faulted", PoolFaulted, gozfs.ZpoolFaulted},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			if tc.ours != tc.theirs {
				t.Errorf("zfs says %q, go-zfs %q", tc.ours, tc.theirs)
			}
		})
	}
}
