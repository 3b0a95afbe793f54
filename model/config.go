package model

import (
	"fmt"
	"slices"
	"strconv"
	"strings"
	"time"
)

// Config is the validated slot configuration: what plugin.SetConfig decodes
// and the CLI reads from the agent's files. Defaults are applied by the
// plugin's hclspec before it gets here.
type Config struct {
	// Parent is the operator-owned dataset the plugin works below, e.g.
	// "tank/nomad", and every class's unless the class names its own. The
	// plugin never creates, changes or destroys it.
	Parent string
	// Classes in name order.
	Classes []Class
	// ScanInterval is the period of the reconcile loop.
	ScanInterval time.Duration
}

// Class is one device group: Slots ready datasets under <parent>/<name>.
type Class struct {
	Name string
	// Parent is the operator-owned dataset the class's datasets live
	// below, e.g. "nvme/nomad" for a fast class on another pool; "" means
	// Config.Parent. Like that one, the plugin never creates, changes or
	// destroys it.
	Parent string
	Slots  int
	// Properties are set on every slot at creation, e.g. quota=1G.
	Properties map[string]string
	// MountPath is where a slot appears inside the task.
	MountPath string
	// NeedBytes is the pool space one more slot needs up front (its
	// reservation or refreservation), 0 when thin.
	NeedBytes uint64
	// Release says what happens to a slot's data when its holder ends.
	Release Release
	// FromSnapshot, if set, is a snapshot every slot is cloned from (a
	// golden image, e.g. "tank/golden/pg@seed"); a release re-clones it.
	FromSnapshot string
	// Sticky: when a holder ends and Nomad replaces it (its
	// NextAllocation, or a reschedule of a failed one), its data is parked
	// for the replacement instead of released, and handed to it, by
	// rename, when it reserves a slot of the class on this node.
	Sticky bool
	// StickyWait bounds how long parked data waits for a replacement that
	// Nomad has not created yet (a failed holder's reschedule).
	StickyWait time.Duration
	// Migrate: a sticky class's data follows its replacement to another
	// node (migrate.go).
	Migrate Migrate
	// Replicate: copies of a migrating class's held slots kept on other
	// nodes (replica.go); the plugin refuses the block until it is built.
	Replicate Replicate
}

// Migrates reports whether any class's data follows its replacement to
// other nodes.
func (c *Config) Migrates() bool {
	for _, cl := range c.Classes {
		if cl.Sticky && cl.Migrate.Enabled {
			return true
		}
	}
	return false
}

// MigrateWait is the longest a Reserve of slots ids may wait for data
// coming from another node: the longest migrate timeout of their classes,
// 0 when none of them migrates.
func (c *Config) MigrateWait(ids []string) time.Duration {
	var wait time.Duration
	for _, id := range ids {
		if class, ok := c.ClassOf(id); ok {
			if cl := c.Class(class); cl.Sticky && cl.Migrate.Enabled {
				wait = max(wait, cl.Migrate.Timeout)
			}
		}
	}
	return wait
}

// ClassParent is the parent dataset of a configured class: its own, or
// the block's. A class the configuration does not have gets the block's;
// a removed class's datasets are found by a scan (View.Removed), never
// named from here.
func (c *Config) ClassParent(class string) string {
	for i := range c.Classes {
		if c.Classes[i].Name == class && c.Classes[i].Parent != "" {
			return c.Classes[i].Parent
		}
	}
	return c.Parent
}

// Parents lists every parent dataset the plugin works below, each once:
// the block's first, then the classes' own in class order. Each is
// scanned, for its classes and for the removed classes below it.
func (c *Config) Parents() []string {
	out := []string{c.Parent}
	for _, cl := range c.Classes {
		if cl.Parent != "" && !slices.Contains(out, cl.Parent) {
			out = append(out, cl.Parent)
		}
	}
	return out
}

// ClassDataset is the dataset of a class, <parent>/<class>.
func (c *Config) ClassDataset(class string) string { return c.ClassParent(class) + "/" + class }

// SlotDataset is the dataset of slot id of class, <parent>/<class>/<id>.
func (c *Config) SlotDataset(class, id string) string { return c.ClassDataset(class) + "/" + id }

// Class returns the configured class by name; an unknown name gives a class
// with that name and nothing else (no slots, policy destroy).
func (c *Config) Class(name string) Class {
	for _, cl := range c.Classes {
		if cl.Name == name {
			return cl
		}
	}
	return Class{Name: name}
}

// HasClass reports whether the configuration has a class of that name.
func (c *Config) HasClass(name string) bool {
	for _, cl := range c.Classes {
		if cl.Name == name {
			return true
		}
	}
	return false
}

// ClassOf finds the class a configured slot ID belongs to.
func (c *Config) ClassOf(id string) (string, bool) {
	for _, cl := range c.Classes {
		if n, ok := SlotNumber(cl.Name, id); ok && n <= cl.Slots {
			return cl.Name, true
		}
	}
	return "", false
}

// Configured reports whether slot id of class is one the configuration
// has. One that is not (the class's slots were lowered, or the class
// removed) is an orphan: never offered, released when its holder ends, and
// then destroyed rather than made ready again.
func (c *Config) Configured(class, id string) bool {
	for _, cl := range c.Classes {
		if cl.Name == class {
			n, ok := SlotNumber(class, id)
			return ok && n <= cl.Slots
		}
	}
	return false
}

// SlotNumber reads n from a slot ID "<class>-<n>" (SlotID's inverse).
func SlotNumber(class, id string) (int, bool) {
	rest, ok := strings.CutPrefix(id, class+"-")
	if !ok || rest == "" || rest[0] == '0' {
		return 0, false
	}
	n, err := strconv.Atoi(rest)
	return n, err == nil && n > 0 && SlotID(class, n) == id
}

// SlotID names the n-th slot (1-based) of a class: "scratch-2". It is the
// device instance ID, stable across wipes, never numeric (Nomad parses a
// numeric ID as a number) and comma-free.
func SlotID(class string, n int) string { return fmt.Sprintf("%s-%d", class, n) }
