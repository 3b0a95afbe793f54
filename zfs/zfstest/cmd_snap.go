package zfstest

import (
	"strings"
)

func (s *sess) zfsSnapshot(args []string) int {
	opts, operands, msg := getopt(args, "ro:")
	if msg != "" {
		return s.usage("snapshot", msg)
	}
	recurse := false
	var props []kv
	for _, o := range opts {
		switch o.c {
		case 'r':
			recurse = true
		case 'o':
			if props, msg = parseprop(props, o.arg); msg != "" {
				s.errf("%s", msg)
				return 1
			}
		}
	}
	if len(operands) == 0 {
		return s.usage("snapshot", "missing snapshot argument\n")
	}
	var targets []string
	for _, arg := range operands {
		fsname, snap, ok := strings.Cut(arg, "@")
		if !ok {
			return s.usage("snapshot", "")
		}
		d := s.openDataset(fsname, tFS|tVol)
		if d == nil {
			return s.usage("snapshot", "")
		}
		if !recurse {
			targets = append(targets, arg)
			continue
		}
		for _, x := range s.st.subtree(fsname) {
			if !x.Snap {
				targets = append(targets, x.Name+"@"+snap)
			}
		}
	}
	for _, t := range targets {
		if msg := validateName(t, tSnap, true); msg != "" {
			s.errf("cannot create snapshot '%s': %s\n", t, msg)
			return 1
		}
	}
	props, msg = s.validProps(props, true, true)
	if msg != "" {
		s.errf("cannot create snapshot '%s': %s\n", targets[0], msg)
		return 1
	}
	// lzc_snapshot is atomic: one failure and none is taken.
	failed := false
	for _, t := range targets {
		if s.st.Datasets[t] != nil {
			s.errf("cannot create snapshot '%s': dataset already exists\n", t)
			failed = true
		}
	}
	if failed || s.poolSuspended("create snapshot", targets[0]) {
		return 1
	}
	s.changed()
	mounted := s.st.mountedPaths()
	for _, t := range targets {
		fs := s.st.Datasets[fsName(t)]
		d := s.st.newDataset(t, true, s.now.Unix())
		for _, p := range props {
			d.Props[p.k] = p.v
		}
		if err := copyTree(s.st.dataDir(fs), s.st.snapDir(d), mounted, s.st.StoreDir); err != nil {
			s.errf("cannot create snapshot '%s': %v\n", t, err)
			return 1
		}
	}
	return 0
}

func (s *sess) zfsRollback(args []string) int {
	opts, operands, msg := getopt(args, "rRf")
	if msg != "" {
		return s.usage("rollback", msg)
	}
	recurse, clones := false, false
	for _, o := range opts {
		switch o.c {
		case 'r':
			recurse = true
		case 'R':
			recurse, clones = true, true
		}
	}
	switch {
	case len(operands) == 0:
		return s.usage("rollback", "missing dataset argument\n")
	case len(operands) > 1:
		return s.usage("rollback", "too many arguments\n")
	}
	snap := s.openDataset(operands[0], tSnap)
	if snap == nil {
		return 1
	}
	fs := s.st.Datasets[fsName(snap.Name)]
	var newer []*dataset
	for _, x := range s.st.snapshots(fs.Name) {
		if x.CreateTxg > snap.CreateTxg {
			newer = append(newer, x)
		}
	}
	// OpenZFS's zfs_do_rollback checks the filesystem's bookmarks as its
	// snapshots (rollback_check over zfs_iter_bookmarks): one newer than
	// snap refuses the rollback, and -r destroys it.
	var newerMarks []*bookmark
	for _, b := range s.st.bookmarksOf(fs.Name) {
		if b.CreateTxg > snap.CreateTxg {
			newerMarks = append(newerMarks, b)
		}
	}
	if len(newer)+len(newerMarks) > 0 && !recurse {
		s.errf("cannot rollback to '%s': more recent snapshots or bookmarks exist\n", snap.Name)
		s.errf("use '-r' to force deletion of the following snapshots and bookmarks:\n")
		for _, x := range newer {
			s.errf("%s\n", x.Name)
		}
		for _, b := range newerMarks {
			s.errf("%s\n", b.Name)
		}
		return 1
	}
	var doomed []*dataset
	first := true
	for _, x := range newer {
		deps := s.st.dependents(x)
		if len(deps) > 0 && !clones {
			if first {
				s.errf("cannot rollback to '%s': clones of previous snapshots exist\n", snap.Name)
				s.errf("use '-R' to force deletion of the following clones and dependents:\n")
				first = false
			}
			for _, c := range deps {
				s.errf("%s\n", c.Name)
			}
		}
		doomed = append(append(doomed, deps...), x)
	}
	if !first || s.poolSuspended("rollback", snap.Name) {
		return 1
	}
	for _, x := range doomed {
		if x.Snap && len(x.Holds) > 0 {
			s.errf("cannot destroy '%s': dataset is busy\n", x.Name)
			return 1
		}
		if s.blocked(x, false) {
			return 1
		}
	}
	s.changed()
	for _, x := range doomed {
		s.dropDataset(x)
	}
	for _, b := range newerMarks {
		delete(s.st.Bookmarks, b.Name)
	}
	mounted := s.st.mountedPaths()
	live := s.st.dataDir(fs)
	clearDir(live, mounted, s.st.StoreDir)
	if err := copyTree(s.st.snapDir(snap), live, mounted, ""); err != nil {
		s.errf("cannot rollback '%s': %v\n", fs.Name, err)
		return 1
	}
	return 0
}

func (s *sess) zfsClone(args []string) int {
	opts, operands, msg := getopt(args, "po:")
	if msg != "" {
		return s.usage("clone", msg)
	}
	parents := false
	var props []kv
	for _, o := range opts {
		switch o.c {
		case 'p':
			parents = true
		case 'o':
			if props, msg = parseprop(props, o.arg); msg != "" {
				s.errf("%s", msg)
				return 1
			}
		}
	}
	switch len(operands) {
	case 0:
		return s.usage("clone", "missing source dataset argument\n")
	case 1:
		return s.usage("clone", "missing target dataset argument\n")
	case 2:
	default:
		return s.usage("clone", "too many arguments\n")
	}
	snap := s.openDataset(operands[0], tSnap)
	if snap == nil {
		return 1
	}
	target := operands[1]
	if parents && validateName(target, tFS|tVol, false) == "" {
		if s.st.Datasets[target] != nil {
			return 0
		}
		if !s.createAncestors(target) {
			return 1
		}
	}
	if msg := validateName(target, tFS, true); msg != "" {
		s.errf("cannot create '%s': %s\n", target, msg)
		return 1
	}
	if !s.checkParents(target) {
		return 1
	}
	props, msg = s.validProps(props, true, false)
	switch {
	case msg != "":
		s.errf("cannot create '%s': %s\n", target, msg)
	case poolOf(target) != poolOf(snap.Name):
		s.errf("cannot create '%s': source and target pools differ\n", target)
	case s.st.Datasets[target] != nil:
		s.errf("cannot create '%s': dataset already exists\n", target)
	case s.poolSuspended("create", target):
	default:
		return s.newFS(target, props, snap)
	}
	return 1
}

func (s *sess) zfsRename(args []string) int {
	opts, operands, msg := getopt(args, "fp")
	if msg != "" {
		return s.usage("rename", msg)
	}
	force, parents := false, false
	for _, o := range opts {
		switch o.c {
		case 'f':
			force = true
		case 'p':
			parents = true
		}
	}
	switch len(operands) {
	case 0:
		return s.usage("rename", "missing source dataset argument\n")
	case 1:
		return s.usage("rename", "missing target dataset argument\n")
	case 2:
	default:
		return s.usage("rename", "too many arguments\n")
	}
	src, dst := operands[0], operands[1]
	types := tFS | tVol | tSnap
	if parents {
		types = tFS | tVol
	}
	d := s.openDataset(src, types)
	if d == nil {
		return 1
	}
	if d.Snap {
		return s.renameSnapshot(d, dst)
	}
	if parents && validateName(dst, tFS, false) == "" && !s.createAncestors(dst) {
		return 1
	}
	if msg := validateName(dst, tFS, true); msg != "" {
		s.errf("cannot rename to '%s': %s\n", dst, msg)
		return 1
	}
	if !s.checkParents(dst) {
		return 1
	}
	switch {
	case poolOf(dst) != poolOf(src):
		s.errf("cannot rename to '%s': datasets must be within same pool\n", dst)
		return 1
	case isDescendant(dst, src):
		s.errf("cannot rename to '%s': New dataset name cannot be a descendant of current dataset name\n", dst)
		return 1
	}
	// changelist_prefix: unmount the tree, deepest first.
	tree := s.st.subtree(src)
	var wasMounted []*dataset
	for i := len(tree) - 1; i >= 0; i-- {
		if x := tree[i]; !x.Snap && x.Mounted {
			if s.blocked(x, force) {
				return 1
			}
			wasMounted = append(wasMounted, x)
		}
	}
	if s.st.Datasets[dst] != nil {
		s.errf("cannot rename '%s': dataset already exists\n", src)
		return 1
	}
	if s.poolSuspended("rename", src) {
		return 1
	}
	s.changed()
	for _, x := range wasMounted {
		if err := s.st.unmountFS(x); err != nil {
			s.errf("cannot unmount '%s': %v\n", s.st.mountpoint(x), err)
			return 1
		}
	}
	for _, x := range tree {
		s.st.renameKey(x, dst+x.Name[len(src):])
	}
	for i := len(wasMounted) - 1; i >= 0; i-- {
		if x := wasMounted[i]; s.st.canMount(x) {
			if err := s.st.mountFS(x); err != nil {
				s.errf("%v\n", err)
				return 1
			}
		}
	}
	return 0
}

func (s *sess) renameSnapshot(d *dataset, dst string) int {
	if !strings.Contains(dst, "@") {
		dst = fsName(d.Name) + "@" + dst
	} else if strings.HasPrefix(dst, "@") {
		dst = fsName(d.Name) + dst
	}
	if msg := validateName(dst, tSnap, true); msg != "" {
		s.errf("cannot rename to '%s': %s\n", dst, msg)
		return 1
	}
	if fsName(dst) != fsName(d.Name) {
		s.errf("cannot rename to '%s': snapshots must be part of same dataset\n", dst)
		return 1
	}
	if s.st.Datasets[dst] != nil {
		s.errf("cannot rename '%s': dataset already exists\n", d.Name)
		return 1
	}
	s.changed()
	s.st.renameKey(d, dst)
	return 0
}

// renameKey renames one dataset in place, keeping clones pointing at it.
func (st *state) renameKey(d *dataset, name string) {
	old := d.Name
	delete(st.Datasets, old)
	d.Name = name
	st.Datasets[name] = d
	if !d.Snap {
		for _, b := range st.bookmarksOf(old) {
			delete(st.Bookmarks, b.Name)
			b.Name = name + b.Name[len(old):]
			st.Bookmarks[b.Name] = b
		}
	}
	for _, x := range st.Datasets {
		if x.Origin == old {
			x.Origin = name
		}
	}
}
