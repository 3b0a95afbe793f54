package zfstest

import (
	"fmt"
	"path"
	"strconv"
	"strings"
	"time"
)

type source int

const (
	srcNone source = iota // "-": computed or fixed
	srcDefault
	srcLocal
	srcInherited
)

// pval is one property of one dataset as zfs prints it.
type pval struct {
	ok    bool // false: not applicable or unset; zfs prints "-" (or skips it in "all")
	val   string
	num   uint64
	isNum bool
	src   source
	from  string // the dataset inherited from
}

func (v pval) sourceText() string {
	switch v.src {
	case srcDefault:
		return "default"
	case srcLocal:
		return "local"
	case srcInherited:
		return "inherited from " + v.from
	}
	return "-"
}

// sourceKind is the name -s filters on.
func (v pval) sourceKind() string {
	switch v.src {
	case srcDefault:
		return "default"
	case srcLocal:
		return "local"
	case srcInherited:
		return "inherited"
	}
	return "none"
}

// resolve finds a stored property: local, inherited along the parents (a
// snapshot's parent is its filesystem), or absent (default).
func (st *state) resolve(d *dataset, name string, inherit bool) (val string, src source, from string) {
	for x := d; x != nil; x = st.Datasets[parentName(x.Name)] {
		if v, ok := x.Props[name]; ok {
			if x == d {
				return v, srcLocal, ""
			}
			return v, srcInherited, x.Name
		}
		if !inherit {
			break
		}
	}
	return "", srcDefault, ""
}

// mountpointProp is libzfs's mountpoint rule: an inherited path gets the
// rest of the name appended; the default is "/<name>"; every path gets the
// altroot (MountRoot) in front.
func (st *state) mountpointProp(d *dataset) (string, source, string) {
	raw, src, from := st.resolve(d, "mountpoint", true)
	if src == srcDefault {
		raw = "/"
	}
	if !strings.HasPrefix(raw, "/") {
		return raw, src, from // none, legacy
	}
	rel := ""
	switch src {
	case srcDefault:
		rel = d.Name
	case srcInherited:
		rel = strings.TrimPrefix(d.Name[len(from):], "/")
	}
	root := st.MountRoot
	if root == "/" {
		root = ""
	}
	if raw == "/" && (root != "" || rel != "") {
		raw = ""
	}
	if rel == "" {
		return root + raw, src, from
	}
	return root + raw + "/" + rel, src, from
}

// mountpoint is where filesystem d is (or would be) mounted; "" when it has
// no mountpoint (none, legacy).
func (st *state) mountpoint(d *dataset) string {
	mp, _, _ := st.mountpointProp(d)
	if !strings.HasPrefix(mp, "/") {
		return ""
	}
	return path.Clean(mp)
}

// canmount is the canmount property of d: on, off or noauto.
func (st *state) canmount(d *dataset) string {
	if cm, ok := d.Props["canmount"]; ok {
		return cm
	}
	return "on"
}

// canMount reports whether zfs mount would mount d when asked: canmount
// not off and a path mountpoint.
func (st *state) canMount(d *dataset) bool {
	return !d.Snap && st.canmount(d) != "off" && st.mountpoint(d) != ""
}

// propValue computes property name of d; literal is -p.
func (s *sess) propValue(d *dataset, p *propDef, literal bool) pval {
	if p == nameProp {
		return pval{ok: true, val: d.Name}
	}
	if !p.appliesTo(d) {
		return pval{}
	}
	number := func(n uint64, nice func(uint64) string) pval {
		v := pval{ok: true, num: n, isNum: true, val: strconv.FormatUint(n, 10)}
		if !literal {
			v.val = nice(n)
		}
		return v
	}
	sp := func() *spaceInfo { return s.space(d) } // walks the files: only when asked
	switch p.name {
	case "type":
		if d.Snap {
			return pval{ok: true, val: "snapshot"}
		}
		return pval{ok: true, val: "filesystem"}
	case "creation":
		return number(uint64(d.Creation), func(n uint64) string { return zfsDate(int64(n), "%k") })
	case "used":
		return number(sp().used, niceBytes)
	case "available":
		return number(sp().avail, niceBytes)
	case "referenced":
		return number(sp().refer, niceBytes)
	case "usedbysnapshots":
		return number(sp().usedSnap, niceBytes)
	case "usedbydataset":
		return number(sp().usedDS, niceBytes)
	case "usedbychildren":
		return number(sp().usedChild, niceBytes)
	case "usedbyrefreservation":
		return number(sp().usedRefreserv, niceBytes)
	case "written":
		return number(sp().written, niceNum)
	case "logicalused":
		return number(sp().lused, niceNum)
	case "logicalreferenced":
		return number(sp().lrefer, niceNum)
	case "compressratio", "refcompressratio":
		v := pval{ok: true, num: 100, isNum: true, val: "1.00"}
		if !literal {
			v.val += "x"
		}
		return v
	case "guid":
		return pval{ok: true, num: d.GUID, isNum: true, val: strconv.FormatUint(d.GUID, 10)}
	case "createtxg":
		return pval{ok: true, num: d.CreateTxg, isNum: true, val: strconv.FormatUint(d.CreateTxg, 10)}
	case "objsetid":
		return pval{ok: true, num: d.ObjsetID, isNum: true, val: strconv.FormatUint(d.ObjsetID, 10)}
	case "userrefs":
		return number(uint64(len(d.Holds)), niceNum)
	case "filesystem_count", "snapshot_count":
		v := number(1<<64-1, niceNum)
		v.src = srcDefault
		return v
	case "mounted":
		if d.Mounted {
			return pval{ok: true, val: "yes"}
		}
		return pval{ok: true, val: "no"}
	case "defer_destroy":
		return pval{ok: true, val: "off"}
	case "version":
		return pval{ok: true, num: 5, isNum: true, val: "5"}
	case "origin":
		if d.Origin == "" {
			return pval{}
		}
		return pval{ok: true, val: d.Origin}
	case "clones":
		var names []string
		for _, c := range s.st.clones(d.Name) {
			names = append(names, c.Name)
		}
		if len(names) == 0 {
			return pval{}
		}
		return pval{ok: true, val: strings.Join(names, ",")}
	case "receive_resume_token":
		if tok := s.st.resumeToken(d); tok != "" {
			return pval{ok: true, val: tok}
		}
		return pval{}
	case "mountpoint":
		mp, src, from := s.st.mountpointProp(d)
		return pval{ok: true, val: mp, src: src, from: from}
	}

	raw, src, from := s.st.resolve(d, p.name, p.inheritable())
	if src == srcDefault {
		raw = p.def
	}
	if p.noSource {
		src = srcNone
	}
	if p.kind != kNumber {
		return pval{ok: true, val: raw, src: src, from: from}
	}
	n, _ := strconv.ParseUint(raw, 10, 64)
	var v pval
	switch p.name {
	case "quota", "refquota", "reservation", "refreservation":
		v = number(n, niceBytes)
		if n == 0 {
			v.val = "0"
			if !literal {
				v.val = "none"
			}
		}
	case "filesystem_limit", "snapshot_limit":
		v = number(n, niceNum)
		if n == 1<<64-1 && !literal {
			v.val = "none"
		}
	default:
		v = number(n, niceNum)
	}
	v.src, v.from = src, from
	return v
}

// userValue is a user property, inherited like any other.
func (s *sess) userValue(d *dataset, name string) pval {
	raw, src, from := s.st.resolve(d, name, true)
	if src == srcDefault {
		return pval{}
	}
	return pval{ok: true, val: raw, src: src, from: from}
}

// niceNum is zfs_nicenum: 1024-based, no unit for plain numbers.
func niceNum(n uint64) string { return nicenum(n, false) }

// niceBytes is zfs_nicebytes: like niceNum but "B" for bytes ("0B", "512B").
func niceBytes(n uint64) string { return nicenum(n, true) }

func nicenum(num uint64, bytes bool) string {
	units := []string{"", "K", "M", "G", "T", "P", "E"}
	if bytes {
		units[0] = "B"
	}
	n, index := num, 0
	for n >= 1024 && index < 6 {
		n /= 1024
		index++
	}
	u := units[index]
	div := uint64(1) << (10 * index)
	if index == 0 || num%div == 0 {
		return fmt.Sprintf("%d%s", n, u)
	}
	var s string
	for i := 2; i >= 0; i-- {
		s = fmt.Sprintf("%.*f%s", i, float64(num)/float64(div), u)
		if len(s) <= 5 {
			break
		}
	}
	return s
}

// zfsDate is strftime "%a %b %e %k:%M %Y" (creation) or with %H (holds), in
// local time like the real commands.
func zfsDate(unix int64, hour string) string {
	t := time.Unix(unix, 0)
	h := fmt.Sprintf("%2d", t.Hour())
	if hour == "%H" {
		h = fmt.Sprintf("%02d", t.Hour())
	}
	return fmt.Sprintf("%s %s %2d %s:%02d %d", t.Weekday().String()[:3], t.Month().String()[:3], t.Day(), h, t.Minute(), t.Year())
}
