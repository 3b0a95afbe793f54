package zfstest

import (
	"fmt"
	"os"
	"strings"
)

type kv struct{ k, v string }

// parseprop is zfs_main.c's parseprop for -o: "name=value", each once.
func parseprop(props []kv, arg string) ([]kv, string) {
	k, v, ok := strings.Cut(arg, "=")
	if !ok {
		return nil, "missing '=' for property=value argument\n"
	}
	for _, p := range props {
		if p.k == k {
			return nil, fmt.Sprintf("property '%s' specified multiple times\n", k)
		}
	}
	return append(props, kv{k, v}), ""
}

// validProps validates props for a new dataset (or a set), returning the
// canonical values or the libzfs message.
func (s *sess) validProps(props []kv, creating, snap bool) ([]kv, string) {
	var out []kv
	for _, p := range props {
		v, msg := s.st.parseProp(p.k, p.v, creating, snap)
		if msg != "" {
			return nil, msg
		}
		out = append(out, kv{p.k, v})
	}
	return out, ""
}

// checkParents is libzfs's check_parents; it always says "cannot create".
func (s *sess) checkParents(name string) bool {
	parent := parentName(name)
	switch {
	case parent == "":
		s.errf("cannot create '%s': missing dataset name\n", name)
	case s.st.Pools[poolOf(name)] == nil:
		s.errf("cannot create '%s': no such pool '%s'\n", name, poolOf(name))
	case s.st.Datasets[parent] == nil:
		s.errf("cannot create '%s': parent does not exist\n", name)
	default:
		return true
	}
	return false
}

// newFS creates filesystem name with validated props, as a clone of origin
// if not nil, and mounts it if canmount=on.
func (s *sess) newFS(name string, props []kv, origin *dataset) int {
	s.changed()
	d := s.st.newDataset(name, false, s.now.Unix())
	for _, p := range props {
		d.setLocal(p.k, p.v)
	}
	if origin != nil {
		d.Origin = origin.Name
		if err := copyTree(s.st.snapDir(origin), s.st.parkedDir(d), nil, ""); err != nil {
			s.errf("cannot create '%s': %v\n", name, err)
			return 1
		}
	} else if err := os.MkdirAll(s.st.parkedDir(d), 0o755); err != nil {
		s.errf("cannot create '%s': %v\n", name, err)
		return 1
	}
	if s.st.canMount(d) && s.st.canmount(d) == "on" {
		if err := s.st.mountFS(d); err != nil {
			s.errf("%v\nfilesystem successfully created, but not mounted\n", err)
			return 1
		}
	}
	return 0
}

// createAncestors is zfs_create_ancestors (-p): every missing parent, with
// no properties.
func (s *sess) createAncestors(name string) bool {
	if s.st.Pools[poolOf(name)] == nil {
		s.errf("cannot create '%s': no such pool '%s'\n", name, poolOf(name))
		return false
	}
	var missing []string
	for p := parentName(name); p != "" && s.st.Datasets[p] == nil; p = parentName(p) {
		missing = append([]string{p}, missing...)
	}
	for _, p := range missing {
		if s.newFS(p, nil, nil) != 0 {
			return false
		}
	}
	return true
}

func (s *sess) zfsCreate(args []string) int {
	opts, operands, msg := getopt(args, "po:")
	if msg != "" {
		return s.usage("create", msg)
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
	switch {
	case len(operands) == 0:
		return s.usage("create", "missing filesystem argument\n")
	case len(operands) > 1:
		return s.usage("create", "too many arguments\n")
	}
	name := operands[0]
	if s.poolSuspended("create", name) {
		return 1
	}
	if parents && validateName(name, tFS, true) == "" {
		if s.st.Datasets[name] != nil {
			return 0
		}
		if !s.createAncestors(name) {
			return 1
		}
	}
	if msg := validateName(name, tFS, true); msg != "" {
		s.errf("cannot create '%s': %s\n", name, msg)
		return 1
	}
	if !s.checkParents(name) {
		return 1
	}
	if s.st.Datasets[name] != nil {
		s.errf("cannot create '%s': dataset already exists\n", name)
		return 1
	}
	props, msg = s.validProps(props, true, false)
	if msg != "" {
		s.errf("cannot create '%s': %s\n", name, msg)
		return 1
	}
	return s.newFS(name, props, nil)
}

// dropDataset destroys one dataset: its files, its mountpoint directory,
// its entry.
func (s *sess) dropDataset(d *dataset) {
	s.st.forget(d)
}

// forget removes d and what lives only with it: its files, a partial
// receive's bytes, a filesystem's bookmarks.
func (st *state) forget(d *dataset) {
	st.removeData(d)
	st.forgetPartial(d)
	if !d.Snap {
		for _, b := range st.bookmarksOf(d.Name) {
			delete(st.Bookmarks, b.Name)
		}
	}
	delete(st.Datasets, d.Name)
}

// blocked prints why x cannot be destroyed now (a hold, a busy mount).
func (s *sess) blocked(x *dataset, force bool) bool {
	switch {
	case x.Snap && len(x.Holds) > 0:
		s.errf("cannot destroy snapshot %s: dataset is busy\n", x.Name)
	case !x.Snap && x.Mounted && !force && (x.Busy || len(s.st.nestedMounts(x)) > 0 && !s.allGoing(x)):
		s.errf("cannot unmount '%s': pool or dataset is busy\n", s.st.mountpoint(x))
	default:
		return false
	}
	return true
}

// allGoing: every filesystem mounted below x is itself a descendant of x
// (and so destroyed or unmounted first).
func (s *sess) allGoing(x *dataset) bool {
	for _, n := range s.st.nestedMounts(x) {
		if !isDescendant(n.Name, x.Name) {
			return false
		}
	}
	return true
}

func (s *sess) zfsDestroy(args []string) int {
	opts, operands, msg := getopt(args, "vpnfrR")
	if msg != "" {
		return s.usage("destroy", msg)
	}
	var f destroyFlags
	for _, o := range opts {
		switch o.c {
		case 'v':
			f.verbose = true
		case 'p':
			f.verbose, f.parsable = true, true
		case 'n':
			f.dry = true
		case 'f':
			f.force = true
		case 'r':
			f.recurse = true
		case 'R':
			f.recurse, f.clones = true, true
		}
	}
	recurse, clones, force, dry := f.recurse, f.clones, f.force, f.dry
	switch {
	case len(operands) == 0:
		return s.usage("destroy", "missing dataset argument\n")
	case len(operands) > 1:
		return s.usage("destroy", "too many arguments\n")
	}
	name := operands[0]
	say := f.say(s)
	if strings.Contains(name, "#") {
		return s.destroyBookmark(name)
	}
	if strings.Contains(name, "@") {
		return s.destroySnapshots(name, f)
	}
	d := s.openDataset(name, tFS|tVol)
	if d == nil {
		return 1
	}
	isPool := !strings.Contains(name, "/")
	if !recurse && isPool {
		s.errf("cannot destroy '%s': operation does not apply to pools\n", name)
		s.errf("use 'zfs destroy -r %s' to destroy all datasets in the pool\n", name)
		s.errf("use 'zpool destroy %s' to destroy the pool itself\n", name)
		return 1
	}
	deps := s.st.dependents(d)
	if !clones && s.reportDependents(d, deps, recurse) {
		return 1
	}
	for _, x := range deps {
		say(x.Name)
	}
	say(d.Name)
	if dry {
		return 0
	}
	if s.poolSuspended("destroy", name) {
		return 1
	}
	targets := append(deps, d)
	if isPool {
		targets = deps
	}
	for _, x := range targets {
		if s.blocked(x, force) {
			return 1
		}
	}
	s.changed()
	for _, x := range targets {
		s.dropDataset(x)
	}
	return 0
}

// reportDependents is destroy_check_dependent: without -r, children are in
// the way; with -r (not -R), clones outside the tree are.
func (s *sess) reportDependents(d *dataset, deps []*dataset, recurse bool) bool {
	first := true
	for _, x := range deps {
		direct := isDescendant(x.Name, d.Name)
		if direct && recurse || !direct && !recurse && !d.Snap {
			continue
		}
		if first {
			kind := "filesystem"
			if d.Snap {
				kind = "snapshot"
			}
			if direct {
				s.errf("cannot destroy '%s': %s has children\nuse '-r' to destroy the following datasets:\n", d.Name, kind)
			} else {
				s.errf("cannot destroy '%s': %s has dependent clones\nuse '-R' to destroy the following datasets:\n", d.Name, kind)
			}
			first = false
		}
		s.errf("%s\n", x.Name)
	}
	return !first
}

// destroySnapshots is the '@' branch of zfs destroy: fs@a[,b] (with -r, in
// every descendant that has them).
func (s *sess) destroySnapshots(spec string, f destroyFlags) int {
	recurse, clones, dry, force, say := f.recurse, f.clones, f.dry, f.force, f.say(s)
	fsname, snaps, _ := strings.Cut(spec, "@")
	d := s.openDataset(fsname, tFS|tVol)
	if d == nil {
		return 1
	}
	filesystems := []*dataset{d}
	if recurse {
		filesystems = nil
		for _, x := range s.st.subtree(fsname) {
			if !x.Snap {
				filesystems = append(filesystems, x)
			}
		}
	}
	var targets []*dataset
	failed := false
	for _, f := range filesystems {
		for _, sn := range strings.Split(snaps, ",") {
			x := s.st.Datasets[f.Name+"@"+sn]
			if x == nil || contains(names(targets), x.Name) {
				continue
			}
			if !clones && s.reportDependents(x, s.st.dependents(x), false) {
				failed = true
				continue
			}
			targets = append(targets, x)
		}
	}
	if failed {
		return 1
	}
	if len(targets) == 0 {
		s.errf("could not find any snapshots to destroy; check snapshot names.\n")
		return 1
	}
	var reclaim uint64
	for _, x := range targets {
		say(x.Name)
		reclaim += s.space(x).used
	}
	switch {
	case !f.verbose:
	case f.parsable:
		s.outf("reclaim\t%d\n", reclaim)
	case dry:
		s.outf("would reclaim %s\n", niceBytes(reclaim))
	default:
		s.outf("will reclaim %s\n", niceBytes(reclaim))
	}
	if dry || s.poolSuspended("destroy", spec) {
		return boolRC(!dry)
	}
	var all []*dataset
	for _, x := range targets {
		if clones {
			all = append(all, s.st.dependents(x)...)
		}
	}
	all = append(all, targets...)
	bad := false
	for _, x := range all {
		bad = s.blocked(x, force) || bad
	}
	if bad {
		return 1
	}
	s.changed()
	for _, x := range all {
		if s.st.Datasets[x.Name] == x {
			s.dropDataset(x)
		}
	}
	return 0
}

type destroyFlags struct {
	recurse, clones, force, dry, verbose, parsable bool
}

// say returns the -v/-p printer of what is (or would be) destroyed.
func (f destroyFlags) say(s *sess) func(string) {
	return func(x string) {
		switch {
		case !f.verbose:
		case f.parsable:
			s.outf("destroy\t%s\n", x)
		case f.dry:
			s.outf("would destroy %s\n", x)
		default:
			s.outf("will destroy %s\n", x)
		}
	}
}

func names(ds []*dataset) []string {
	out := make([]string, len(ds))
	for i, d := range ds {
		out[i] = d.Name
	}
	return out
}

func boolRC(fail bool) int {
	if fail {
		return 1
	}
	return 0
}
