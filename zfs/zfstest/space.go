package zfstest

import (
	"io/fs"
	"path/filepath"
)

// Space is approximated from the real files: an empty filesystem refers to
// 24 KiB like a real one (list-tree.stdout), every regular file adds its
// size rounded up to 512 bytes, every directory but a child's mountpoint
// 512 bytes. Files are told apart by path, size and mtime, so a snapshot
// shares a file with its filesystem until the file is changed or removed.
const (
	baseRefer   = 24576
	baseLogical = 12288
	dirCharge   = 512
)

type spaceInfo struct {
	refer, used, avail                         uint64
	usedSnap, usedDS, usedChild, usedRefreserv uint64
	written, lused, lrefer                     uint64
}

type fileKey struct {
	rel   string
	size  int64
	mtime int64
}

// manifest is what a data directory holds.
type manifest struct {
	files   map[fileKey]bool
	charged uint64 // bytes charged for files and directories
	logical uint64 // sum of file sizes
}

func charge(k fileKey) uint64 { return (uint64(k.size) + 511) &^ 511 }

// scan reads a data directory, not descending into the mountpoints of other
// mounted filesystems (their directories belong to this one, their files
// do not).
func scan(root string, mounted map[string]*dataset) *manifest {
	m := &manifest{files: map[fileKey]bool{}}
	_ = filepath.WalkDir(root, func(p string, e fs.DirEntry, err error) error {
		if err != nil || p == root {
			return nil
		}
		if e.IsDir() {
			if mounted[p] != nil {
				return filepath.SkipDir
			}
			m.charged += dirCharge
			return nil
		}
		if !e.Type().IsRegular() {
			return nil
		}
		info, err := e.Info()
		if err != nil {
			return nil
		}
		rel, _ := filepath.Rel(root, p)
		k := fileKey{rel: rel, size: info.Size(), mtime: info.ModTime().UnixNano()}
		m.files[k] = true
		m.charged += charge(k)
		m.logical += uint64(k.size)
		return nil
	})
	return m
}

// diff sums the files of a that are in none of the others.
func diff(a *manifest, others ...*manifest) (charged, logical uint64) {
	for k := range a.files {
		shared := false
		for _, o := range others {
			if o != nil && o.files[k] {
				shared = true
				break
			}
		}
		if !shared {
			charged += charge(k)
			logical += uint64(k.size)
		}
	}
	return charged, logical
}

// space returns the accounting of d, computing it for the whole fake once
// per command (or after a change).
func (s *sess) space(d *dataset) *spaceInfo {
	if s.spaceTab == nil {
		s.spaceTab = s.st.computeSpace()
	}
	if sp := s.spaceTab[d.Name]; sp != nil {
		return sp
	}
	return &spaceInfo{}
}

func (st *state) computeSpace() map[string]*spaceInfo {
	mounted := st.mountedPaths()
	man := map[string]*manifest{}
	for _, d := range st.Datasets {
		man[d.Name] = scan(st.dataDir(d), mounted)
	}
	tab := map[string]*spaceInfo{}
	var fsSpace func(d *dataset) *spaceInfo
	fsSpace = func(d *dataset) *spaceInfo {
		m := man[d.Name]
		sp := &spaceInfo{refer: baseRefer + m.charged, lrefer: baseLogical + m.logical}
		var origin *manifest
		if d.Origin != "" {
			origin = man[d.Origin]
		}
		snaps := st.snapshots(d.Name)
		if origin != nil {
			sp.usedDS, sp.lused = diff(m, origin)
		} else {
			sp.usedDS, sp.lused = sp.refer, sp.lrefer
		}
		// written: since the latest snapshot, else since the origin.
		prev := origin
		if len(snaps) > 0 {
			prev = man[snaps[len(snaps)-1].Name]
		}
		if prev != nil {
			sp.written, _ = diff(m, prev)
		} else {
			sp.written = sp.refer
		}
		// Snapshots: each is charged what no one else holds; together they
		// hold whatever the filesystem no longer has.
		seen := map[fileKey]bool{}
		for i, sn := range snaps {
			sm := man[sn.Name]
			others := []*manifest{m, origin}
			for j, o := range snaps {
				if j != i {
					others = append(others, man[o.Name])
				}
			}
			ssp := &spaceInfo{refer: baseRefer + sm.charged, lrefer: baseLogical + sm.logical}
			ssp.used, _ = diff(sm, others...)
			var before *manifest = origin
			if i > 0 {
				before = man[snaps[i-1].Name]
			}
			if before != nil {
				ssp.written, _ = diff(sm, before)
			} else {
				ssp.written = ssp.refer
			}
			tab[sn.Name] = ssp
			for k := range sm.files {
				if !m.files[k] && (origin == nil || !origin.files[k]) && !seen[k] {
					seen[k] = true
					sp.usedSnap += charge(k)
					sp.lused += uint64(k.size)
				}
			}
		}
		for _, c := range st.children(d.Name) {
			csp := fsSpace(c)
			sp.usedChild += csp.used
			sp.lused += csp.lused
		}
		if rr := st.localNum(d, "refreservation"); rr > sp.usedDS {
			sp.usedRefreserv = rr - sp.usedDS
		}
		sp.used = sp.usedDS + sp.usedSnap + sp.usedChild + sp.usedRefreserv
		if r := st.localNum(d, "reservation"); r > sp.used {
			sp.used = r
		}
		tab[d.Name] = sp
		return sp
	}
	for _, p := range st.Pools {
		root := st.Datasets[p.Name]
		if root == nil {
			continue
		}
		rsp := fsSpace(root)
		poolAvail := poolAvailable(p.Size, rsp.used)
		for _, d := range st.subtree(p.Name) {
			if !d.Snap {
				tab[d.Name].avail = st.available(d, tab, poolAvail)
			}
		}
	}
	return tab
}

// poolAvailable is what datasets may still use: free space minus the slop
// space ZFS keeps back (1/32 of the pool, at least 128 MiB, at most half).
func poolAvailable(size, used uint64) uint64 {
	slop := size / 32
	if min := min(size/2, 128<<20); slop < min {
		slop = min
	}
	if used+slop >= size {
		return 0
	}
	return size - used - slop
}

// available: the pool's free space, bounded by every quota above and the
// dataset's own refquota.
func (st *state) available(d *dataset, tab map[string]*spaceInfo, poolAvail uint64) uint64 {
	avail := poolAvail
	for x := d; x != nil; x = st.Datasets[parentName(x.Name)] {
		if q := st.localNum(x, "quota"); q > 0 {
			left := uint64(0)
			if u := tab[x.Name].used; q > u {
				left = q - u
			}
			avail = min(avail, left)
		}
	}
	if rq := st.localNum(d, "refquota"); rq > 0 {
		left := uint64(0)
		if r := tab[d.Name].refer; rq > r {
			left = rq - r
		}
		avail = min(avail, left)
	}
	return avail
}

// poolUsage is zpool list's allocated and free.
func (s *sess) poolUsage(p *pool) (alloc, free uint64) {
	if root := s.st.Datasets[p.Name]; root != nil {
		alloc = s.space(root).used
	}
	if alloc > p.Size {
		alloc = p.Size
	}
	return alloc, p.Size - alloc
}
