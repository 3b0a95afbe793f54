package zfstest

import (
	"fmt"
	"strings"
)

type propKind int

const (
	kNumber propKind = iota
	kString
	kIndex
)

type propAttr int

const (
	aReadonly propAttr = iota
	aInherit
	aDefault
	aOnetime
)

// propDef is one native property as OpenZFS 2.1's zfs_prop.c registers it.
type propDef struct {
	name string
	col  string // column header of zfs list
	kind propKind
	attr propAttr
	fs   bool // applies to filesystems
	snap bool // applies to snapshots
	def  string
	// values is the text of "'x' must be one of '...'" and of usage.
	values string
	// index lists every accepted value of an index property.
	index []string
	// noSource: the value shows source "-" although it is not computed
	// (set-once properties fixed at creation).
	noSource bool
}

func (p *propDef) readonly() bool    { return p.attr == aReadonly || p.attr == aOnetime }
func (p *propDef) inheritable() bool { return p.attr == aInherit }

// appliesTo is zfs_prop_valid_for_type.
func (p *propDef) appliesTo(d *dataset) bool {
	if d.Snap {
		return p.snap
	}
	return p.fs
}

const maxUint64 = "18446744073709551615"

var (
	onOff        = []string{"off", "on"}
	compressions = compressionValues()
	// compressionText is what OpenZFS 2.1.11 prints (err-bad-prop-value).
	compressionText = "on | off | lzjb | gzip | gzip-[1-9] | zle | lz4 | zstd | zstd-[1-19] | zstd-fast | zstd-fast-[1-10,20,30,40,50,60,70,80,90,100,500,1000]"
)

func compressionValues() []string {
	v := []string{"on", "off", "lzjb", "gzip"}
	for i := 1; i <= 9; i++ {
		v = append(v, fmt.Sprintf("gzip-%d", i))
	}
	v = append(v, "zle", "lz4", "zstd", "zstd-fast")
	for i := 1; i <= 19; i++ {
		v = append(v, fmt.Sprintf("zstd-%d", i))
	}
	for _, l := range []int{1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 20, 30, 40, 50, 60, 70, 80, 90, 100, 500, 1000} {
		v = append(v, fmt.Sprintf("zstd-fast-%d", l))
	}
	return v
}

func idx(values string) []string { return strings.Split(values, " | ") }

func num(name, col string, attr propAttr, fs, snap bool, def string) *propDef {
	return &propDef{name: name, col: col, kind: kNumber, attr: attr, fs: fs, snap: snap, def: def}
}

func str(name, col string, attr propAttr, fs, snap bool, def string) *propDef {
	return &propDef{name: name, col: col, kind: kString, attr: attr, fs: fs, snap: snap, def: def}
}

func ix(name, col string, attr propAttr, fs, snap bool, def, values string) *propDef {
	return &propDef{name: name, col: col, kind: kIndex, attr: attr, fs: fs, snap: snap, def: def, values: values, index: idx(values)}
}

func onoff(name, col string, fs, snap bool, def string) *propDef {
	return &propDef{name: name, col: col, kind: kIndex, attr: aInherit, fs: fs, snap: snap, def: def, values: "on | off", index: onOff}
}

// props lists the visible native properties in zfs_prop_t order, which is
// the order of "zfs get all" (get-all-slot1.stdout).
var props = []*propDef{
	str("type", "TYPE", aReadonly, true, true, ""),
	num("creation", "CREATION", aReadonly, true, true, ""),
	num("used", "USED", aReadonly, true, true, ""),
	num("available", "AVAIL", aReadonly, true, false, ""),
	num("referenced", "REFER", aReadonly, true, true, ""),
	num("compressratio", "RATIO", aReadonly, true, true, ""),
	{name: "mounted", col: "MOUNTED", kind: kIndex, attr: aReadonly, fs: true, index: onOff},
	str("origin", "ORIGIN", aReadonly, true, false, ""),
	num("quota", "QUOTA", aDefault, true, false, "0"),
	num("reservation", "RESERV", aDefault, true, false, "0"),
	num("recordsize", "RECSIZE", aInherit, true, false, "131072"),
	str("mountpoint", "MOUNTPOINT", aInherit, true, false, ""),
	str("sharenfs", "SHARENFS", aInherit, true, false, "off"),
	ix("checksum", "CHECKSUM", aInherit, true, false, "on", "on | off | fletcher2 | fletcher4 | sha256 | sha512 | skein | edonr"),
	{name: "compression", col: "COMPRESS", kind: kIndex, attr: aInherit, fs: true, def: "off", values: compressionText, index: compressions},
	onoff("atime", "ATIME", true, false, "on"),
	onoff("devices", "DEVICES", true, true, "on"),
	onoff("exec", "EXEC", true, true, "on"),
	onoff("setuid", "SETUID", true, true, "on"),
	onoff("readonly", "RDONLY", true, false, "off"),
	onoff("zoned", "ZONED", true, false, "off"),
	ix("snapdir", "SNAPDIR", aInherit, true, false, "hidden", "hidden | visible"),
	ix("aclmode", "ACLMODE", aInherit, true, false, "discard", "discard | groupmask | passthrough | restricted"),
	ix("aclinherit", "ACLINHERIT", aInherit, true, false, "restricted", "discard | noallow | restricted | passthrough | passthrough-x"),
	num("createtxg", "CREATETXG", aReadonly, true, true, ""),
	ix("canmount", "CANMOUNT", aDefault, true, false, "on", "on | off | noauto"),
	ix("xattr", "XATTR", aInherit, true, true, "on", "on | off | dir | sa"),
	ix("copies", "COPIES", aInherit, true, false, "1", "1 | 2 | 3"),
	{name: "version", col: "VERSION", kind: kIndex, attr: aReadonly, fs: true, snap: true, def: "5", index: idx("1 | 2 | 3 | 4 | 5 | current")},
	{name: "utf8only", col: "UTF8ONLY", kind: kIndex, attr: aOnetime, fs: true, snap: true, def: "off", index: onOff, noSource: true},
	{name: "normalization", col: "NORMALIZATION", kind: kIndex, attr: aOnetime, fs: true, snap: true, def: "none", index: idx("none | formC | formD | formKC | formKD"), noSource: true},
	{name: "casesensitivity", col: "CASE", kind: kIndex, attr: aOnetime, fs: true, snap: true, def: "sensitive", index: idx("sensitive | insensitive | mixed"), noSource: true},
	onoff("vscan", "VSCAN", true, false, "off"),
	onoff("nbmand", "NBMAND", true, true, "off"),
	str("sharesmb", "SHARESMB", aInherit, true, false, "off"),
	num("refquota", "REFQUOTA", aDefault, true, false, "0"),
	num("refreservation", "REFRESERV", aDefault, true, false, "0"),
	num("guid", "GUID", aReadonly, true, true, ""),
	ix("primarycache", "PRIMARYCACHE", aInherit, true, true, "all", "all | none | metadata"),
	ix("secondarycache", "SECONDARYCACHE", aInherit, true, true, "all", "all | none | metadata"),
	num("usedbysnapshots", "USEDSNAP", aReadonly, true, false, ""),
	num("usedbydataset", "USEDDS", aReadonly, true, false, ""),
	num("usedbychildren", "USEDCHILD", aReadonly, true, false, ""),
	num("usedbyrefreservation", "USEDREFRESERV", aReadonly, true, false, ""),
	{name: "defer_destroy", col: "DEFER_DESTROY", kind: kIndex, attr: aReadonly, snap: true, index: onOff},
	num("userrefs", "USERREFS", aReadonly, false, true, ""),
	ix("logbias", "LOGBIAS", aInherit, true, false, "latency", "latency | throughput"),
	num("objsetid", "OBJSETID", aReadonly, true, true, ""),
	ix("dedup", "DEDUP", aInherit, true, false, "off", "on | off | verify | sha256[,verify] | sha512[,verify] | skein[,verify] | edonr,verify"),
	str("mlslabel", "MLSLABEL", aInherit, true, true, "none"),
	ix("sync", "SYNC", aInherit, true, false, "standard", "standard | always | disabled"),
	ix("dnodesize", "DNSIZE", aInherit, true, false, "legacy", "legacy | auto | 1k | 2k | 4k | 8k | 16k"),
	num("refcompressratio", "REFRATIO", aReadonly, true, true, ""),
	num("written", "WRITTEN", aReadonly, true, true, ""),
	str("clones", "CLONES", aReadonly, false, true, ""),
	num("logicalused", "LUSED", aReadonly, true, false, ""),
	num("logicalreferenced", "LREFER", aReadonly, true, true, ""),
	ix("volmode", "VOLMODE", aInherit, true, false, "default", "default | full | geom | dev | none"),
	num("filesystem_limit", "FSLIMIT", aDefault, true, false, maxUint64),
	num("snapshot_limit", "SSLIMIT", aDefault, true, false, maxUint64),
	num("filesystem_count", "FSCOUNT", aReadonly, true, false, maxUint64),
	num("snapshot_count", "SSCOUNT", aReadonly, true, false, maxUint64),
	ix("snapdev", "SNAPDEV", aInherit, true, false, "hidden", "hidden | visible"),
	ix("acltype", "ACLTYPE", aInherit, true, true, "off", "off | posix"),
	str("context", "CONTEXT", aDefault, true, true, "none"),
	str("fscontext", "FSCONTEXT", aDefault, true, true, "none"),
	str("defcontext", "DEFCONTEXT", aDefault, true, true, "none"),
	str("rootcontext", "ROOTCONTEXT", aDefault, true, true, "none"),
	onoff("relatime", "RELATIME", true, false, "off"),
	ix("redundant_metadata", "REDUND_MD", aInherit, true, false, "all", "all | most"),
	onoff("overlay", "OVERLAY", true, false, "on"),
	{name: "encryption", col: "ENCRYPTION", kind: kIndex, attr: aOnetime, fs: true, snap: true, def: "off",
		values: "on | off | aes-128-ccm | aes-192-ccm | aes-256-ccm | aes-128-gcm | aes-192-gcm | aes-256-gcm",
		index:  idx("on | off | aes-128-ccm | aes-192-ccm | aes-256-ccm | aes-128-gcm | aes-192-gcm | aes-256-gcm")},
	str("keylocation", "KEYLOCATION", aDefault, true, false, "none"),
	{name: "keyformat", col: "KEYFORMAT", kind: kIndex, attr: aOnetime, fs: true, def: "none", index: idx("none | raw | hex | passphrase")},
	{name: "pbkdf2iters", col: "PBKDF2ITERS", kind: kNumber, attr: aOnetime, fs: true, def: "0"},
	num("special_small_blocks", "SPECIAL_SMALL_BLOCKS", aInherit, true, false, "0"),
}

// nameProp is the hidden "name" property: valid in -o and -s, never in "all".
var nameProp = str("name", "NAME", aReadonly, true, true, "")

// resumeTokenProp is receive_resume_token: "zfs get all" shows it only
// where an interrupted resumable receive set it, so it is not in props.
var resumeTokenProp = str("receive_resume_token", "RESUMETOK", aReadonly, true, false, "")

var propByName = func() map[string]*propDef {
	m := map[string]*propDef{"name": nameProp, resumeTokenProp.name: resumeTokenProp}
	for _, p := range props {
		m[p.name] = p
	}
	return m
}()

// lookupProp is zfs_name_to_prop: a property's name, or its column name in
// lower case ("avail", "refer", "lused"), as zprop's propname_match allows.
func lookupProp(name string) *propDef {
	if p, ok := propByName[name]; ok {
		return p
	}
	for _, p := range props {
		if strings.ToLower(p.col) == name {
			return p
		}
	}
	return nil
}

// isUserProp is zfs_prop_user: lower-case alphanumerics and "-_.:", with a ':'.
func isUserProp(name string) bool {
	if !strings.Contains(name, ":") {
		return false
	}
	for _, c := range name {
		if !(c >= 'a' && c <= 'z' || c >= '0' && c <= '9' || strings.ContainsRune("-_.:", c)) {
			return false
		}
	}
	return true
}

// width is zprop_width: the initial column width, and whether the column
// is fixed (not widened by the values unless -p).
func (p *propDef) width() (int, bool) {
	w := len(p.col)
	switch p.kind {
	case kNumber:
		if w < 5 {
			w = 5
		}
		// libzfs widens ZPOOL_PROP_HEALTH to 8 without checking the type,
		// so zfs's property of the same number, referenced, is 8 wide too
		// (list-tree-human.stdout).
		if p.name == "health" || p.name == "referenced" {
			w = 8
		}
		return w, p.name != "creation"
	case kIndex:
		for _, v := range p.index {
			if len(v) > w {
				w = len(v)
			}
		}
		return w, true
	}
	return w, false
}

// alignRight is zfs_prop_align_right: numbers are right-justified.
func (p *propDef) alignRight() bool { return p.kind == kNumber }
