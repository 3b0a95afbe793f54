package zfstest

import (
	"fmt"
	"math"
	"path"
	"strconv"
	"strings"
)

// Dataset types, as zfs_type_t bits.
const (
	tFS = 1 << iota
	tSnap
	tVol
	tBookmark
)

// validateName is zfs_validate_name: "" if path is a valid name of one of
// types, else the message libzfs adds after "cannot <verb> '<path>': ".
// Like real ZFS it accepts spaces and a leading '-' in components
// (err-bad-name, err-dash-name).
func validateName(p string, types int, modifying bool) string {
	switch {
	case types&tSnap == 0 && strings.Contains(p, "@"):
		return "snapshot delimiter '@' is not expected here"
	case types == tSnap && !strings.Contains(p, "@"):
		return "missing '@' delimiter in snapshot name"
	case types&tBookmark == 0 && strings.Contains(p, "#"):
		return "bookmark delimiter '#' is not expected here"
	case modifying && strings.Contains(p, "%"):
		return "invalid character % in name"
	}
	return entityCheck(p)
}

// entityCheck is entity_namecheck from zfs_namecheck.c.
func entityCheck(p string) string {
	switch {
	case len(p) >= 256:
		return "name is too long"
	case strings.HasPrefix(p, "/"):
		return "leading slash in name"
	case p == "":
		return "empty component or misplaced '@' or '#' delimiter in name"
	}
	start, delim := 0, false
	for {
		end := start
		for end < len(p) && !strings.ContainsRune("/@#", rune(p[end])) {
			end++
		}
		if end == len(p) && p[end-1] == '/' {
			return "trailing slash in name"
		}
		for _, c := range p[start:end] {
			if !(c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c >= '0' && c <= '9' || strings.ContainsRune("-_.: %", c)) {
				return fmt.Sprintf("invalid character '%c' in name", c)
			}
		}
		if end == len(p) || p[end] == '/' {
			switch p[start:end] {
			case ".":
				return "self reference, '.' is found in name"
			case "..":
				return "parent reference, '..' is found in name"
			}
		}
		if end < len(p) && (p[end] == '@' || p[end] == '#') {
			if delim {
				return "multiple '@' and/or '#' delimiters in name"
			}
			delim = true
		}
		if start == end {
			return "empty component or misplaced '@' or '#' delimiter in name"
		}
		if end == len(p) {
			return ""
		}
		if p[end] == '/' && delim {
			return "trailing slash in name"
		}
		start = end + 1
	}
}

// parseProp is zfs_valid_proplist for one name=value on d (a snapshot if
// snap): the canonical value to store, or the message after "cannot create
// 'x': ". creating allows the set-once properties.
func (st *state) parseProp(name, value string, creating, snap bool) (string, string) {
	p := propByName[name]
	if p == nil || p == nameProp {
		if !isUserProp(name) {
			return "", fmt.Sprintf("invalid property '%s'", name)
		}
		if len(name) >= 256 {
			return "", fmt.Sprintf("property name '%s' is too long", name)
		}
		if len(value) >= 8192 {
			return "", fmt.Sprintf("property value '%s' is too long", value)
		}
		return value, ""
	}
	if snap && !p.snap || !snap && !p.fs {
		return "", fmt.Sprintf("'%s' does not apply to datasets of this type", name)
	}
	if p.attr == aReadonly || p.attr == aOnetime && !creating {
		return "", fmt.Sprintf("'%s' is readonly", name)
	}
	switch p.kind {
	case kIndex:
		for _, v := range p.index {
			if v == value {
				if name == "encryption" && value != "off" {
					return "", "encryption is not emulated by zfstest"
				}
				if name == "compression" && value == "gzip-6" {
					value = "gzip" // same zio_compress value, printed by its first name
				}
				return value, ""
			}
		}
		return "", fmt.Sprintf("'%s' must be one of '%s'", name, p.values)
	case kNumber:
		var n uint64
		if value == "none" {
			if name == "filesystem_limit" || name == "snapshot_limit" {
				n = math.MaxUint64
			}
		} else {
			var msg string
			if n, msg = nicestrtonum(value); msg != "" {
				return "", msg
			}
		}
		if name == "recordsize" && (n < 512 || n > 16<<20 || n&(n-1) != 0) {
			return "", "'recordsize' must be power of 2 from 512B to 16M"
		}
		return strconv.FormatUint(n, 10), ""
	}
	if name == "mountpoint" {
		if value == "none" || value == "legacy" {
			return value, ""
		}
		if !strings.HasPrefix(value, "/") {
			return "", "'mountpoint' must be an absolute path, 'none', or 'legacy'"
		}
		// MountRoot is the altroot: a path already below it is taken as
		// meant (a convenience real ZFS does not offer).
		v := path.Clean(value)
		if rel, ok := strings.CutPrefix(v, st.MountRoot); ok && st.MountRoot != "/" && (rel == "" || rel[0] == '/') {
			v = "/" + strings.TrimPrefix(rel, "/")
		}
		return v, ""
	}
	return value, ""
}

// nicestrtonum is libzfs's zfs_nicestrtonum: "64M", "1.5G", "12KiB".
func nicestrtonum(v string) (uint64, string) {
	if v == "" || (v[0] < '0' || v[0] > '9') && v[0] != '.' {
		return 0, fmt.Sprintf("bad numeric value '%s'", v)
	}
	i := 0
	for i < len(v) && v[i] >= '0' && v[i] <= '9' {
		i++
	}
	if i < len(v) && v[i] == '.' {
		j := i + 1
		for j < len(v) && v[j] >= '0' && v[j] <= '9' {
			j++
		}
		f, _ := strconv.ParseFloat(v[:j], 64)
		shift, msg := str2shift(v[j:])
		if msg != "" {
			return 0, msg
		}
		f *= math.Pow(2, float64(shift))
		if f >= math.MaxUint64 {
			return 0, "numeric value is too large"
		}
		return uint64(f), ""
	}
	n, err := strconv.ParseUint(v[:i], 10, 64)
	if err != nil {
		return 0, "numeric value is too large"
	}
	shift, msg := str2shift(v[i:])
	if msg != "" {
		return 0, msg
	}
	if shift >= 64 || (n<<shift)>>shift != n {
		return 0, "numeric value is too large"
	}
	return n << shift, ""
}

func str2shift(buf string) (uint, string) {
	if buf == "" {
		return 0, ""
	}
	up := strings.ToUpper(buf)
	i := strings.IndexByte("BKMGTPEZ", up[0])
	if i < 0 || !(len(up) == 1 || up[0] != 'B' && (up[1:] == "B" || up[1:] == "IB")) {
		return 0, fmt.Sprintf("invalid numeric suffix '%s'", buf)
	}
	return uint(10 * i), ""
}

// localNum is a numeric property set on d itself (quotas, reservations).
func (st *state) localNum(d *dataset, name string) uint64 {
	n, _ := strconv.ParseUint(d.Props[name], 10, 64)
	return n
}
