package plugin

import (
	"context"
	"time"

	"github.com/hashicorp/nomad/plugins/device"
	"github.com/hashicorp/nomad/plugins/shared/structs"

	"github.com/nomad-device-zfs/nomad-device-zfs/model"
)

// Stats streams per-slot usage every interval: used, available, referenced
// and compressratio. The numbers come from the manager's latest scan, so a
// 1 s stats interval (Nomad's default) costs no zfs process; they are as
// fresh as scan_interval. They are built once per published view, not on
// every tick: at 10,000 slots a rebuild per second was the plugin's main
// garbage.
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
		ticker := time.NewTicker(interval)
		defer ticker.Stop()
		var built *model.View
		var groups []*device.DeviceGroupStats
		for {
			if v, _ := mgr.View(); v != nil {
				if v != built {
					built, groups = v, statsGroups(v)
				}
				select {
				case out <- &device.StatsResponse{Groups: groups}:
				case <-ctx.Done():
					return
				}
			}
			select {
			case <-ctx.Done():
				return
			case <-ticker.C:
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
