package zfstest

import (
	"fmt"
	"sort"
	"strconv"
	"strings"
)

func (s *sess) zfsSet(args []string) int {
	if len(args) > 0 && strings.HasPrefix(args[0], "-") && len(args[0]) > 1 {
		return s.usage("set", fmt.Sprintf("invalid option '%c'\n", args[0][1]))
	}
	if len(args) < 2 {
		if len(args) == 1 && strings.Contains(args[0], "=") {
			return s.usage("set", "missing dataset name(s)\n")
		}
		return s.usage("set", "missing property=value argument(s)\n")
	}
	dsStart := -1
	for i, a := range args {
		if strings.Contains(a, "=") {
			if dsStart >= 0 {
				return s.usage("set", "invalid argument order\n")
			}
		} else if dsStart < 0 {
			dsStart = i
		}
	}
	switch dsStart {
	case -1:
		return s.usage("set", "missing dataset name(s)\n")
	case 0:
		return s.usage("set", "missing property=value argument(s)\n")
	}
	var props []kv
	for _, a := range args[:dsStart] {
		var msg string
		if props, msg = parseprop(props, a); msg != "" {
			s.errf("%s", msg)
			return 255
		}
	}
	rc := 0
	for _, name := range args[dsStart:] {
		d := s.openDataset(name, tFS|tVol|tSnap)
		if d == nil || s.setProps(d, props) != 0 {
			rc = 1
		}
	}
	return rc
}

// setProps is zfs_prop_set_list on one dataset.
func (s *sess) setProps(d *dataset, props []kv) int {
	fail := func(msg string) int {
		s.errf("cannot set property for '%s': %s\n", d.Name, msg)
		return 1
	}
	valid, msg := s.validProps(props, false, d.Snap)
	if msg != "" {
		return fail(msg)
	}
	remount := false
	for _, p := range valid {
		if d.Snap && !isUserProp(p.k) {
			return fail("this property can not be modified for snapshots")
		}
		n, _ := strconv.ParseUint(p.v, 10, 64)
		sp := s.space(d)
		switch {
		case n == 0:
		case p.k == "quota" && n < sp.used, p.k == "refquota" && n < sp.refer:
			return fail("size is less than current used or reserved space")
		case (p.k == "reservation" || p.k == "refreservation") && n > sp.used+sp.avail:
			return fail("size is greater than available space")
		}
		remount = remount || p.k == "mountpoint" || p.k == "canmount"
	}
	if s.poolSuspended("set property for", d.Name) {
		return 1
	}
	apply := func() {
		for _, p := range valid {
			d.setLocal(p.k, p.v)
		}
	}
	s.changed()
	if !remount {
		apply()
		return 0
	}
	return s.remount(s.st.mountChildren(d), false, apply)
}

// setLocal sets a property on d. A quota or reservation of 0 ("none") and
// a limit of "none" are the default, not a local value, as in libzfs.
func (d *dataset) setLocal(k, v string) {
	if v == "0" && contains([]string{"quota", "refquota", "reservation", "refreservation"}, k) ||
		v == maxUint64 && (k == "filesystem_limit" || k == "snapshot_limit") {
		delete(d.Props, k)
		return
	}
	d.Props[k] = v
}

// mountChildren is a mountpoint changelist: d and the filesystems below
// it whose mountpoint follows d's.
func (st *state) mountChildren(d *dataset) []*dataset {
	var out []*dataset
	for _, x := range st.subtree(d.Name) {
		if x.Snap {
			continue
		}
		follows := true
		for y := x; y != d; y = st.Datasets[parentName(y.Name)] {
			if _, ok := y.Props["mountpoint"]; ok {
				follows = false
				break
			}
		}
		if follows {
			out = append(out, x)
		}
	}
	return out
}

// remount runs change between unmounting the affected filesystems (deepest
// first) and mounting again those that were mounted, or that had no
// mountpoint before and have canmount=on, as libzfs's changelist does.
func (s *sess) remount(affected []*dataset, force bool, change func()) int {
	was := map[*dataset]bool{}
	hadNone := map[*dataset]bool{}
	for i := len(affected) - 1; i >= 0; i-- {
		x := affected[i]
		hadNone[x] = s.st.mountpoint(x) == ""
		if x.Mounted {
			if s.blocked(x, force) {
				return 1
			}
			was[x] = true
		}
	}
	for i := len(affected) - 1; i >= 0; i-- {
		if x := affected[i]; was[x] {
			if err := s.st.unmountFS(x); err != nil {
				s.errf("cannot unmount '%s': %v\n", s.st.mountpoint(x), err)
				return 1
			}
		}
	}
	change()
	s.spaceTab = nil
	for _, x := range affected {
		if (was[x] || hadNone[x] && s.st.canmount(x) == "on") && s.st.canMount(x) && !x.Mounted {
			if err := s.st.mountFS(x); err != nil {
				s.errf("%v\nproperty may be set but unable to remount filesystem\n", err)
				return 1
			}
		}
	}
	return 0
}

func (s *sess) zfsInherit(args []string) int {
	opts, operands, msg := getopt(args, "rS")
	if msg != "" {
		return s.usage("inherit", msg)
	}
	recurse := false
	for _, o := range opts {
		recurse = recurse || o.c == 'r'
	}
	switch len(operands) {
	case 0:
		return s.usage("inherit", "missing property argument\n")
	case 1:
		return s.usage("inherit", "missing dataset argument\n")
	}
	name := operands[0]
	p := lookupProp(name)
	switch {
	case p != nil && p.readonly():
		s.errf("%s property is read-only\n", name)
		return 1
	case p != nil && !p.inheritable():
		s.errf("'%s' property cannot be inherited\n", name)
		if contains([]string{"quota", "reservation", "refquota", "refreservation"}, p.name) {
			s.errf("use 'zfs set %s=none' to clear\n", name)
			s.errf("use 'zfs inherit -S %s' to revert to received value\n", name)
		}
		return 1
	case p == nil && !isUserProp(name):
		return s.usage("inherit", fmt.Sprintf("invalid property '%s'\n", name))
	case p != nil:
		name = p.name
	}
	rc := 0
	for _, op := range operands[1:] {
		d := s.openDataset(op, tFS|tVol|tSnap)
		if d == nil {
			rc = 1
			continue
		}
		targets := []*dataset{d}
		if recurse {
			targets = s.st.subtree(d.Name)
		}
		for _, x := range targets {
			if p != nil && !p.appliesTo(x) {
				if !recurse {
					s.errf("cannot inherit %s for '%s': property does not apply to datasets of this type\n", name, x.Name)
					rc = 1
				}
				continue
			}
			s.changed()
			apply := func() { delete(x.Props, name) }
			if name != "mountpoint" {
				apply()
			} else if s.remount(s.st.mountChildren(x), false, apply) != 0 {
				rc = 1
			}
		}
	}
	return rc
}

func (s *sess) zfsMount(args []string) int {
	opts, operands, msg := getopt(args, "a")
	if msg != "" {
		return s.usage("mount", msg)
	}
	all := len(opts) > 0
	switch {
	case all && len(operands) > 0, len(operands) > 1:
		return s.usage("mount", "too many arguments\n")
	case all:
		rc := 0
		for _, d := range s.st.all() {
			if !d.Snap && !d.Mounted && s.st.canmount(d) == "on" && s.st.canMount(d) && s.mountOne(d) != 0 {
				rc = 1
			}
		}
		return rc
	case len(operands) == 0:
		for _, d := range s.st.all() {
			if d.Mounted {
				s.outf("%-30s  %s\n", d.Name, s.st.mountpoint(d))
			}
		}
		return 0
	}
	d := s.openDataset(operands[0], tFS)
	if d == nil {
		return 1
	}
	mp, _, _ := s.st.mountpointProp(d)
	switch {
	case mp == "legacy":
		s.errf("cannot mount '%s': legacy mountpoint\nuse mount(8) to mount this filesystem\n", d.Name)
	case mp == "none":
		s.errf("cannot mount '%s': no mountpoint set\n", d.Name)
	case s.st.canmount(d) == "off":
		s.errf("cannot mount '%s': 'canmount' property is set to 'off'\n", d.Name)
	case d.Mounted:
		s.errf("cannot mount '%s': filesystem already mounted\n", d.Name)
	default:
		return s.mountOne(d)
	}
	return 1
}

func (s *sess) mountOne(d *dataset) int {
	s.spaceTab = nil
	if err := s.st.mountFS(d); err != nil {
		s.errf("%v\n", err)
		return 1
	}
	return 0
}

func (s *sess) zfsUnmount(args []string) int {
	opts, operands, msg := getopt(args, "af")
	if msg != "" {
		return s.usage("unmount", msg)
	}
	all, force := false, false
	for _, o := range opts {
		all = all || o.c == 'a'
		force = force || o.c == 'f'
	}
	switch {
	case all && len(operands) > 0, len(operands) > 1:
		return s.usage("unmount", "too many arguments\n")
	case all:
		return s.unmountList(s.st.all(), force)
	case len(operands) == 0:
		return s.usage("unmount", "missing filesystem argument\n")
	}
	arg := operands[0]
	if strings.HasPrefix(arg, "/") {
		if d := s.st.mountedPaths()[strings.TrimSuffix(arg, "/")]; d != nil {
			return s.unmountList([]*dataset{d}, force)
		}
		s.errf("cannot unmount '%s': not currently mounted\n", arg)
		return 1
	}
	d := s.openDataset(arg, tFS)
	if d == nil {
		return 1
	}
	mp, _, _ := s.st.mountpointProp(d)
	switch {
	case mp == "legacy":
		s.errf("cannot unmount '%s': legacy mountpoint\nuse umount(8) to unmount this filesystem\n", d.Name)
		return 1
	case !d.Mounted:
		s.errf("cannot unmount '%s': not currently mounted\n", d.Name)
		return 1
	}
	// zfs_unmountall: d and what is mounted below it following d's mountpoint.
	return s.unmountList(s.st.mountChildren(d), force)
}

// unmountList unmounts the mounted filesystems of list, deepest first, all
// or none.
func (s *sess) unmountList(list []*dataset, force bool) int {
	var todo []*dataset
	for _, x := range list {
		if !x.Snap && x.Mounted {
			todo = append(todo, x)
		}
	}
	// Deepest mountpoint first, so nothing moves with its parent's files.
	sort.SliceStable(todo, func(i, j int) bool {
		return len(s.st.mountpoint(todo[i])) > len(s.st.mountpoint(todo[j]))
	})
	for _, x := range todo {
		nested := false
		for _, n := range s.st.nestedMounts(x) {
			nested = nested || !contains(names(todo), n.Name)
		}
		if !force && (x.Busy || nested) {
			s.errf("cannot unmount '%s': pool or dataset is busy\n", s.st.mountpoint(x))
			return 1
		}
	}
	s.spaceTab = nil
	for _, x := range todo {
		if err := s.st.unmountFS(x); err != nil {
			s.errf("cannot unmount '%s': %v\n", s.st.mountpoint(x), err)
			return 1
		}
	}
	return 0
}
