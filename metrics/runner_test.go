package metrics

import (
	"bytes"
	"context"
	"errors"
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

// runOnly is a runner that cannot stream.
type runOnly struct{ zfs.Runner }

// TestCommandsStream: the counting runner streams zfs send and receive
// through the runner it wraps, counted under their subcommand, so the
// transfer between nodes works with the endpoint on (it found no Stream
// method and every send and receive failed, e2e TestReplicaCost,
// 2026-11-28); over a runner that cannot stream it says so, as the zfs
// package does.
func TestCommandsStream(t *testing.T) {
	cases := []struct {
		name    string
		wrap    func(*zfstest.Fake) zfs.Runner
		wantErr error
		want    map[string]string // the receive's series
	}{
		{name: "over a runner that streams", wrap: func(f *zfstest.Fake) zfs.Runner { return f },
			want: map[string]string{"pool": "tank", "command": "zfs", "subcommand": "receive", "result": "ok"}},
		{name: "over one that cannot", wrap: func(f *zfstest.Fake) zfs.Runner { return runOnly{f} }, wantErr: zfs.ErrCannotStream},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			ctx := t.Context()
			f := zfstest.New(zfstest.Options{MountRoot: t.TempDir()})
			if err := f.AddPool("tank", 1<<30); err != nil {
				t.Fatal(err)
			}
			for _, ds := range []string{"tank/nomad", "tank/nomad/a"} {
				if err := zfs.NewClient(f).Create(ctx, ds, nil); err != nil {
					t.Fatal(err)
				}
			}
			if err := zfs.NewClient(f).Snapshot(ctx, "tank/nomad/a@s1", nil); err != nil {
				t.Fatal(err)
			}
			m := New(&model.Config{Parent: "tank/nomad"}, "test")
			c := zfs.NewClient(m.Commands(tc.wrap(f)))
			var stream bytes.Buffer
			err := c.Send(ctx, zfs.SendOptions{Snapshot: "tank/nomad/a@s1"}, &stream)
			if err == nil {
				err = c.Receive(ctx, zfs.ReceiveOptions{Target: "tank/nomad/b"}, &stream)
			}
			if !errors.Is(err, tc.wantErr) {
				t.Fatalf("send | receive: %v, want %v", err, tc.wantErr)
			}
			if tc.want == nil {
				return
			}
			fs := scrapeHandler(t, m)
			expect(t, fs, "nomad_device_zfs_command_duration_seconds", tc.want, 1)
			expect(t, fs, "nomad_device_zfs_command_duration_seconds", map[string]string{"subcommand": "send", "result": "ok"}, 1)
		})
	}
}
