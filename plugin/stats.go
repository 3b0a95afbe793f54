package plugin

import (
	"context"
	"time"

	"github.com/hashicorp/nomad/plugins/device"
	"github.com/hashicorp/nomad/plugins/shared/structs"

	"github.com/nomad-device-zfs/nomad-device-zfs/internal/pause"
	"github.com/nomad-device-zfs/nomad-device-zfs/model"
)

// Stats streams per-slot usage: used, available, referenced and
// compressratio. The numbers come from the manager's latest scan, so they
// cost no zfs process and are as fresh as scan_interval; a response is sent
// when a newer view is published, at most once per interval (the client's,
// 1 s by default), and the client keeps the last one meanwhile. At 10,000
// slots, rebuilding and sending every instance's statistics on every tick
// was the plugin's main garbage.
func (p *Plugin) Stats(ctx context.Context, interval time.Duration) (<-chan *device.StatsResponse, error) {
	mgr, _, err := p.manager()
	if err != nil {
		return nil, err
	}
	if interval <= 0 {
		interval = time.Second
	}
	out := make(chan *device.StatsResponse)
	go func() {
		defer close(out)
		var sent *model.View
		for {
			v, updated := mgr.View()
			if v != nil && v != sent {
				select {
				case out <- &device.StatsResponse{Groups: statsGroups(v)}:
					sent = v
				case <-ctx.Done():
					return
				}
				if err := pause.For(ctx, interval); err != nil {
					return
				}
				continue
			}
			select {
			case <-ctx.Done():
				return
			case <-updated:
			}
		}
	}()
	return out, nil
}

func statsGroups(v *model.View) []*device.DeviceGroupStats {
	groups := make([]*device.DeviceGroupStats, 0, len(v.Classes))
	for i := range v.Classes {
		cv := &v.Classes[i]
		g := &device.DeviceGroupStats{
			Vendor:        Vendor,
			Type:          DeviceType,
			Name:          cv.Class.Name,
			InstanceStats: map[string]*device.DeviceStats{},
		}
		for _, s := range cv.Slots {
			if !s.Exists {
				continue
			}
			d := &s.Info
			g.InstanceStats[s.ID] = &device.DeviceStats{
				Summary: &structs.StatValue{
					IntNumeratorVal:   ptr(int64(d.Used)),
					IntDenominatorVal: ptr(int64(d.Used + d.Available)),
					Unit:              "bytes",
					Desc:              "used",
				},
				Stats: &structs.StatObject{Attributes: map[string]*structs.StatValue{
					"used":          bytesStat(d.Used, "space used by the dataset and its snapshots"),
					"available":     bytesStat(d.Available, "space available to the dataset"),
					"referenced":    bytesStat(d.Referenced, "data the dataset refers to"),
					"compressratio": {FloatNumeratorVal: ptr(d.CompressRatio), Unit: "x", Desc: "compression ratio"},
				}},
				Timestamp: v.ScannedAt,
			}
		}
		groups = append(groups, g)
	}
	return groups
}

func bytesStat(n uint64, desc string) *structs.StatValue {
	return &structs.StatValue{IntNumeratorVal: ptr(int64(n)), Unit: "bytes", Desc: desc}
}

func ptr[T any](v T) *T { return &v }
