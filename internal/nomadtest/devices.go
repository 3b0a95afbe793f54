package nomadtest

import (
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/hashicorp/nomad/api"
)

// WaitForNodeDevice polls the agent's node until it has the device group
// vendor/typ/name with exactly healthy healthy instances, and returns that
// group. Device changes reach the node record with a delay: a client sends
// them 5–10 s after the plugin reports them.
func (a *Agent) WaitForNodeDevice(t testing.TB, vendor, typ, name string, healthy int, timeout time.Duration) *api.NodeDeviceResource {
	t.Helper()
	var found *api.NodeDeviceResource
	err := a.poll(timeout, func() (bool, string) {
		node, _, err := a.Client().Nodes().Info(a.NodeID(), nil)
		if err != nil {
			return false, "reading node: " + err.Error()
		}
		var groups []*api.NodeDeviceResource
		if node.NodeResources != nil {
			groups = node.NodeResources.Devices
		}
		for _, g := range groups {
			if g.Vendor != vendor || g.Type != typ || g.Name != name {
				continue
			}
			if n := countHealthy(g); n != healthy {
				return false, fmt.Sprintf("%d healthy instances, want %d; node devices: %s", n, healthy, describeDevices(groups))
			}
			found = g
			return true, ""
		}
		return false, "no such group; node devices: " + describeDevices(groups)
	})
	if err != nil {
		a.fatalf(t, "waiting for device %s/%s/%s with %d healthy instances: %v", vendor, typ, name, healthy, err)
	}
	return found
}

// WaitForUnhealthy polls the node until every instance of the group is
// unhealthy with a description containing reason. Use it rather than a
// healthy count of 0 when the reason matters: a group can pass through
// other unhealthy states first (a pool being exported unmounts its datasets
// before it disappears).
func (a *Agent) WaitForUnhealthy(t testing.TB, vendor, typ, name, reason string, timeout time.Duration) *api.NodeDeviceResource {
	t.Helper()
	var found *api.NodeDeviceResource
	err := a.poll(timeout, func() (bool, string) {
		node, _, err := a.Client().Nodes().Info(a.NodeID(), nil)
		if err != nil {
			return false, "reading node: " + err.Error()
		}
		var groups []*api.NodeDeviceResource
		if node.NodeResources != nil {
			groups = node.NodeResources.Devices
		}
		for _, g := range groups {
			if g.Vendor != vendor || g.Type != typ || g.Name != name {
				continue
			}
			for _, inst := range g.Instances {
				if inst.Healthy || !strings.Contains(inst.HealthDescription, reason) {
					return false, "node devices: " + describeDevices(groups)
				}
			}
			found = g
			return len(g.Instances) > 0, "no instances"
		}
		return false, "no such group; node devices: " + describeDevices(groups)
	})
	if err != nil {
		a.fatalf(t, "waiting for device %s/%s/%s to be unhealthy with %q: %v", vendor, typ, name, reason, err)
	}
	return found
}

func countHealthy(g *api.NodeDeviceResource) int {
	n := 0
	for _, inst := range g.Instances {
		if inst.Healthy {
			n++
		}
	}
	return n
}

// describeDevices renders groups as "nomad/file/mock[a:healthy b:unhealthy(why)]".
func describeDevices(groups []*api.NodeDeviceResource) string {
	if len(groups) == 0 {
		return "none"
	}
	var parts []string
	for _, g := range groups {
		var insts []string
		for _, inst := range g.Instances {
			s := inst.ID + ":healthy"
			if !inst.Healthy {
				s = fmt.Sprintf("%s:unhealthy(%s)", inst.ID, inst.HealthDescription)
			}
			insts = append(insts, s)
		}
		parts = append(parts, fmt.Sprintf("%s/%s/%s[%s]", g.Vendor, g.Type, g.Name, strings.Join(insts, " ")))
	}
	return strings.Join(parts, ", ")
}
