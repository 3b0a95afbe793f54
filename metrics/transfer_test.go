package metrics

import (
	"testing"

	"github.com/nomad-device-zfs/nomad-device-zfs/model"
	"github.com/nomad-device-zfs/nomad-device-zfs/transfer"
)

// TestTransferBytes: the transfer's stream bytes, as its server and client
// report them (transfer.Observer), counted by direction and kind; both
// kinds served at 0 before any stream, so that a rate starts with the
// first one.
func TestTransferBytes(t *testing.T) {
	type report struct {
		sent bool
		kind string
		n    int
	}
	cases := []struct {
		name string
		reps []report
		// want is each series' value, by direction ("sent", "received")
		// and kind.
		want map[string]map[string]float64
	}{
		{name: "nothing moved yet", want: map[string]map[string]float64{
			"sent": {"replica": 0, "migration": 0}, "received": {"replica": 0, "migration": 0}}},
		{name: "a replica's increment sent in writes", reps: []report{
			{true, transfer.KindReplica, 256 << 10}, {true, transfer.KindReplica, 256 << 10}, {true, transfer.KindReplica, 1200}},
			want: map[string]map[string]float64{
				"sent": {"replica": 512<<10 + 1200, "migration": 0}, "received": {"replica": 0, "migration": 0}}},
		{name: "a migration received, a replica sent", reps: []report{
			{false, transfer.ObservedMigration, 4 << 20}, {true, transfer.KindReplica, 300}, {false, transfer.ObservedMigration, 7}},
			want: map[string]map[string]float64{
				"sent": {"replica": 300, "migration": 0}, "received": {"replica": 0, "migration": 4<<20 + 7}}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			m := New(&model.Config{Parent: "tank/nomad"}, "test")
			var obs transfer.Observer = m
			for _, r := range tc.reps {
				if r.sent {
					obs.Sent(r.kind, r.n)
				} else {
					obs.Received(r.kind, r.n)
				}
			}
			fs := scrapeHandler(t, m)
			for dir, kinds := range tc.want {
				for kind, v := range kinds {
					expect(t, fs, "nomad_device_zfs_transfer_"+dir+"_bytes_total", map[string]string{"kind": kind}, v)
				}
			}
		})
	}
}
