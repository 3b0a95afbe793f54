package plugin

import (
	"context"
	"crypto/sha256"
	"encoding/json"

	"github.com/hashicorp/nomad/plugins/device"
	"github.com/hashicorp/nomad/plugins/shared/structs"

	"github.com/nomad-device-zfs/nomad-device-zfs/hooks"
	"github.com/nomad-device-zfs/nomad-device-zfs/model"
	"github.com/nomad-device-zfs/nomad-device-zfs/zfs"
)

// Fingerprint streams one device group per class, zfs/dataset/<class>, with
// an instance per configured slot. It sends only when something changed:
// every change re-registers the node and creates evaluations. It never sends
// an error for a zfs failure — Nomad would disable the plugin until the agent
// restarts — but keeps the slots and marks them unhealthy with the reason.
// The stream ends only when ctx ends.
func (p *Plugin) Fingerprint(ctx context.Context) (<-chan *device.FingerprintResponse, error) {
	mgr, s, err := p.manager()
	if err != nil {
		return nil, err
	}
	out := make(chan *device.FingerprintResponse)
	go p.fingerprintLoop(ctx, mgr, transferAttributes(s), out)
	return out, nil
}

func (p *Plugin) fingerprintLoop(ctx context.Context, mgr *hooks.Manager, extra map[string]*structs.Attribute, out chan<- *device.FingerprintResponse) {
	defer close(out)
	var last [sha256.Size]byte
	sent := false
	for {
		v, updated := mgr.View()
		if v != nil {
			groups := withAttributes(deviceGroups(v), extra)
			d, ok := digest(groups)
			if !ok || !sent || d != last {
				select {
				case out <- device.NewFingerprint(groups...):
					last, sent = d, ok
				case <-ctx.Done():
					return
				}
			}
		}
		select {
		case <-ctx.Done():
			return
		case <-updated:
		}
	}
}

// digest identifies groups by every value they hold (their JSON, which
// covers every exported field, maps by sorted key): the stream keeps the
// digest of what it sent, not the groups, which at 10,000 slots were half
// a megabyte kept only to compare. ok is false when the groups cannot be
// encoded (a NaN attribute), and they are then sent.
func digest(groups []*device.DeviceGroup) (d [sha256.Size]byte, ok bool) {
	h := sha256.New()
	if err := json.NewEncoder(h).Encode(groups); err != nil {
		return d, false
	}
	h.Sum(d[:0])
	return d, true
}

// deviceGroups converts a view into Nomad device groups. Only stable values
// become attributes (every attribute change re-registers the node); sizes
// that move go to Stats.
func deviceGroups(v *model.View) []*device.DeviceGroup {
	groups := make([]*device.DeviceGroup, 0, len(v.Classes))
	for i := range v.Classes {
		cv := &v.Classes[i]
		g := &device.DeviceGroup{
			Vendor:     Vendor,
			Type:       DeviceType,
			Name:       cv.Class.Name,
			Attributes: classAttributes(cv),
		}
		// One allocation for the class's instances.
		var devs []device.Device
		if len(cv.Slots) > 0 {
			devs = make([]device.Device, len(cv.Slots))
			g.Devices = make([]*device.Device, len(cv.Slots))
		}
		for si := range cv.Slots {
			s := &cv.Slots[si]
			devs[si] = device.Device{ID: s.ID, Healthy: s.Healthy, HealthDesc: s.Reason}
			g.Devices[si] = &devs[si]
		}
		groups = append(groups, g)
	}
	return groups
}

// classAttributes are the group's typed attributes a job can constrain on,
// e.g. ${device.attr.quota} >= "1 GiB". Values come from the first existing
// slot (all slots of a class are created alike); before any exists, from the
// configuration.
func classAttributes(cv *model.ClassView) map[string]*structs.Attribute {
	attrs := map[string]*structs.Attribute{
		"pool":    structs.NewStringAttribute(zfs.PoolOf(cv.Dataset)),
		"dataset": structs.NewStringAttribute(cv.Dataset),
		"mount":   structs.NewStringAttribute(cv.Class.MountPath),
		"slots":   structs.NewIntAttribute(int64(cv.Class.Slots), ""),
	}
	if cv.Class.Replicate.Enabled() || len(cv.Replicas) > 0 {
		// The task groups this node keeps replicas of: a replacement's
		// device affinity prefers a node whose claim is a rename. Its
		// value moves only when a group's first replica comes or its
		// last goes, never with an increment (model.ReplicasAttr).
		attrs[model.ReplicasAttrName] = structs.NewStringAttribute(model.ReplicasAttr(cv.Replicas))
	}
	for _, s := range cv.Slots {
		if !s.Exists {
			continue
		}
		d := &s.Info
		attrs["compression"] = structs.NewStringAttribute(d.Compression)
		attrs["encryption"] = structs.NewStringAttribute(d.Encryption)
		attrs["recordsize"] = structs.NewIntAttribute(int64(d.Recordsize/1024), structs.UnitKiB)
		setSize(attrs, "quota", d.Quota)
		setSize(attrs, "refquota", d.Refquota)
		setSize(attrs, "reservation", d.Reservation)
		return attrs
	}
	for k, val := range cv.Class.Properties {
		switch k {
		case "compression", "encryption":
			attrs[k] = structs.NewStringAttribute(val)
		}
	}
	return attrs
}

// setSize adds a size attribute in MiB (Nomad has no byte unit); unset or
// zero means no limit and is left out.
func setSize(attrs map[string]*structs.Attribute, name string, bytes uint64) {
	if bytes > 0 {
		attrs[name] = structs.NewIntAttribute(int64(bytes>>20), structs.UnitMiB)
	}
}
