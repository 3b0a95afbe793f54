package zfstest

import (
	"fmt"
	"sort"
	"strings"
)

func (s *sess) zfsHold(args []string) int    { return s.holdRelease("hold", args) }
func (s *sess) zfsRelease(args []string) int { return s.holdRelease("release", args) }

// holdRelease is zfs_do_hold_rele_impl: one tag, many snapshots; with -r
// the same snapshot name in every descendant filesystem.
func (s *sess) holdRelease(cmd string, args []string) int {
	opts, operands, msg := getopt(args, "r")
	if msg != "" {
		return s.usage(cmd, msg)
	}
	recurse := len(opts) > 0
	if len(operands) < 2 {
		return s.usage(cmd, "")
	}
	tag := operands[0]
	holding := cmd == "hold"
	errors := 0
	for _, arg := range operands[1:] {
		fsname, snap, ok := strings.Cut(arg, "@")
		if !ok {
			s.errf("'%s' is not a snapshot\n", arg)
			errors++
			continue
		}
		d := s.openDataset(fsname, tFS|tVol)
		if d == nil {
			errors++
			continue
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
		noTag := false
		for _, f := range filesystems {
			x := s.st.Datasets[f.Name+"@"+snap]
			switch {
			case x == nil:
			case !holding && !hasTag(x, tag):
				noTag = true
			default:
				targets = append(targets, x)
			}
		}
		if len(targets) == 0 {
			what := "dataset does not exist"
			if noTag {
				what = "no such tag on this dataset"
			}
			if holding {
				s.errf("cannot hold snapshot '%s': %s\n", arg, what)
			} else {
				s.errf("cannot release hold from snapshot '%s': %s\n", arg, what)
			}
			errors++
			continue
		}
		if s.poolSuspended(cmd, arg) {
			errors++
			continue
		}
		s.changed()
		for _, x := range targets {
			switch {
			case !holding:
				delete(x.Holds, tag)
			case hasTag(x, tag):
				s.errf("cannot hold snapshot '%s': tag already exists on this dataset\n", x.Name)
				errors++
			default:
				if x.Holds == nil {
					x.Holds = map[string]int64{}
				}
				x.Holds[tag] = s.now.Unix()
			}
		}
	}
	return boolRC(errors != 0)
}

// zfsHolds is zfs holds [-rH]. OpenZFS 2.1 has no -p (it came in 2.2), so
// the timestamp is always the human one, to the minute.
func (s *sess) zfsHolds(args []string) int {
	opts, operands, msg := getopt(args, "rH")
	if msg != "" {
		return s.usage("holds", msg)
	}
	recurse, scripted := false, false
	for _, o := range opts {
		recurse = recurse || o.c == 'r'
		scripted = scripted || o.c == 'H'
	}
	if len(operands) == 0 {
		return s.usage("holds", "")
	}
	errors := 0
	found := map[string]*dataset{}
	for _, arg := range operands {
		fsname, snap, ok := strings.Cut(arg, "@")
		if !ok {
			s.errf("'%s' is not a snapshot\n", arg)
			errors++
			continue
		}
		if !recurse {
			if d := s.openDataset(arg, tSnap); d != nil {
				found[d.Name] = d
			} else {
				errors++
			}
			continue
		}
		d := s.openDataset(fsname, tFS|tVol)
		if d == nil {
			errors++
			continue
		}
		for _, x := range s.st.subtree(fsname) {
			if x.Snap && strings.TrimPrefix(x.Name, fsName(x.Name)+"@") == snap {
				found[x.Name] = x
			}
		}
	}
	var snaps []*dataset
	nwidth, twidth := 0, 0
	for _, d := range found {
		if len(d.Holds) == 0 {
			continue
		}
		snaps = append(snaps, d)
		nwidth = max(nwidth, len(d.Name))
		for t := range d.Holds {
			twidth = max(twidth, len(t))
		}
	}
	sortDatasets(snaps)
	if !scripted {
		s.outf("%-*s  %-*s  %s\n", nwidth, "NAME", twidth, "TAG", "TIMESTAMP")
	}
	for _, d := range snaps {
		tags := make([]string, 0, len(d.Holds))
		for t := range d.Holds {
			tags = append(tags, t)
		}
		sort.Strings(tags)
		for _, t := range tags {
			ts := zfsDate(d.Holds[t], "%H")
			if scripted {
				s.outf("%s\t%s\t%s\n", d.Name, t, ts)
			} else {
				s.outf("%s\n", fmt.Sprintf("%-*s  %-*s  %s", nwidth, d.Name, twidth, t, ts))
			}
		}
	}
	return boolRC(errors != 0)
}

func hasTag(d *dataset, tag string) bool {
	_, ok := d.Holds[tag]
	return ok
}
