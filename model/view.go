package model

import (
	"errors"
	"fmt"
	"sort"
	"strconv"
	"strings"
	"time"

	"github.com/nomad-device-zfs/nomad-device-zfs/zfs"
)

// View is what the plugin knows of its datasets after a scan: it is rebuilt
// from scratch each time, never patched.
type View struct {
	// ScannedAt is when the data was read.
	ScannedAt time.Time
	// Pool is the parent's pool, nil when unknown.
	Pool *zfs.Pool
	// Problem, when set, makes every slot unhealthy: pool missing or not
	// healthy, parent missing, scan failed.
	Problem string
	// ParentMountpoint is the parent dataset's mountpoint, "" when unknown:
	// every slot's path follows from it (Slot.WantMountpoint).
	ParentMountpoint string
	Classes          []ClassView
	// index finds a slot by ID: class and slot position. BuildView fills
	// it; a View built by hand is searched instead.
	index map[string]slotPos
}

type slotPos struct{ class, slot int }

// ClassView is one class's datasets.
type ClassView struct {
	Class   Class
	Dataset string
	// Exists: the class dataset exists and is owned.
	Exists bool
	// Info is the class dataset's row, when it exists.
	Info zfs.Dataset
	// Problem makes every slot of the class unhealthy.
	Problem string
	// Slots are the configured slots, <class>-1 .. <class>-N, in order.
	Slots []Slot
	// Retained are former slots kept aside by PolicySnapshot, newest first.
	Retained []Retained
}

// Retained is a former slot's data kept aside until it expires.
type Retained struct {
	Dataset string
	Holder  string
	Outcome string
	Since   time.Time
	Expires time.Time
	Info    zfs.Dataset
	// Strangers are the datasets and snapshots below it that are not the
	// plugin's: while there are any, it is not destroyed.
	Strangers []string
}

// SlotIndex finds a slot by ID: its class's index in Classes and its index
// in that class's Slots.
func (v *View) SlotIndex(id string) (class, slot int, ok bool) {
	s, cv := v.Slot(id)
	if s == nil {
		return 0, 0, false
	}
	if v.index != nil {
		p := v.index[id]
		return p.class, p.slot, true
	}
	for ci := range v.Classes {
		if &v.Classes[ci] == cv {
			for si := range cv.Slots {
				if &cv.Slots[si] == s {
					return ci, si, true
				}
			}
		}
	}
	return 0, 0, false
}

// Slot finds a slot by ID, and its class.
func (v *View) Slot(id string) (*Slot, *ClassView) {
	if v == nil {
		return nil, nil
	}
	if v.index != nil {
		p, ok := v.index[id]
		if !ok {
			return nil, nil
		}
		cv := &v.Classes[p.class]
		return &cv.Slots[p.slot], cv
	}
	for ci := range v.Classes {
		cv := &v.Classes[ci]
		for si := range cv.Slots {
			if cv.Slots[si].ID == id {
				return &cv.Slots[si], cv
			}
		}
	}
	return nil, nil
}

// Scan is the raw result of one scan: one zpool and one zfs process.
type Scan struct {
	At      time.Time
	Pools   []zfs.Pool
	PoolErr error
	Sets    []zfs.Dataset
	ListErr error
	// CreateErrs are the last failures to create a slot or class dataset,
	// by dataset name, shown as the slot's reason until it exists.
	CreateErrs map[string]string
}

// BuildView turns a scan into a View. When the scan failed for a
// reason other than a missing parent, the previous view's slot data is kept
// (the last good set) and every slot is marked unhealthy with the reason.
func BuildView(cfg *Config, s Scan, prev *View) *View {
	v := &View{ScannedAt: s.At}
	pool := zfs.PoolOf(cfg.Parent)
	for i := range s.Pools {
		if s.Pools[i].Name == pool {
			v.Pool = &s.Pools[i]
		}
	}

	byName := make(map[string]*zfs.Dataset, len(s.Sets))
	for i := range s.Sets {
		byName[s.Sets[i].Name] = &s.Sets[i]
	}
	switch {
	case errors.Is(s.PoolErr, zfs.ErrNotExist) || (s.PoolErr == nil && v.Pool == nil):
		v.Problem = fmt.Sprintf("pool %q not found (parent = %q)", pool, cfg.Parent)
	case s.PoolErr != nil:
		v.Problem = fmt.Sprintf("zpool list failed: %v", s.PoolErr)
	case v.Pool.Health != "ONLINE":
		v.Problem = fmt.Sprintf("pool %q is %s", pool, v.Pool.Health)
	case v.Pool.ReadOnly:
		v.Problem = fmt.Sprintf("pool %q is read-only", pool)
	case errors.Is(s.ListErr, zfs.ErrNotExist):
		v.Problem = fmt.Sprintf("parent dataset %q does not exist (create it: zfs create -p %s)", cfg.Parent, cfg.Parent)
	case s.ListErr != nil:
		v.Problem = fmt.Sprintf("zfs list failed: %v", s.ListErr)
	case unmounted(byName[cfg.Parent]):
		// Mounting anything below it would put it on the directory that the
		// parent's own mount later covers (a pool imported with -N, or one
		// still mounting its datasets): the slot's path would then show the
		// parent, and a task would write outside its slot.
		v.Problem = fmt.Sprintf("parent dataset %q is not mounted; nothing below it is mounted until it is (zfs mount %s)", cfg.Parent, cfg.Parent)
	}
	if p := byName[cfg.Parent]; p != nil {
		v.ParentMountpoint = p.Mountpoint
	}
	if s.ListErr != nil && prev != nil && !errors.Is(s.ListErr, zfs.ErrNotExist) {
		byName = prevDatasets(prev) // keep the last good set, marked unhealthy below
		v.ParentMountpoint = prev.ParentMountpoint
	}

	below := belowIndex(cfg, byName)
	total := 0
	for _, c := range cfg.Classes {
		total += c.Slots
	}
	v.index = make(map[string]slotPos, total)
	v.Classes = make([]ClassView, 0, len(cfg.Classes))
	for ci, c := range cfg.Classes {
		v.Classes = append(v.Classes, buildClass(cfg, c, byName, below, v.ParentMountpoint, s.CreateErrs, v.Problem))
		for si := range v.Classes[ci].Slots {
			v.index[v.Classes[ci].Slots[si].ID] = slotPos{ci, si}
		}
	}
	return v
}

// belowIndex groups the rows below the plugin's per-slot datasets
// (<parent>/<class>/<name>, slots and retained data alike) by that dataset:
// their snapshots and anything created below them. One pass over the scan.
func belowIndex(cfg *Config, byName map[string]*zfs.Dataset) map[string][]*zfs.Dataset {
	below := map[string][]*zfs.Dataset{}
	prefix := cfg.Parent + "/"
	for name, d := range byName {
		rest, ok := strings.CutPrefix(name, prefix)
		if !ok {
			continue
		}
		class, rest, ok := strings.Cut(rest, "/")
		if !ok {
			continue // the parent's own snapshots, class datasets and theirs
		}
		end := strings.IndexAny(rest, "/@")
		if end < 0 {
			continue // the per-slot dataset itself
		}
		key := prefix + class + "/" + rest[:end]
		below[key] = append(below[key], d)
	}
	return below
}

func buildClass(cfg *Config, c Class, byName map[string]*zfs.Dataset, below map[string][]*zfs.Dataset,
	parentMountpoint string, createErrs map[string]string, problem string) ClassView {
	cv := ClassView{Class: c, Dataset: cfg.ClassDataset(c.Name), Problem: problem, Slots: make([]Slot, 0, c.Slots)}
	if d, ok := byName[cv.Dataset]; ok {
		if Owned(d) {
			cv.Exists, cv.Info = true, *d
		} else if cv.Problem == "" {
			cv.Problem = fmt.Sprintf("dataset %q exists but is not owned by nomad-device-zfs (no %s=%s); not touching it", cv.Dataset, PropOwner, cv.Dataset)
		}
	}
	for n := 1; n <= c.Slots; n++ {
		id := SlotID(c.Name, n)
		cv.Slots = append(cv.Slots, slotFrom(cfg, c, id, byName, below[cfg.SlotDataset(c.Name, id)], parentMountpoint))
	}
	if cv.Problem == "" && cv.Exists && unmounted(&cv.Info) {
		for _, s := range cv.Slots {
			if s.Exists && s.Mounted {
				// Mounting the class dataset now would cover this slot.
				cv.Problem = fmt.Sprintf("slot %s is mounted while its class dataset %s is not: its mountpoint may be covered; "+
					"unmount the slots (zfs unmount %s) and the plugin remounts them in order", s.ID, cv.Dataset, s.Dataset)
				break
			}
		}
	}
	for i := range cv.Slots {
		s := &cv.Slots[i]
		s.Healthy, s.Reason = Health(s, cv.Problem, createErrs[s.Dataset])
	}
	cv.Retained = retained(cv.Dataset, byName, below)
	return cv
}

// retained lists the owned retained datasets directly below a class
// dataset, newest first. A dataset renamed aside whose owner mark was not
// yet rewritten (a crash) counts too: its PropRetainAs names it.
func retained(classDataset string, byName map[string]*zfs.Dataset, below map[string][]*zfs.Dataset) []Retained {
	var out []Retained
	for name, d := range byName {
		if d.IsSnapshot() || zfs.Parent(name) != classDataset || !Owned(d) {
			continue
		}
		if State(d.User.Get(PropState)) != StateRetained && d.User.Get(PropRetainAs) != name {
			continue
		}
		r := Retained{Dataset: name, Holder: d.User.Get(PropHolder), Outcome: d.User.Get(PropOutcome), Info: *d}
		if secs, err := strconv.ParseInt(d.User.Get(PropSince), 10, 64); err == nil {
			r.Since = time.Unix(secs, 0)
		}
		if secs, err := strconv.ParseInt(d.User.Get(PropExpires), 10, 64); err == nil {
			r.Expires = time.Unix(secs, 0)
		}
		for _, b := range below[name] {
			if !ownSnapshot(b) {
				r.Strangers = append(r.Strangers, b.Name)
			}
		}
		sort.Strings(r.Strangers)
		out = append(out, r)
	}
	sort.Slice(out, func(i, j int) bool {
		if !out[i].Since.Equal(out[j].Since) {
			return out[i].Since.After(out[j].Since)
		}
		return out[i].Dataset > out[j].Dataset
	})
	return out
}

// Health decides whether the scheduler may place on a slot, and says why
// not: problem is the node's or the class's, createErr the last failure to
// create the slot.
func Health(s *Slot, problem, createErr string) (bool, string) {
	switch {
	case problem != "":
		return false, problem
	case s.Foreign:
		return false, fmt.Sprintf("dataset %q exists but is not owned by nomad-device-zfs; not touching it", s.Dataset)
	case !s.Exists && createErr != "":
		return false, "cannot create " + s.Dataset + ": " + createErr
	case !s.Exists:
		return false, "not created yet"
	case len(s.Strangers) > 0:
		return false, strangersAdvice(parentOf(s), s.Dataset, s.Strangers)
	case strings.HasPrefix(s.Info.Origin, parentOf(s)+"/"):
		// A slot cloned from a snapshot of another slot or of retained
		// data starts with another allocation's data.
		return false, fmt.Sprintf("%s is a clone of %s, which is below the plugin's parent: it may hold another allocation's data; "+
			"destroy it (zfs destroy %s) and the plugin creates it afresh", s.Dataset, s.Info.Origin, s.Dataset)
	case s.State == StateReleasing:
		// Healthy on purpose. Reserve finishes a pending release before it
		// mounts, so offering the slot is safe; marking it unhealthy is not:
		// a job evaluated while a class has no healthy instance is blocked
		// with the node's class ineligible, and since device health is not
		// part of the computed node class, the slot turning healthy again
		// never unblocks it (seen on a real agent). It also spares the node
		// a re-registration per release.
		return true, ""
	case s.State != StateReady && s.State != StateHeld:
		return false, fmt.Sprintf("unknown state %q", s.State)
	case !s.Mounted && !s.MountpointOK():
		return false, fmt.Sprintf("not mounted, and its mountpoint is %q, not %q where the plugin's naming puts it (zfs inherit mountpoint %s)",
			s.Mountpoint, s.WantMountpoint, s.Dataset)
	case !s.Mounted:
		return false, "not mounted"
	case !s.MountpointOK():
		// The path a task gets comes from the plugin's naming; a mountpoint
		// anyone can change with zfs set is only checked against it.
		return false, fmt.Sprintf("mounted at %q, not at %q where the plugin's naming puts it: not handed out (zfs inherit mountpoint %s)",
			s.Mountpoint, s.WantMountpoint, s.Dataset)
	}
	return true, ""
}

// MountpointOK reports whether the slot's mountpoint is the one its name
// gives it below the parent.
func (s *Slot) MountpointOK() bool { return s.WantMountpoint != "" && s.Mountpoint == s.WantMountpoint }

// parentOf is the plugin's parent dataset of slot s: <parent>/<class>/<id>.
func parentOf(s *Slot) string { return zfs.Parent(zfs.Parent(s.Dataset)) }

// unmounted reports a filesystem that should be mounted and is not.
func unmounted(d *zfs.Dataset) bool {
	return d != nil && !d.IsSnapshot() && !d.Mounted && Mountable(d.Mountpoint) && d.Mountpoint != "-"
}

// prevDatasets rebuilds the dataset index from a previous view.
func prevDatasets(prev *View) map[string]*zfs.Dataset {
	m := make(map[string]*zfs.Dataset)
	for ci := range prev.Classes {
		cv := &prev.Classes[ci]
		if cv.Exists {
			m[cv.Dataset] = &cv.Info
		}
		for si := range cv.Slots {
			if s := &cv.Slots[si]; s.Exists {
				m[s.Dataset] = &s.Info
			}
		}
		for ri := range cv.Retained {
			m[cv.Retained[ri].Dataset] = &cv.Retained[ri].Info
		}
	}
	return m
}
