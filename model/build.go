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

// One scan → the View: the rows of every parent's listing sorted below
// their parents and class datasets, each class built from its parent's
// rows and judged by its parent's pool and problem.

// Scan is the raw result of one scan: one zpool process (every pool the
// parents are in) and one zfs process per parent.
type Scan struct {
	At      time.Time
	Pools   []zfs.Pool
	PoolErr error
	// Sets are the rows of every parent's listing.
	Sets []zfs.Dataset
	// ListErrs are the listings that failed, by parent dataset.
	ListErrs map[string]error
	// CreateErrs are the last failures to create a slot or class dataset,
	// by dataset name, shown as the slot's reason until it exists.
	CreateErrs map[string]string
}

// BuildView turns a scan into a View. When a parent's listing failed for a
// reason other than a missing parent, the previous view's datasets below
// that parent are kept (the last good set) and its classes' slots are
// marked unhealthy with the reason; the other parents' classes are not
// affected.
func BuildView(cfg *Config, s Scan, prev *View) *View {
	v := &View{ScannedAt: s.At}
	byName := make(map[string]*zfs.Dataset, len(s.Sets))
	for i := range s.Sets {
		byName[s.Sets[i].Name] = &s.Sets[i]
	}
	parents := cfg.Parents()
	v.Parents = make([]ParentView, len(parents))
	for i, p := range parents {
		v.Parents[i] = parentView(p, s, byName)
	}
	for i := range v.Parents {
		pv := &v.Parents[i]
		if err := s.ListErrs[pv.Dataset]; err != nil && prev != nil && !errors.Is(err, zfs.ErrNotExist) {
			// Keep the last good set, marked unhealthy by the problem.
			pv.Mountpoint = prev.Parent(pv.Dataset).Mountpoint
			prevDatasets(prev, pv.Dataset, byName)
			// The data is the last good set's: as old as that, so that a
			// slot re-read since is still newer than the view (hooks'
			// overrides).
			v.ScannedAt = prev.ScannedAt
		}
	}
	v.Pool, v.Problem, v.ParentMountpoint = v.Parents[0].Pool, v.Parents[0].Problem, v.Parents[0].Mountpoint

	kids, below := treeIndex(parents, byName)
	v.classes = make(map[string]int, len(cfg.Classes))
	v.Classes = make([]ClassView, 0, len(cfg.Classes))
	for ci, c := range cfg.Classes {
		pv := &v.Parents[slices.Index(parents, cfg.ClassParent(c.Name))]
		v.Classes = append(v.Classes, buildClass(cfg, c, pv, byName, kids, below, s.CreateErrs))
		v.classes[c.Name] = ci
	}
	v.Removed = removedClasses(cfg, v.Parents, byName, kids, below)
	return v
}

// parentView is parent p's pool, problem and mountpoint in scan s, whose
// rows byName indexes.
func parentView(p string, s Scan, byName map[string]*zfs.Dataset) ParentView {
	pv := ParentView{Dataset: p}
	pool := zfs.PoolOf(p)
	for i := range s.Pools {
		if s.Pools[i].Name == pool {
			pv.Pool = &s.Pools[i]
		}
	}
	listErr := s.ListErrs[p]
	switch {
	case errors.Is(s.PoolErr, zfs.ErrNotExist) || (s.PoolErr == nil && pv.Pool == nil):
		pv.Problem = fmt.Sprintf("pool %q not found (parent = %q)", pool, p)
	case s.PoolErr != nil:
		pv.Problem = fmt.Sprintf("zpool list failed: %v", s.PoolErr)
	case pv.Pool.Health != "ONLINE":
		pv.Problem = fmt.Sprintf("pool %q is %s", pool, pv.Pool.Health)
	case pv.Pool.ReadOnly:
		pv.Problem = fmt.Sprintf("pool %q is read-only", pool)
	case errors.Is(listErr, zfs.ErrNotExist):
		pv.Problem = fmt.Sprintf("parent dataset %q does not exist (create it: zfs create -p %s)", p, p)
	case listErr != nil:
		pv.Problem = fmt.Sprintf("zfs list failed: %v", listErr)
	case unmounted(byName[p]):
		// Mounting anything below it would put it on the directory that the
		// parent's own mount later covers (a pool imported with -N, or one
		// still mounting its datasets): the slot's path would then show the
		// parent, and a task would write outside its slot.
		pv.Problem = fmt.Sprintf("parent dataset %q is not mounted; nothing below it is mounted until it is (zfs mount %s)", p, p)
	}
	if d := byName[p]; d != nil {
		pv.Mountpoint = d.Mountpoint
	}
	return pv
}

// treeIndex sorts the scan's rows below the class datasets of every
// parent, in one pass: kids are the datasets directly below each class
// dataset (<parent>/<class>/<name>: slots, retained and parked data,
// anyone's), by class dataset; below are the rows below each of those
// (their snapshots, and anything created below them), by that dataset.
// Both are keyed by full names, so parents share them.
func treeIndex(parents []string, byName map[string]*zfs.Dataset) (kids, below map[string][]*zfs.Dataset) {
	kids, below = map[string][]*zfs.Dataset{}, map[string][]*zfs.Dataset{}
	prefixes := make([]string, len(parents))
	for i, p := range parents {
		prefixes[i] = p + "/"
	}
	for name, d := range byName {
		for _, prefix := range prefixes {
			rest, ok := strings.CutPrefix(name, prefix)
			if !ok {
				continue
			}
			class, rest, ok := strings.Cut(rest, "/")
			if !ok || rest == "" {
				continue // the parent's own snapshots, class datasets and theirs
			}
			if end := strings.IndexAny(rest, "/@#"); end >= 0 {
				key := prefix + class + "/" + rest[:end]
				below[key] = append(below[key], d)
				continue
			}
			kids[prefix+class] = append(kids[prefix+class], d)
		}
	}
	return kids, below
}

// removedClasses lists the plugin's class datasets directly below each
// parent that the configuration no longer has, by name, with their orphaned
// slots and retained data. A class dataset of a class that is now
// configured below another parent is not one: it goes into its parent's
// Moved, and is left alone.
func removedClasses(cfg *Config, parents []ParentView, byName map[string]*zfs.Dataset, kids map[string][]*zfs.Dataset,
	below map[string][]*zfs.Dataset) []ClassView {
	var out []ClassView
	prefixes := make([]string, len(parents))
	for pi := range parents {
		prefixes[pi] = parents[pi].Dataset + "/"
	}
	for name, d := range byName {
		for pi := range parents {
			pv := &parents[pi]
			class, ok := strings.CutPrefix(name, prefixes[pi])
			if !ok || strings.ContainsAny(class, "/@#") || !Owned(d) {
				continue
			}
			if cfg.HasClass(class) {
				if cfg.ClassParent(class) != pv.Dataset {
					pv.Moved = append(pv.Moved, name)
				}
				continue
			}
			cv := ClassView{Class: cfg.Class(class), Parent: pv.Dataset, Dataset: name, Exists: true, Info: *d, Problem: pv.Problem, Removed: true}
			cv.Orphans = orphans(cfg, cv.Class, pv, byName, kids[name], below)
			cv.Retained, cv.Parked = aside(kids[name], below)
			cv.Replicas = replicasOf(kids[name], below)
			cv.Empty = len(kids[name]) == 0 && !hasBelow(byName, name)
			out = append(out, cv)
		}
	}
	for pi := range parents {
		sort.Strings(parents[pi].Moved)
	}
	sort.Slice(out, func(i, j int) bool { return out[i].Dataset < out[j].Dataset })
	return out
}

// hasBelow reports whether anything, a snapshot or bookmark included, lies below
// dataset. It walks the whole scan: it runs only for removed classes.
func hasBelow(byName map[string]*zfs.Dataset, dataset string) bool {
	for name := range byName {
		if strings.HasPrefix(name, dataset+"/") || strings.HasPrefix(name, dataset+"@") || strings.HasPrefix(name, dataset+"#") {
			return true
		}
	}
	return false
}

// orphans lists the plugin's slot datasets of class c below parent pv
// among its class dataset's children (kids) that the configuration no
// longer has, in slot order. Each is unhealthy: it is never offered again.
func orphans(cfg *Config, c Class, pv *ParentView, byName map[string]*zfs.Dataset, kids []*zfs.Dataset,
	below map[string][]*zfs.Dataset) []Slot {
	var out []Slot
	for _, d := range kids {
		id := path.Base(d.Name)
		// A slot's name is never a retained or parked one (renamedAside);
		// a claimed slot may still carry its own name in PropRetainAs.
		if _, ok := SlotNumber(c.Name, id); !ok || !Owned(d) || cfg.Configured(c.Name, id) ||
			State(d.User.Get(PropState)) == StateRetained {
			continue
		}
		s := slotFrom(cfg, c, pv.Dataset, id, byName, below[d.Name], pv.Mountpoint)
		s.Healthy, s.Reason = Health(&s, pv.Problem, "")
		out = append(out, s)
	}
	sort.Slice(out, func(i, j int) bool {
		ni, _ := SlotNumber(c.Name, out[i].ID)
		nj, _ := SlotNumber(c.Name, out[j].ID)
		return ni < nj
	})
	return out
}

// buildClass builds the view of configured class c below parent pv.
func buildClass(cfg *Config, c Class, pv *ParentView, byName map[string]*zfs.Dataset, kids, below map[string][]*zfs.Dataset,
	createErrs map[string]string) ClassView {
	cv := ClassView{Class: c, Parent: pv.Dataset, Dataset: pv.Dataset + "/" + c.Name, Problem: pv.Problem, Slots: make([]Slot, 0, c.Slots)}
	if d, ok := byName[cv.Dataset]; ok {
		if Owned(d) {
			cv.Exists, cv.Info = true, *d
		} else if cv.Problem == "" {
			cv.Problem = fmt.Sprintf("dataset %q exists but is not owned by nomad-device-zfs (no %s=%s); not touching it", cv.Dataset, PropOwner, cv.Dataset)
		}
	}
	for n := 1; n <= c.Slots; n++ {
		id := SlotID(c.Name, n)
		cv.Slots = append(cv.Slots, slotFrom(cfg, c, pv.Dataset, id, byName, below[cv.Dataset+"/"+id], pv.Mountpoint))
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
	cv.Retained, cv.Parked = aside(kids[cv.Dataset], below)
	cv.Orphans = orphans(cfg, c, pv, byName, kids[cv.Dataset], below)
	cv.Replicas = replicasOf(kids[cv.Dataset], below)
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
		if state != StateRetained && state != StateParked && state != StateReceiving && !renamedAside(d) {
			continue
		}
		r := Retained{Dataset: name, State: state, Holder: d.User.Get(PropHolder), Outcome: d.User.Get(PropOutcome), Info: *d}
		if secs, err := strconv.ParseInt(d.User.Get(PropSince), 10, 64); err == nil {
			r.Since = time.Unix(secs, 0)
		}
		if secs, err := strconv.ParseInt(d.User.Get(PropExpires), 10, 64); err == nil {
			r.Expires = time.Unix(secs, 0)
		}
		// Its own bookmarks (a release drops them first: none is left
		// but by an operator) go with its destroy.
		r.OwnSnapshots, _, r.Strangers = splitBelow(name, below[name])
		if state == StateParked || state == StateReceiving || (state != StateRetained && strings.HasPrefix(path.Base(name), parkedPrefix)) {
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

// splitBelow sorts what lies below dataset, which the plugin owns, into
// its own snapshots, its own bookmarks and strangers, each by name.
func splitBelow(dataset string, rows []*zfs.Dataset) (own, bookmarks, strangers []string) {
	for _, b := range rows {
		switch {
		case ownSnapshot(b):
			own = append(own, strings.Clone(b.Name))
		case ownBookmark(b, dataset):
			bookmarks = append(bookmarks, strings.Clone(b.Name))
		default:
			strangers = append(strangers, strings.Clone(b.Name))
		}
	}
	sort.Strings(own)
	sort.Strings(bookmarks)
	sort.Strings(strangers)
	return own, bookmarks, strangers
}

// prevDatasets adds the datasets a previous view read below parent to
// byName, where byName has none of that name.
func prevDatasets(prev *View, parent string, byName map[string]*zfs.Dataset) {
	add := func(name string, d *zfs.Dataset) {
		if _, ok := byName[name]; !ok {
			byName[name] = d
		}
	}
	classes := append(slices.Clip(prev.Classes), prev.Removed...)
	for ci := range classes {
		cv := &classes[ci]
		if cv.Parent != parent && cv.Parent != "" {
			continue
		}
		if cv.Exists {
			add(cv.Dataset, &cv.Info)
		}
		for si := range cv.Slots {
			if s := &cv.Slots[si]; s.Exists {
				add(s.Dataset, s.row())
			}
		}
		for ri := range cv.Retained {
			add(cv.Retained[ri].Dataset, &cv.Retained[ri].Info)
		}
		for oi := range cv.Orphans {
			add(cv.Orphans[oi].Dataset, cv.Orphans[oi].row())
		}
		for pi := range cv.Parked {
			add(cv.Parked[pi].Dataset, &cv.Parked[pi].Info)
		}
		for ri := range cv.Replicas {
			add(cv.Replicas[ri].Dataset, &cv.Replicas[ri].Info)
		}
	}
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
