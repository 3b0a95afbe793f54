package zfstest

import (
	"fmt"
	"strconv"
	"strings"
)

// poolProps are zpool's properties in "zpool get all" order
// (zpool-get.stdout); the feature@ ones follow, fixed.
var poolProps = []*propDef{
	num("size", "SIZE", aReadonly, true, false, ""),
	num("capacity", "CAP", aReadonly, true, false, ""),
	str("altroot", "ALTROOT", aDefault, true, false, "-"),
	num("health", "HEALTH", aReadonly, true, false, ""),
	num("guid", "GUID", aReadonly, true, false, ""),
	num("version", "VERSION", aDefault, true, false, "-"),
	str("bootfs", "BOOTFS", aDefault, true, false, "-"),
	ix("delegation", "DELEGATION", aDefault, true, false, "on", "on | off"),
	ix("autoreplace", "REPLACE", aDefault, true, false, "off", "on | off"),
	str("cachefile", "CACHEFILE", aDefault, true, false, "-"),
	ix("failmode", "FAILMODE", aDefault, true, false, "wait", "wait | continue | panic"),
	ix("listsnapshots", "LISTSNAPS", aDefault, true, false, "off", "on | off"),
	ix("autoexpand", "EXPAND", aDefault, true, false, "off", "on | off"),
	num("dedupratio", "DEDUP", aReadonly, true, false, ""),
	num("free", "FREE", aReadonly, true, false, ""),
	num("allocated", "ALLOC", aReadonly, true, false, ""),
	{name: "readonly", col: "RO", kind: kIndex, attr: aReadonly, fs: true, def: "off", index: onOff},
	num("ashift", "ASHIFT", aDefault, true, false, "0"),
	str("comment", "COMMENT", aDefault, true, false, "-"),
	num("expandsize", "EXPANDSZ", aReadonly, true, false, ""),
	num("freeing", "FREEING", aReadonly, true, false, ""),
	num("fragmentation", "FRAG", aReadonly, true, false, ""),
	num("leaked", "LEAKED", aReadonly, true, false, ""),
	ix("multihost", "MULTIHOST", aDefault, true, false, "off", "on | off"),
	num("checkpoint", "CKPOINT", aReadonly, true, false, ""),
	num("load_guid", "LOAD_GUID", aReadonly, true, false, ""),
	ix("autotrim", "AUTOTRIM", aDefault, true, false, "off", "on | off"),
	str("compatibility", "COMPATIBILITY", aDefault, true, false, "off"),
}

var poolFeatures = []string{"async_destroy", "enabled", "empty_bpobj", "active", "lz4_compress", "active",
	"multi_vdev_crash_dump", "enabled", "spacemap_histogram", "active", "enabled_txg", "active",
	"hole_birth", "active", "extensible_dataset", "active", "embedded_data", "active", "bookmarks", "enabled",
	"filesystem_limits", "enabled", "large_blocks", "enabled", "large_dnode", "enabled", "sha512", "enabled",
	"skein", "enabled", "edonr", "enabled", "userobj_accounting", "active", "encryption", "enabled",
	"project_quota", "active", "device_removal", "enabled", "obsolete_counts", "enabled",
	"zpool_checkpoint", "enabled", "spacemap_v2", "active", "allocation_classes", "enabled",
	"resilver_defer", "enabled", "bookmark_v2", "enabled", "redaction_bookmarks", "enabled",
	"redacted_datasets", "enabled", "bookmark_written", "enabled", "log_spacemap", "active",
	"livelist", "active", "device_rebuild", "enabled", "zstd_compress", "enabled", "draid", "enabled"}

func lookupPoolProp(name string) *propDef {
	if name == "name" {
		return nameProp
	}
	for _, p := range poolProps {
		if p.name == name || strings.ToLower(p.col) == name {
			return p
		}
	}
	return nil
}

// poolValue is zpool_get_prop.
func (s *sess) poolValue(p *pool, d *propDef, literal bool) pval {
	alloc, free := s.poolUsage(p)
	pct := func(n uint64) pval {
		v := pval{ok: true, num: n, isNum: true, val: strconv.FormatUint(n, 10)}
		if !literal {
			v.val += "%"
		}
		return v
	}
	nice := func(n uint64) pval {
		v := pval{ok: true, num: n, isNum: true, val: strconv.FormatUint(n, 10)}
		if !literal {
			v.val = niceNum(n)
		}
		return v
	}
	switch d.name {
	case "name":
		return pval{ok: true, val: p.Name}
	case "size":
		return nice(p.Size)
	case "allocated":
		return nice(alloc)
	case "free":
		return nice(free)
	case "freeing", "leaked":
		return nice(0)
	case "capacity":
		return pct(alloc * 100 / max(p.Size, 1))
	case "fragmentation":
		return pct(0)
	case "health":
		return pval{ok: true, val: p.Health}
	case "guid":
		return pval{ok: true, val: strconv.FormatUint(p.GUID, 10)}
	case "load_guid":
		return pval{ok: true, val: strconv.FormatUint(p.GUID^0x5bd1e995, 10)}
	case "dedupratio":
		if literal {
			return pval{ok: true, val: "1.00"}
		}
		return pval{ok: true, val: "1.00x"}
	case "expandsize", "checkpoint":
		return pval{ok: true, val: "-"}
	case "altroot":
		return pval{ok: true, val: s.st.MountRoot, src: srcLocal}
	}
	if f, ok := strings.CutPrefix(d.name, "feature@"); ok {
		for i := 0; i < len(poolFeatures); i += 2 {
			if poolFeatures[i] == f {
				return pval{ok: true, val: poolFeatures[i+1], src: srcLocal}
			}
		}
		return pval{ok: true, val: "-"}
	}
	if d.attr == aDefault {
		return pval{ok: true, val: d.def, src: srcDefault}
	}
	return pval{ok: true, val: d.def}
}

var zpoolUsage = map[string]string{
	"list": "\tlist [-gHLpPv] [-o property[,...]] [-T d|u] [pool] ... \n\t    [interval [count]]\n",
	"get":  "\tget [-Hp] [-o \"all\" | field[,...]] <\"all\" | property[,...]> <pool> ...\n",
}

func (s *sess) zpoolUsageErr(cmd, msg string) int {
	s.errf("%susage:\n%s", msg, zpoolUsage[cmd])
	return 2
}

func (s *sess) zpool(args []string) int {
	if len(args) == 0 {
		s.errf("usage: zpool command args ...\nwhere 'command' is one of the following:\n\n%s%s", zpoolUsage["list"], zpoolUsage["get"])
		return 2
	}
	switch args[0] {
	case "list":
		return s.zpoolList(args[1:])
	case "get":
		return s.zpoolGet(args[1:])
	}
	s.errf("unrecognized command '%s'\nusage: zpool command args ...\n", args[0])
	return 2
}

// pools opens the named pools (all if none), printing the missing ones.
func (s *sess) pools(names []string) ([]*pool, int) {
	if len(names) == 0 {
		names = s.poolNames()
	}
	rc := 0
	var out []*pool
	for _, n := range names {
		if p := s.st.Pools[n]; p != nil {
			out = append(out, p)
			continue
		}
		s.errf("cannot open '%s': no such pool\n", n)
		rc = 1
	}
	return out, rc
}

func parsePoolProps(fields string) ([]*propDef, bool, string) {
	var out []*propDef
	all := false
	for _, f := range strings.Split(fields, ",") {
		p := lookupPoolProp(f)
		switch {
		case f == "all":
			all = true
		case p == nil && !strings.HasPrefix(f, "feature@"):
			return nil, false, fmt.Sprintf("bad property list: invalid property '%s'\n", f)
		case p != nil:
			out = append(out, p)
		default:
			out = append(out, &propDef{name: f, col: strings.ToUpper(f), kind: kString, attr: aDefault})
		}
	}
	return out, all, ""
}

func (s *sess) zpoolList(args []string) int {
	opts, operands, msg := getopt(args, "Hpo:")
	if msg != "" {
		return s.zpoolUsageErr("list", msg)
	}
	scripted, literal := false, false
	fields := "name,size,allocated,free,checkpoint,expandsize,fragmentation,capacity,dedupratio,health,altroot"
	for _, o := range opts {
		switch o.c {
		case 'H':
			scripted = true
		case 'p':
			literal = true
		case 'o':
			fields = o.arg
		}
	}
	for _, op := range operands {
		if _, err := strconv.ParseFloat(op, 64); err == nil {
			return s.zpoolUsageErr("list", "zfstest: interval and count are not emulated\n")
		}
	}
	defs, _, msg := parsePoolProps(fields)
	if msg != "" {
		return s.zpoolUsageErr("list", msg)
	}
	pools, rc := s.pools(operands)
	if len(operands) == 0 && len(pools) == 0 {
		s.outf("no pools available\n")
		return rc
	}
	cols := make([]column, len(defs))
	widths := make([]int, len(defs))
	table := make([][]string, len(pools))
	for i, d := range defs {
		cols[i] = column{p: d}
		fixed := false
		widths[i], fixed = d.width()
		for j, p := range pools {
			if table[j] == nil {
				table[j] = make([]string, len(defs))
			}
			v := s.poolValue(p, d, literal)
			table[j][i] = v.val
			if !fixed || literal {
				widths[i] = max(widths[i], len(v.val))
			}
		}
	}
	if !scripted && len(pools) > 0 {
		header := make([]string, len(defs))
		for i, d := range defs {
			header[i] = d.col
		}
		s.printRow(header, cols, widths, false)
	}
	for _, r := range table {
		s.printRow(r, cols, widths, scripted)
	}
	return rc
}

func (s *sess) zpoolGet(args []string) int {
	opts, operands, msg := getopt(args, "Hpo:")
	if msg != "" {
		return s.zpoolUsageErr("get", msg)
	}
	scripted, literal := false, false
	fields := []string{"name", "property", "value", "source"}
	for _, o := range opts {
		switch o.c {
		case 'H':
			scripted = true
		case 'p':
			literal = true
		case 'o':
			fields = strings.Split(o.arg, ",")
			if o.arg == "all" {
				fields = getFields
			}
		}
	}
	if len(operands) == 0 {
		return s.zpoolUsageErr("get", "missing property argument\n")
	}
	defs, all, msg := parsePoolProps(operands[0])
	if msg != "" {
		return s.zpoolUsageErr("get", msg)
	}
	if all {
		defs = append(poolProps, defs...)
	}
	pools, rc := s.pools(operands[1:])
	width := map[string]int{"name": 4, "property": 8, "value": 5, "received": 8, "source": 6}
	type row struct {
		name, prop string
		v          pval
	}
	var rows []row
	for _, p := range pools {
		width["name"] = max(width["name"], len(p.Name))
		for _, d := range defs {
			rows = append(rows, row{p.Name, d.name, s.poolValue(p, d, literal)})
		}
		if all {
			for i := 0; i < len(poolFeatures); i += 2 {
				rows = append(rows, row{p.Name, "feature@" + poolFeatures[i], pval{ok: true, val: poolFeatures[i+1], src: srcLocal}})
			}
		}
	}
	for _, r := range rows {
		width["property"] = max(width["property"], len(r.prop))
		width["value"] = max(width["value"], len(r.v.val))
	}
	width["source"] = width["name"] + len("inherited from")
	if !scripted && len(rows) > 0 {
		s.getRow(fields, map[string]string{"name": "NAME", "property": "PROPERTY", "value": "VALUE", "received": "RECEIVED", "source": "SOURCE"}, width, false)
	}
	for _, r := range rows {
		s.getRow(fields, map[string]string{"name": r.name, "property": r.prop, "value": r.v.val, "received": "-", "source": r.v.sourceText()}, width, scripted)
	}
	return rc
}
