package sim

import (
	"context"
	"fmt"
	"io/fs"
	"path/filepath"
	"slices"
	"strconv"
	"strings"

	"github.com/nomad-device-zfs/nomad-device-zfs/model"
	"github.com/nomad-device-zfs/nomad-device-zfs/zfs"
)

// What a node claims, or may claim, holds to its class (docs/lifecycle.md,
// X8-X10), read after every event from each node's datasets as zfs lists
// them, against the class's configuration and the values the node's own
// plugins wrote: a copy is the receiver's, whatever its sender put in the
// stream (xhostile.go).

// xGot are the properties checkCopies reads. Not referenced: asked for
// any space property, the fake scans every dataset's files; X10 sums the
// files of what it holds instead (bytesAt).
var xGot = append([]string{"type", "guid", "quota", "refquota", "compression", "readonly"}, model.UserProps...)

// followed reports whether X9 follows property k: one of the plugin's own,
// or readonly.
func followed(k string) bool { return k == "readonly" || slices.Contains(model.UserProps, k) }

// xrow is one dataset below the parent as zfs get reads it: each
// property's value and source.
type xrow struct {
	name          string
	value, source map[string]string
}

// rows reads every dataset below the parent on n, in one zfs get (the
// world's own read, past the plugin's runner and its faults).
func (n *xnode) rows() ([]xrow, error) {
	out, err := n.fake.Run(context.Background(), "zfs", "get", "-H", "-p", "-r", "-o", "name,property,value,source",
		strings.Join(xGot, ","), parent)
	if err != nil {
		return nil, err
	}
	var rows []xrow
	for _, l := range strings.Split(strings.TrimSpace(string(out)), "\n") {
		f := strings.Split(l, "\t")
		if len(f) != 4 {
			return nil, fmt.Errorf("zfs get: line %q", l)
		}
		if len(rows) == 0 || rows[len(rows)-1].name != f[0] {
			rows = append(rows, xrow{name: f[0], value: map[string]string{}, source: map[string]string{}})
		}
		rows[len(rows)-1].value[f[1]], rows[len(rows)-1].source[f[1]] = f[2], f[3]
	}
	return rows, nil
}

// checkCopies holds what a node claims, or may claim, to its class, after
// every event: every slot held or ready, and all parked data (claimable:
// a copy received whole, or the allocation's own data parked on its node).
//
// X8, a claimed slot carries its class's limits: quota, refquota and
// compression as the class sets them on this node (model.ReceiveProps sets
// them on every receive; without it a claimed copy has none, or its
// sender's).
//
// X9, no property of the plugin's own comes from a peer: every value of
// one of the plugin's properties, and readonly=on, on any dataset below
// the parent is a value this node's plugins wrote (model.ReceiveExclude
// keeps a stream's out). The fake keeps no "received" source, so the
// values tell; a hostile sender plants values no plugin writes.
//
// X10, a copy is claimed only whole, one filesystem, within its class's
// limits and of its sender's data: no slot or parked data has a dataset
// below it (a replication stream: model.CopyNotOneFilesystem), or more
// bytes of files than the class's refquota or quota
// (model.CopyOverLimits); and no parked data holds a snapshot no plugin
// took (foreign data under the planned name: the transfer's check of the
// guid).
func (w *XWorld) checkCopies() {
	c := w.cfg.Class("pg")
	var limits []string
	for _, p := range []string{"quota", "refquota"} {
		if _, ok := c.Properties[p]; ok {
			limits = append(limits, p)
		}
	}
	for _, n := range w.nodes {
		rows, err := n.rows()
		if err != nil {
			w.violate("harness", "zfs get on %s: %v", n.name, err)
			return
		}
		for _, r := range rows {
			for _, k := range xGot {
				if v := r.value[k]; followed(k) && v != "-" && !(k == "readonly" && v == "off") && !n.wrote[k][v] {
					w.violate("X9", "%s: %s has %s=%s (%s), a value no plugin of %s wrote: it came from a peer", n.name, r.name, k, v,
						r.source[k], n.name)
				}
			}
			if !w.claimable(r) {
				continue
			}
			what := fmt.Sprintf("%s %s", model.State(r.value[model.PropState]), r.name)
			size := bytesAt(n.fake.DataDir(r.name))
			for _, p := range limits {
				limit, _ := zfs.ParseSize(c.Properties[p])
				if got, _ := strconv.ParseUint(r.value[p], 10, 64); got != limit {
					w.violate("X8", "%s: %s has %s=%s (%s), not the class's %s", n.name, what, p, r.value[p], r.source[p], c.Properties[p])
				}
				if limit > 0 && size > limit {
					w.violate("X10", "%s: %s holds %d bytes of files, more than the class's %s %s", n.name, what, size, p, c.Properties[p])
				}
			}
			if want := c.Properties["compression"]; want != "" && r.value["compression"] != want {
				w.violate("X8", "%s: %s has compression=%s (%s), not the class's %s", n.name, what, r.value["compression"],
					r.source["compression"], want)
			}
			for _, b := range rows {
				switch {
				case strings.HasPrefix(b.name, r.name+"/"):
					w.violate("X10", "%s: %s has a dataset below it: %s", n.name, what, b.name)
				case strings.HasPrefix(b.name, r.name+"@") && r.value[model.PropState] == string(model.StateParked) &&
					!w.taken(b.value["guid"]):
					w.violate("X10", "%s: %s holds %s (guid %s), a snapshot no plugin took", n.name, what, b.name, b.value["guid"])
				}
			}
		}
	}
}

// claimable reports whether r is what X8 and X10 hold to the class: a slot
// held or ready, or parked data, by its own mark (a dataset below one
// inherits it).
func (w *XWorld) claimable(r xrow) bool {
	if r.value["type"] != "filesystem" || r.source[model.PropState] != "local" {
		return false
	}
	switch st := model.State(r.value[model.PropState]); {
	case st == model.StateParked:
		return true
	case st == model.StateHeld || st == model.StateReady:
		return r.name == w.cfg.SlotDataset("pg", "pg-1") || r.name == w.cfg.SlotDataset("pg", "pg-2")
	}
	return false
}

// taken reports whether guid is a snapshot's that a plugin took, on
// either node.
func (w *XWorld) taken(guid string) bool {
	_, ok := w.snapContent[guid]
	return ok
}

// bytesAt sums the sizes of the files below dir.
func bytesAt(dir string) uint64 {
	var n uint64
	if dir == "" {
		return 0
	}
	_ = filepath.WalkDir(dir, func(_ string, e fs.DirEntry, err error) error {
		if err == nil && e.Type().IsRegular() {
			if info, err := e.Info(); err == nil {
				n += uint64(info.Size())
			}
		}
		return nil
	})
	return n
}
