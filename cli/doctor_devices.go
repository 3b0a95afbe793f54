package cli

import (
	"context"
	"fmt"
	"io"
	"sort"
	"strings"

	"github.com/hashicorp/nomad/nomad/structs"
	psstructs "github.com/hashicorp/nomad/plugins/shared/structs"

	"github.com/nomad-device-zfs/nomad-device-zfs/devicemanager"
)

// devices prints the device groups of the hosted plugin's first
// fingerprint, as the agent would register them.
func (d *doctor) devices(ctx context.Context, h *devicemanager.Host) {
	d.begin("What Nomad would see")
	ctx, cancel := context.WithTimeout(ctx, fingerprintTimeout)
	defer cancel()
	groups, err := h.FirstFingerprint(ctx)
	if err != nil {
		d.fail("%v", err)
		return
	}
	d.rep.Devices = []deviceJSON{}
	for _, g := range groups {
		dj := deviceJSON{Name: g.ID().String(), Attributes: map[string]string{}}
		for k, a := range g.Attributes {
			dj.Attributes[k] = attrString(a)
		}
		for _, inst := range g.Instances {
			dj.Instances = append(dj.Instances, instanceJSON{ID: inst.ID, Healthy: inst.Healthy, Reason: doctorReason(inst)})
		}
		d.rep.Devices = append(d.rep.Devices, dj)
	}
	if !d.json {
		printDevices(d.e.stdout, d.rep.Devices)
	}
}

// doctorReason is an instance's health description, except that what only
// the read-only shim prevented reads as what the plugin would do.
func doctorReason(inst *structs.NodeDevice) string {
	if strings.Contains(inst.HealthDescription, shimMarker) {
		return "not created yet (the plugin creates it; doctor changes nothing)"
	}
	return inst.HealthDescription
}

// attrString prints an attribute as `nomad node status -verbose` does:
// "1024 MiB", "lz4".
func attrString(a *psstructs.Attribute) string {
	v := a.GoString()
	if a.Unit != "" {
		v = strings.TrimSuffix(v, a.Unit) + " " + a.Unit
	}
	return v
}

func printDevices(w io.Writer, groups []deviceJSON) {
	for i, g := range groups {
		if i > 0 {
			fmt.Fprintln(w)
		}
		healthy := 0
		for _, inst := range g.Instances {
			if inst.Healthy {
				healthy++
			}
		}
		keys := make([]string, 0, len(g.Attributes))
		for k := range g.Attributes {
			keys = append(keys, k)
		}
		sort.Strings(keys)
		kv := [][2]string{{"Device Group", g.Name}, {"Healthy", fmt.Sprintf("%d of %d", healthy, len(g.Instances))}}
		for _, k := range keys {
			kv = append(kv, [2]string{"attr." + k, g.Attributes[k]})
		}
		var b strings.Builder
		keyValues(&b, kv)
		fmt.Fprint(w, indentLines(b.String(), "  "))
		rows := make([][]string, 0, len(g.Instances))
		for _, inst := range g.Instances {
			rows = append(rows, []string{inst.ID, fmt.Sprint(inst.Healthy), inst.Reason})
		}
		b.Reset()
		table(&b, []string{"Instance", "Healthy", "Reason"}, rows)
		fmt.Fprint(w, "\n"+indentLines(b.String(), "  "))
	}
}

func indentLines(s, prefix string) string {
	lines := strings.SplitAfter(s, "\n")
	for i, l := range lines {
		if l != "" {
			lines[i] = prefix + l
		}
	}
	return strings.Join(lines, "")
}
