package zfstest

import (
	"path/filepath"
	"sort"
	"strconv"
	"strings"
)

// state is everything the fake knows. It is exactly what the state file of
// the executable mode holds, so every field is exported to encoding/json.
type state struct {
	// MountRoot plays the pool's altroot: every mountpoint lives below it.
	MountRoot string `json:"mount_root"`
	// StoreDir holds snapshot copies and the files of unmounted filesystems.
	StoreDir string `json:"store_dir"`

	Txg       uint64 `json:"txg"`
	GUIDSeed  uint64 `json:"guid_seed"`
	GUIDCount uint64 `json:"guid_count"`
	ObjsetID  uint64 `json:"objset_id"`

	Pools    map[string]*pool    `json:"pools"`
	Datasets map[string]*dataset `json:"datasets"`
	// Bookmarks by name ("pool/fs#mark"): not datasets, as in OpenZFS.
	Bookmarks map[string]*bookmark `json:"bookmarks,omitempty"`

	Calls       [][]string    `json:"calls"`
	Faults      []*faultEntry `json:"faults,omitempty"`
	NextFaultID int           `json:"next_fault_id"`
}

type pool struct {
	Name   string `json:"name"`
	Size   uint64 `json:"size"`
	Health string `json:"health"`
	GUID   uint64 `json:"guid"`
}

// dataset is a filesystem or a snapshot. Volumes are not emulated;
// bookmarks are kept apart (state.Bookmarks).
type dataset struct {
	Name      string `json:"name"`
	Snap      bool   `json:"snap,omitempty"`
	GUID      uint64 `json:"guid"`
	CreateTxg uint64 `json:"createtxg"`
	Creation  int64  `json:"creation"`
	ObjsetID  uint64 `json:"objsetid"`
	// Props holds the locally set properties, values canonical (sizes in
	// bytes). Inherited and default values are resolved when read.
	Props map[string]string `json:"props,omitempty"`
	// Origin is the origin snapshot of a clone.
	Origin  string `json:"origin,omitempty"`
	Mounted bool   `json:"mounted,omitempty"`
	// Busy emulates a process holding a file open below the mountpoint.
	Busy bool `json:"busy,omitempty"`
	// Holds maps a snapshot's hold tags to the unix time they were taken.
	Holds map[string]int64 `json:"holds,omitempty"`
	// Partial is what an interrupted resumable receive into this
	// filesystem kept (its receive_resume_token).
	Partial *partialRecv `json:"partial,omitempty"`
}

func newState(mountRoot, storeDir string, seed uint64) *state {
	return &state{
		MountRoot: mountRoot,
		StoreDir:  storeDir,
		Txg:       1,
		GUIDSeed:  seed,
		ObjsetID:  53,
		Pools:     map[string]*pool{},
		Datasets:  map[string]*dataset{},
	}
}

// nextGUID is deterministic for a given seed: splitmix64 over a counter,
// so guids look like real 64-bit ones yet tests can predict them.
func (st *state) nextGUID() uint64 {
	st.GUIDCount++
	z := st.GUIDSeed + st.GUIDCount*0x9e3779b97f4a7c15
	z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9
	z = (z ^ (z >> 27)) * 0x94d049bb133111eb
	return z ^ (z >> 31)
}

// newDataset registers a dataset created in the current txg.
func (st *state) newDataset(name string, snap bool, now int64) *dataset {
	st.ObjsetID++
	d := &dataset{
		Name:      name,
		Snap:      snap,
		GUID:      st.nextGUID(),
		CreateTxg: st.Txg,
		Creation:  now,
		ObjsetID:  st.ObjsetID,
		Props:     map[string]string{},
	}
	st.Datasets[name] = d
	return d
}

// fsName is the filesystem part of a name: "tank/a" for "tank/a@s".
func fsName(name string) string {
	if i := strings.IndexByte(name, '@'); i >= 0 {
		return name[:i]
	}
	return name
}

// parentName is the parent filesystem: "tank/a" for "tank/a/b" and for
// "tank/a@s"; "" for a pool's root.
func parentName(name string) string {
	if i := strings.IndexByte(name, '@'); i >= 0 {
		return name[:i]
	}
	if i := strings.LastIndexByte(name, '/'); i >= 0 {
		return name[:i]
	}
	return ""
}

func poolOf(name string) string {
	if i := strings.IndexAny(name, "/@"); i >= 0 {
		return name[:i]
	}
	return name
}

// isDescendant reports whether d is strictly below anc (children or
// snapshots, at any depth).
func isDescendant(d, anc string) bool {
	return strings.HasPrefix(d, anc) && len(d) > len(anc) && (d[len(anc)] == '/' || d[len(anc)] == '@')
}

// children returns the direct child filesystems of name, sorted.
func (st *state) children(name string) []*dataset {
	var out []*dataset
	for _, d := range st.Datasets {
		if !d.Snap && parentName(d.Name) == name {
			out = append(out, d)
		}
	}
	sort.Slice(out, func(i, j int) bool { return out[i].Name < out[j].Name })
	return out
}

// snapshots returns the snapshots of filesystem name, oldest first.
func (st *state) snapshots(name string) []*dataset {
	var out []*dataset
	for _, d := range st.Datasets {
		if d.Snap && fsName(d.Name) == name {
			out = append(out, d)
		}
	}
	sort.Slice(out, func(i, j int) bool { return out[i].CreateTxg < out[j].CreateTxg })
	return out
}

// clones returns the clones of snapshot name, sorted.
func (st *state) clones(name string) []*dataset {
	var out []*dataset
	for _, d := range st.Datasets {
		if d.Origin == name {
			out = append(out, d)
		}
	}
	sort.Slice(out, func(i, j int) bool { return out[i].Name < out[j].Name })
	return out
}

// subtree returns name and everything below it (filesystems and snapshots).
func (st *state) subtree(name string) []*dataset {
	var out []*dataset
	for _, d := range st.Datasets {
		if d.Name == name || isDescendant(d.Name, name) {
			out = append(out, d)
		}
	}
	sortDatasets(out)
	return out
}

// all returns every dataset, sorted.
func (st *state) all() []*dataset {
	out := make([]*dataset, 0, len(st.Datasets))
	for _, d := range st.Datasets {
		out = append(out, d)
	}
	sortDatasets(out)
	return out
}

// dependents lists what depends on d in the order zfs reports it (post
// order: a filesystem's children, then its snapshots each after their
// clones, each entry after its own dependents). Real zfs walks children in
// on-disk hash order; the fake walks them by name.
func (st *state) dependents(d *dataset) []*dataset {
	var out []*dataset
	var walk func(x *dataset, first bool)
	walk = func(x *dataset, first bool) {
		if x.Snap {
			for _, c := range st.clones(x.Name) {
				walk(c, false)
			}
		} else {
			for _, c := range st.children(x.Name) {
				walk(c, false)
			}
			for _, s := range st.snapshots(x.Name) {
				walk(s, false)
			}
		}
		if !first {
			out = append(out, x)
		}
	}
	walk(d, true)
	return out
}

// compareNames is libzfs's zfs_compare: by the filesystem part, a
// filesystem before its snapshots, snapshots by createtxg.
func compareNames(a, b *dataset) int {
	if c := strings.Compare(fsName(a.Name), fsName(b.Name)); c != 0 {
		return c
	}
	switch {
	case a.Snap == b.Snap && !a.Snap:
		return 0
	case !a.Snap:
		return -1
	case !b.Snap:
		return 1
	case a.CreateTxg < b.CreateTxg:
		return -1
	case a.CreateTxg > b.CreateTxg:
		return 1
	}
	return strings.Compare(a.Name, b.Name)
}

func sortDatasets(ds []*dataset) {
	sort.SliceStable(ds, func(i, j int) bool { return compareNames(ds[i], ds[j]) < 0 })
}

// Data directories in the store, by objset id: it survives renames, and
// unlike a guid it is never shared (a received snapshot has the guid of
// the one sent, which may be in the same pool).
func (st *state) snapDir(d *dataset) string {
	return filepath.Join(st.StoreDir, "snap", strconv.FormatUint(d.ObjsetID, 10))
}

func (st *state) parkedDir(d *dataset) string {
	return filepath.Join(st.StoreDir, "fs", strconv.FormatUint(d.ObjsetID, 10))
}

// dataDir is where a filesystem's or snapshot's files are right now.
func (st *state) dataDir(d *dataset) string {
	switch {
	case d.Snap:
		return st.snapDir(d)
	case d.Mounted:
		return st.mountpoint(d)
	default:
		return st.parkedDir(d)
	}
}

// mountedPaths is the set of mountpoints of mounted filesystems.
func (st *state) mountedPaths() map[string]*dataset {
	m := map[string]*dataset{}
	for _, d := range st.Datasets {
		if d.Mounted {
			m[st.mountpoint(d)] = d
		}
	}
	return m
}
