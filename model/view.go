package model

import (
	"errors"
	"fmt"
	"path"
	"slices"
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
	// Removed are the plugin's class datasets that the configuration no
	// longer has: their slots are orphans (ClassView.Orphans), their
	// retained data expires as recorded, and the class dataset itself is
	// destroyed once nothing is left below it (ClassView.Empty).
	Removed []ClassView
	// classes finds a class by name; a slot's ID then gives its place
	// (<class>-<n> is Slots[n-1]), with no map of 10,000 IDs in every
	// view. BuildView fills it; a View built by hand is searched instead.
	classes map[string]int
}

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
	// Parked is sticky data waiting for its holder's replacement (State
	// StateParked), by dataset name.
	Parked []Retained
	// Orphans are the plugin's slot datasets of this class that the
	// configuration no longer has (Slot.Orphan), in slot order.
	Orphans []Slot
	// Removed: the class is no longer configured (View.Removed).
	Removed bool
	// Empty: nothing at all lies below the class dataset, not even a
	// snapshot. Set for removed classes only.
	Empty bool
}

// Retained is a former slot's data kept aside until it expires: retained
// by the snapshot policy, or parked for a replacement (sticky.go).
type Retained struct {
	Dataset string
	// State is StateRetained or StateParked; a dataset renamed aside whose
	// state was not yet rewritten (a crash) is still StateReleasing.
	State   State
	Holder  string
	Outcome string
	Since   time.Time
	Expires time.Time
	Info    zfs.Dataset
	// OwnSnapshots are the plugin's snapshots of it (@retained, and the
	// @pristine a parked slot took along).
	OwnSnapshots []string
	// Strangers are the datasets and snapshots below it that are not the
	// plugin's: while there are any, it is not destroyed.
	Strangers []string
}

// SlotIndex finds a slot by ID: its class's index in Classes and its index
// in that class's Slots.
func (v *View) SlotIndex(id string) (class, slot int, ok bool) {
	if v == nil {
		return 0, 0, false
	}
	if v.classes != nil {
		return v.place(id)
	}
	for ci := range v.Classes {
		for si := range v.Classes[ci].Slots {
			if v.Classes[ci].Slots[si].ID == id {
				return ci, si, true
			}
		}
	}
	return 0, 0, false
}

// place finds slot id by its name: <class>-<n> is the class's Slots[n-1].
func (v *View) place(id string) (class, slot int, ok bool) {
	i := strings.LastIndexByte(id, '-')
	if i < 0 {
		return 0, 0, false
	}
	ci, ok := v.classes[id[:i]]
	if !ok {
		return 0, 0, false
	}
	n, err := strconv.Atoi(id[i+1:])
	if err != nil || n < 1 || n > len(v.Classes[ci].Slots) || v.Classes[ci].Slots[n-1].ID != id {
		return 0, 0, false
	}
	return ci, n - 1, true
}

// Slot finds a slot by ID, and its class.
func (v *View) Slot(id string) (*Slot, *ClassView) {
	ci, si, ok := v.SlotIndex(id)
	if !ok {
		return nil, nil
	}
	cv := &v.Classes[ci]
	return &cv.Slots[si], cv
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
		// The data is the last good set's: as old as that, so that a slot
		// re-read since is still newer than the view (hooks' overrides).
		v.ScannedAt = prev.ScannedAt
	}

	below := belowIndex(cfg, byName)
	kids := childIndex(cfg, byName)
	v.classes = make(map[string]int, len(cfg.Classes))
	v.Classes = make([]ClassView, 0, len(cfg.Classes))
	for ci, c := range cfg.Classes {
		v.Classes = append(v.Classes, buildClass(cfg, c, byName, kids[cfg.ClassDataset(c.Name)], below, v.ParentMountpoint, s.CreateErrs, v.Problem))
		v.classes[c.Name] = ci
	}
	v.Removed = removedClasses(cfg, byName, kids, below, v.ParentMountpoint, v.Problem)
	return v
}

// childIndex groups the datasets directly below the class datasets
// (<parent>/<class>/<name>: slots, retained data, anyone's) by class
// dataset. One pass over the scan.
func childIndex(cfg *Config, byName map[string]*zfs.Dataset) map[string][]*zfs.Dataset {
	kids := map[string][]*zfs.Dataset{}
	prefix := cfg.Parent + "/"
	for name, d := range byName {
		rest, ok := strings.CutPrefix(name, prefix)
		if !ok || d.IsSnapshot() {
			continue
		}
		class, child, ok := strings.Cut(rest, "/")
		if !ok || child == "" || strings.Contains(child, "/") {
			continue
		}
		kids[prefix+class] = append(kids[prefix+class], d)
	}
	return kids
}

// removedClasses lists the plugin's class datasets below the parent that
// the configuration no longer has, by name, with their orphaned slots and
// retained data.
func removedClasses(cfg *Config, byName map[string]*zfs.Dataset, kids map[string][]*zfs.Dataset,
	below map[string][]*zfs.Dataset, parentMountpoint, problem string) []ClassView {
	var out []ClassView
	prefix := cfg.Parent + "/"
	for name, d := range byName {
		class, ok := strings.CutPrefix(name, prefix)
		if !ok || strings.ContainsAny(class, "/@") || !Owned(d) || cfg.HasClass(class) {
			continue
		}
		cv := ClassView{Class: cfg.Class(class), Dataset: name, Exists: true, Info: *d, Problem: problem, Removed: true}
		cv.Orphans = orphans(cfg, class, byName, kids[name], below, parentMountpoint, problem)
		cv.Retained, cv.Parked = aside(kids[name], below)
		cv.Empty = len(kids[name]) == 0 && !hasBelow(byName, name)
		out = append(out, cv)
	}
	sort.Slice(out, func(i, j int) bool { return out[i].Dataset < out[j].Dataset })
	return out
}

// hasBelow reports whether anything, a snapshot included, lies below
// dataset. It walks the whole scan: it runs only for removed classes.
func hasBelow(byName map[string]*zfs.Dataset, dataset string) bool {
	for name := range byName {
		if strings.HasPrefix(name, dataset+"/") || strings.HasPrefix(name, dataset+"@") {
			return true
		}
	}
	return false
}

// orphans lists the plugin's slot datasets of class among its class
// dataset's children (kids) that the configuration no longer has, in slot
// order. Each is unhealthy: it is never offered again.
func orphans(cfg *Config, class string, byName map[string]*zfs.Dataset, kids []*zfs.Dataset,
	below map[string][]*zfs.Dataset, parentMountpoint, problem string) []Slot {
	var out []Slot
	c := cfg.Class(class)
	for _, d := range kids {
		id := path.Base(d.Name)
		// A slot's name is never a retained or parked one (renamedAside);
		// a claimed slot may still carry its own name in PropRetainAs.
		if _, ok := SlotNumber(class, id); !ok || !Owned(d) || cfg.Configured(class, id) ||
			State(d.User.Get(PropState)) == StateRetained {
			continue
		}
		s := slotFrom(cfg, c, id, byName, below[d.Name], parentMountpoint)
		s.Healthy, s.Reason = Health(&s, problem, "")
		out = append(out, s)
	}
	sort.Slice(out, func(i, j int) bool {
		ni, _ := SlotNumber(class, out[i].ID)
		nj, _ := SlotNumber(class, out[j].ID)
		return ni < nj
	})
	return out
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

func buildClass(cfg *Config, c Class, byName map[string]*zfs.Dataset, kids []*zfs.Dataset, below map[string][]*zfs.Dataset,
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
	cv.Retained, cv.Parked = aside(kids, below)
	cv.Orphans = orphans(cfg, c.Name, byName, kids, below, parentMountpoint, cv.Problem)
	return cv
}

// aside lists the owned data kept aside among a class dataset's children
// (kids): retained data newest first, and parked data by name. A dataset
// renamed aside whose owner mark was not yet rewritten (a crash) counts
// too: its PropRetainAs names it, and its name says which it is.
func aside(kids []*zfs.Dataset, below map[string][]*zfs.Dataset) (retained, parked []Retained) {
	for _, d := range kids {
		name := d.Name
		if !Owned(d) {
			continue
		}
		state := State(d.User.Get(PropState))
		if state != StateRetained && state != StateParked && !renamedAside(d) {
			continue
		}
		r := Retained{Dataset: name, State: state, Holder: d.User.Get(PropHolder), Outcome: d.User.Get(PropOutcome), Info: *d}
		if secs, err := strconv.ParseInt(d.User.Get(PropSince), 10, 64); err == nil {
			r.Since = time.Unix(secs, 0)
		}
		if secs, err := strconv.ParseInt(d.User.Get(PropExpires), 10, 64); err == nil {
			r.Expires = time.Unix(secs, 0)
		}
		r.OwnSnapshots, r.Strangers = splitBelow(below[name])
		if state == StateParked || (state != StateRetained && strings.HasPrefix(path.Base(name), parkedPrefix)) {
			parked = append(parked, r)
		} else {
			retained = append(retained, r)
		}
	}
	sort.Slice(retained, func(i, j int) bool {
		if !retained[i].Since.Equal(retained[j].Since) {
			return retained[i].Since.After(retained[j].Since)
		}
		return retained[i].Dataset > retained[j].Dataset
	})
	sort.Slice(parked, func(i, j int) bool { return parked[i].Dataset < parked[j].Dataset })
	return retained, parked
}

// renamedAside reports a dataset renamed aside (retained or parked) whose
// state a crash kept from being rewritten: its PropRetainAs names it, and
// so does its name. A slot a claim renamed parked data onto also carries
// its own name in PropRetainAs until the claim clears it; it is a slot.
func renamedAside(d *zfs.Dataset) bool {
	base := path.Base(d.Name)
	return d.User.Get(PropRetainAs) == d.Name && (strings.HasPrefix(base, retainedPrefix) || strings.HasPrefix(base, parkedPrefix))
}

// splitBelow sorts what lies below a dataset into the plugin's own
// snapshots and strangers, each by name.
func splitBelow(rows []*zfs.Dataset) (own, strangers []string) {
	for _, b := range rows {
		if ownSnapshot(b) {
			own = append(own, b.Name)
		} else {
			strangers = append(strangers, b.Name)
		}
	}
	sort.Strings(own)
	sort.Strings(strangers)
	return own, strangers
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
	case s.Orphan:
		return false, "no longer configured (its class's slots were lowered, or the class removed): " +
			"released by policy once its holder has ended, then destroyed"
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
	case s.State != StateReady && s.State != StateHeld && s.State != StateParked:
		// Parked data at a slot's name is a claim a crash interrupted:
		// held by the predecessor, whose replacement inherits it in place.
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
	classes := append(slices.Clip(prev.Classes), prev.Removed...)
	for ci := range classes {
		cv := &classes[ci]
		if cv.Exists {
			m[cv.Dataset] = &cv.Info
		}
		for si := range cv.Slots {
			if s := &cv.Slots[si]; s.Exists {
				m[s.Dataset] = s.row()
			}
		}
		for ri := range cv.Retained {
			m[cv.Retained[ri].Dataset] = &cv.Retained[ri].Info
		}
		for oi := range cv.Orphans {
			m[cv.Orphans[oi].Dataset] = cv.Orphans[oi].row()
		}
		for pi := range cv.Parked {
			m[cv.Parked[pi].Dataset] = &cv.Parked[pi].Info
		}
	}
	return m
}

// ParkedFromRows builds parked data from one `zfs list -r` of its dataset
// (the dataset, its snapshots, anything below it); nil when the dataset is
// not among them, or is not the plugin's parked data.
func ParkedFromRows(name string, rows []zfs.Dataset) *Retained {
	var kids []*zfs.Dataset
	below := map[string][]*zfs.Dataset{}
	for i := range rows {
		if rows[i].Name == name {
			kids = append(kids, &rows[i])
		} else {
			below[name] = append(below[name], &rows[i])
		}
	}
	if _, parked := aside(kids, below); len(parked) == 1 {
		return &parked[0]
	}
	return nil
}
