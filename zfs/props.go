package zfs

import (
	"fmt"
	"math"
	"regexp"
	"strconv"
	"strings"
)

// ValidateProperty checks a property a caller wants set at create time, the
// way `zfs create -o` would, so a bad value is refused at configuration time,
// not later from a zfs process. The error says what is wrong; the caller
// names the key and value in its own terms. User properties
// (names with ':') take any single-line value. Properties the caller must not
// choose are refused by the caller, not here.
func ValidateProperty(name, value string) error {
	if err := ValidatePropertyName(name); err != nil {
		return err
	}
	if err := validatePropertyValue(name, value); err != nil {
		return err
	}
	if strings.Contains(name, ":") {
		// zfs_prop_user: only these characters, or zfs reads it as a native
		// name and refuses it as an invalid property.
		for i := 0; i < len(name); i++ {
			if c := name[i]; !('a' <= c && c <= 'z' || isDigit(c) || strings.IndexByte("-_.:", c) >= 0) {
				return fmt.Errorf("invalid user property name: only lower-case letters, digits, '-', '_', '.' and ':' (zfs refuses %q)", string(c))
			}
		}
		return nil
	}
	check, ok := nativeProps[name]
	if !ok {
		return fmt.Errorf("invalid property: not a ZFS filesystem property that can be set at creation")
	}
	return check(value)
}

// nativeProps are the settable filesystem properties of OpenZFS 2.1 with
// their value checks. Creation-only ones (encryption, casesensitivity, ...)
// are included: the plugin creates every dataset it uses.
var nativeProps = map[string]func(string) error{
	"quota":                quota,
	"refquota":             quota,
	"reservation":          sizeOrNone,
	"refreservation":       sizeOrNone,
	"recordsize":           recordsize,
	"special_small_blocks": specialSmallBlocks,
	"compression": matches(`on|off|lzjb|gzip|gzip-[1-9]|zle|lz4|zstd|zstd-([1-9]|1[0-9])|zstd-fast|zstd-fast-([1-9]|10|20|30|40|50|60|70|80|90|100|500|1000)`,
		"on, off, lzjb, gzip, gzip-1 to gzip-9, zle, lz4, zstd, zstd-1 to zstd-19, zstd-fast, zstd-fast-1 to -10, -20 to -100 by 10, -500, -1000"),
	"checksum": oneOf("on", "off", "fletcher2", "fletcher4", "sha256", "noparity", "sha512", "skein", "edonr"),
	"dedup": matches(`on|off|verify|sha256(,verify)?|sha512(,verify)?|skein(,verify)?|edonr,verify`,
		"on, off, verify, sha256[,verify], sha512[,verify], skein[,verify], edonr,verify"),
	"copies":             oneOf("1", "2", "3"),
	"atime":              onOff,
	"relatime":           onOff,
	"exec":               onOff,
	"setuid":             onOff,
	"devices":            onOff,
	"readonly":           onOff,
	"overlay":            onOff,
	"utf8only":           onOff,
	"vscan":              onOff,
	"nbmand":             onOff,
	"xattr":              oneOf("on", "off", "sa", "dir"),
	"sync":               oneOf("standard", "always", "disabled"),
	"logbias":            oneOf("latency", "throughput"),
	"primarycache":       oneOf("all", "none", "metadata"),
	"secondarycache":     oneOf("all", "none", "metadata"),
	"snapdir":            oneOf("hidden", "visible"),
	"acltype":            oneOf("off", "noacl", "nfsv4", "posix", "posixacl"),
	"aclinherit":         oneOf("discard", "noallow", "restricted", "passthrough", "passthrough-x"),
	"aclmode":            oneOf("discard", "groupmask", "passthrough", "restricted"),
	"dnodesize":          oneOf("legacy", "auto", "1k", "2k", "4k", "8k", "16k"),
	"redundant_metadata": oneOf("all", "most", "some", "none"), // some, none: since 2.1.7
	"casesensitivity":    oneOf("sensitive", "insensitive", "mixed"),
	"normalization":      oneOf("none", "formC", "formD", "formKC", "formKD"),
	"encryption":         oneOf("off", "on", "aes-128-ccm", "aes-192-ccm", "aes-256-ccm", "aes-128-gcm", "aes-192-gcm", "aes-256-gcm"),
	"keyformat":          oneOf("raw", "hex", "passphrase"),
	"keylocation":        matches(`prompt|file:///.+|https?://.+`, "prompt, file:///<path>, https://<url>"),
	"pbkdf2iters":        pbkdf2iters,
	"sharenfs":           anyValue,
	"sharesmb":           anyValue,
	"context":            anyValue,
	"fscontext":          anyValue,
	"defcontext":         anyValue,
	"rootcontext":        anyValue,
}

func anyValue(string) error { return nil }

func onOff(v string) error { return oneOf("on", "off")(v) }

func oneOf(allowed ...string) func(string) error {
	return func(v string) error {
		for _, a := range allowed {
			if v == a {
				return nil
			}
		}
		return fmt.Errorf("must be one of %s", strings.Join(allowed, ", "))
	}
}

// matches accepts values matching pattern; the error lists allowed, in words.
func matches(pattern, allowed string) func(string) error {
	re := regexp.MustCompile(`^(` + pattern + `)$`)
	return func(v string) error {
		if !re.MatchString(v) {
			return fmt.Errorf("must be one of %s", allowed)
		}
		return nil
	}
}

// pbkdf2iters: zfs refuses fewer than MIN_PBKDF2_ITERATIONS (100000).
func pbkdf2iters(v string) error {
	n, err := strconv.ParseUint(v, 10, 64)
	if err != nil || n < 100000 {
		return fmt.Errorf("must be an integer of at least 100000")
	}
	return nil
}

// minQuota: zfs refuses, at creation, a quota below what the new file
// system already uses (tens to hundreds of KiB, by ashift: "size is less
// than current used or reserved space"). 1M is above that on every pool
// and below any useful quota.
const minQuota = 1 << 20

func quota(v string) error {
	if v == "none" {
		return nil
	}
	n, err := ParseSize(v)
	switch {
	case err != nil:
		return err
	case n == 0:
		return fmt.Errorf("write none for no quota")
	case n < minQuota:
		return fmt.Errorf("below 1M, less than an empty file system uses")
	}
	return nil
}

// specialSmallBlocks: 0, or a power of 2 from 512 to 1M. 2.1.11 takes up to
// the pool's largest block (1M, as recordsize; checked in the e2e VM).
func specialSmallBlocks(v string) error {
	n, err := ParseSize(v)
	if err != nil {
		return err
	}
	if n != 0 && (n < 512 || n > 1<<20 || n&(n-1) != 0) {
		return fmt.Errorf("must be 0 or a power of 2 from 512 to 1M")
	}
	return nil
}

// ValidateProperties checks what no single value shows: pairs zfs refuses
// together. Each property must have passed ValidateProperty.
func ValidateProperties(props map[string]string) error {
	if n, ok := props["normalization"]; ok && n != "none" && props["utf8only"] == "off" {
		return fmt.Errorf("normalization = %q needs utf8only = \"on\" (zfs refuses it with utf8only off)", n)
	}
	if it, ok := props["pbkdf2iters"]; ok && props["keyformat"] != "passphrase" {
		return fmt.Errorf("pbkdf2iters = %q is only for keyformat = \"passphrase\"", it)
	}
	if kf, ok := props["keyformat"]; ok && props["encryption"] == "off" {
		return fmt.Errorf("keyformat = %q with encryption = \"off\"", kf)
	}
	if props["keylocation"] == "prompt" {
		return fmt.Errorf("keylocation = \"prompt\": the plugin creates slots with no terminal to type a key at; use file:///<path>")
	}
	return nil
}

func size(v string) error {
	_, err := ParseSize(v)
	return err
}

func sizeOrNone(v string) error {
	if v == "none" {
		return nil
	}
	return size(v)
}

func recordsize(v string) error {
	n, err := ParseSize(v)
	if err != nil {
		return err
	}
	// OpenZFS 2.1 accepts up to 16M only when the zfs_max_recordsize module
	// parameter is raised; by default it refuses anything over 1M, with a
	// misleading message. Refuse it here, clearly.
	if n < 512 || n > 1<<20 || n&(n-1) != 0 {
		return fmt.Errorf("must be a power of 2 from 512 to 1M")
	}
	return nil
}

// ParseSize reads a size as OpenZFS 2.1's zfs_nicestrtonum does, so that a
// size accepted here is one `zfs create -o` accepts: digits, an optional
// fraction ("1.5T", ".5G"), and an optional suffix B, K, M, G, T, P, E or Z,
// each but B optionally followed by "B" or "iB", all case-insensitive, with
// nothing else: no sign, no space ("2 T" is refused by zfs: invalid numeric
// suffix ' T'). Multiples are binary. zfs also reads a C exponent in a
// fraction ("1.5e3"); that is refused here, on purpose.
func ParseSize(s string) (uint64, error) {
	num, suffix := s, ""
	if i := strings.IndexFunc(s, func(r rune) bool { return (r < '0' || r > '9') && r != '.' }); i >= 0 {
		num, suffix = s[:i], s[i:]
	}
	if num == "" || num == "." || strings.Count(num, ".") > 1 {
		return 0, fmt.Errorf("%q is not a size (e.g. 512, 64K, 1G, 1.5T)", s)
	}
	shift, ok := sizeShift(suffix)
	if !ok {
		return 0, fmt.Errorf("%q is not a size: invalid suffix %q (B, K, M, G, T, P, E, Z, optionally with B or iB)", s, suffix)
	}
	if !strings.Contains(num, ".") {
		n, err := strconv.ParseUint(num, 10, 64)
		if err != nil || shift >= 64 || (n<<shift)>>shift != n {
			return 0, fmt.Errorf("%q is too large", s)
		}
		return n << shift, nil
	}
	f, err := strconv.ParseFloat(num, 64)
	if err != nil {
		return 0, fmt.Errorf("%q is not a size: %w", s, err)
	}
	bytes := f * math.Pow(2, float64(shift))
	if bytes >= math.MaxUint64 {
		return 0, fmt.Errorf("%q is too large", s)
	}
	return uint64(bytes), nil
}

// sizeShift is str2shift: "G", "GB" and "GiB" alike, but not "BB" or "BiB".
func sizeShift(suffix string) (uint, bool) {
	if suffix == "" {
		return 0, true
	}
	i := strings.IndexByte("BKMGTPEZ", upper(suffix[0]))
	if i < 0 {
		return 0, false
	}
	rest := strings.ToUpper(suffix[1:])
	if rest == "" || i > 0 && (rest == "B" || rest == "IB") {
		return uint(10 * i), true
	}
	return 0, false
}

func upper(c byte) byte {
	if 'a' <= c && c <= 'z' {
		return c - 'a' + 'A'
	}
	return c
}
