package metrics

import (
	"context"
	"testing"

	"github.com/nomad-device-zfs/nomad-device-zfs/model"
	"github.com/nomad-device-zfs/nomad-device-zfs/zfs"
	"github.com/nomad-device-zfs/nomad-device-zfs/zfs/zfstest"
)

// TestCommandLabels runs commands through the counting runner over the
// fake zfs: each is counted under its pool (a configured one only), its
// subcommand (a known one only) and its result.
func TestCommandLabels(t *testing.T) {
	cases := []struct {
		name string
		cmd  string
		args []string
		want map[string]string
	}{
		{"version: no pool", "zfs", []string{"version"},
			map[string]string{"pool": "", "command": "zfs", "subcommand": "version", "result": "ok"}},
		{"a pool's health", "zpool", []string{"list", "-H", "-p", "-o", "name,size,allocated,free,health,readonly", "tank"},
			map[string]string{"pool": "tank", "command": "zpool", "subcommand": "list", "result": "ok"}},
		{"a create", "zfs", []string{"create", "-o", "quota=1G", "tank/nomad/x"},
			map[string]string{"pool": "tank", "subcommand": "create", "result": "ok"}},
		{"a destroy of what is gone", "zfs", []string{"destroy", "tank/nomad/gone"},
			map[string]string{"pool": "tank", "subcommand": "destroy", "result": "not_exist"}},
		{"a pool the configuration does not name", "zfs", []string{"list", "-H", "other"},
			map[string]string{"pool": "", "subcommand": "list", "result": "not_exist"}},
		{"a subcommand the plugin never runs", "zfs", []string{"upgrade", "-a"},
			map[string]string{"pool": "", "subcommand": "other"}},
		{"not zfs at all", "zdb", []string{"-l", "tank"},
			map[string]string{"command": "other", "subcommand": "other"}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			f := zfstest.New(zfstest.Options{MountRoot: t.TempDir()})
			if err := f.AddPool("tank", 1<<30); err != nil {
				t.Fatal(err)
			}
			if err := zfs.NewClient(f).Create(t.Context(), "tank/nomad", nil); err != nil {
				t.Fatal(err)
			}
			m := New(&model.Config{Parent: "tank/nomad"}, "test")
			_, _ = m.Commands(f).Run(context.Background(), tc.cmd, tc.args...)
			expect(t, scrapeHandler(t, m), "nomad_device_zfs_command_duration_seconds", tc.want, 1)
		})
	}
}
