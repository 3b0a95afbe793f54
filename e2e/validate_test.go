//go:build e2e

package e2e

import (
	"fmt"
	"os"
	"path/filepath"
	"sort"
	"strings"
	"testing"

	"github.com/nomad-device-zfs/nomad-device-zfs/zfs"
)

// stricter are the values the plugin refuses although zfs would take them,
// each on purpose: TestConfigValuesAgreeWithZFS fails on any other case
// where the two disagree.
var stricter = map[string]string{
	"quota=0":            "zfs reads 0 as none; the plugin asks for none, so a typo for 10G is not silently no quota",
	"quota=1K":           "below 1M: at best useless, at worst (pool-dependent) less than an empty file system uses",
	"refquota=512K":      "below 1M, as quota",
	"quota=1.5e3K":       "a C exponent: zfs reads it through strtod, the plugin reads sizes only as documented",
	"keylocation=prompt": "the plugin has no terminal to type a key at",
	"encryption=on,keyformat=raw,keylocation=file://KEY,pbkdf2iters=350000": "pbkdf2iters means something only for a passphrase",
}

// zfsCase is one `zfs create` with its -o properties.
type zfsCase struct{ props [][2]string }

func (c zfsCase) String() string {
	var s []string
	for _, kv := range c.props {
		s = append(s, kv[0]+"="+kv[1])
	}
	return strings.Join(s, ",")
}

func one(k, v string) zfsCase { return zfsCase{props: [][2]string{{k, v}}} }

// validateCases: the sizes, names, values and pairs the plugin's hostile
// configuration table tries (plugin/hostile_test.go), and an accepted value
// for every property the plugin lets a class set.
func validateCases(keyFile string) []zfsCase {
	var out []zfsCase
	for _, v := range []string{"12QB", "1 G", "-1G", "+1G", "1iB", "1BB", "1BiB", "1GBB", "G", ".", "1..5G", "0x10",
		"1.5e3K", "16E", "99999999999999999999", "1,5G", "1_000", "1GiBs", "1Z", "0", "1K",
		"1G", "1g", "1GB", "1gb", "1GiB", "1gib", "1.5T", ".5G", "1.G", "1048576", "1024K", "1M", "1MB", "15E", "0.001Z"} {
		out = append(out, one("quota", v))
	}
	for _, kv := range [][2]string{
		{"refquota", "512K"}, {"recordsize", "256"}, {"recordsize", "100K"}, {"recordsize", "2M"}, {"recordsize", "16M"},
		{"special_small_blocks", "3"}, {"special_small_blocks", "2M"}, {"special_small_blocks", "256K"}, {"special_small_blocks", "1M"},
		{"bogusprop", "on"}, {"QUOTA", "1G"}, {"Compression", "on"}, {"used", "1G"}, {"available", "1G"}, {"referenced", "1G"},
		{"type", "volume"}, {"creation", "0"}, {"origin", "x"}, {"mounted", "yes"}, {"volsize", "1G"}, {"volblocksize", "8K"},
		{"guid", "1"}, {"com.Example:team", "x"}, {"com.example:Team", "x"}, {"compress ion", "on"},
		{"compression", "bogus"}, {"compression", "LZ4"}, {"compression", "gzip-10"}, {"compression", "zstd-20"},
		{"compression", "zstd-fast-11"}, {"compression", "gzip-0"}, {"atime", "ON"}, {"atime", "yes"}, {"atime", "1"},
		{"checksum", "SHA256"}, {"checksum", "md5"}, {"copies", "0"}, {"copies", "4"}, {"sync", "Always"}, {"xattr", "SA"},
		{"dedup", "edonr"}, {"dedup", "ON"}, {"casesensitivity", "Insensitive"}, {"logbias", "fast"},
		{"primarycache", "some"}, {"snapdir", "Visible"}, {"dnodesize", "32k"}, {"redundant_metadata", "some"}, {"redundant_metadata", "none"}, {"redundant_metadata", "bogus"},
		{"encryption", "aes-256-xts"}, {"keyformat", "pem"}, {"pbkdf2iters", "-1"}, {"refreservation", "auto"},
		{"keylocation", "prompt"},
		// Accepted values, one or more per settable property.
		{"refquota", "1G"}, {"reservation", "none"}, {"reservation", "1M"}, {"refreservation", "1M"},
		{"recordsize", "512"}, {"recordsize", "1M"}, {"recordsize", "128k"}, {"special_small_blocks", "0"},
		{"special_small_blocks", "128K"}, {"compression", "on"}, {"compression", "lz4"}, {"compression", "gzip-9"},
		{"compression", "zstd-19"}, {"compression", "zstd-fast-1000"}, {"compression", "zle"}, {"compression", "lzjb"},
		{"checksum", "sha256"}, {"checksum", "sha512"}, {"checksum", "skein"}, {"checksum", "edonr"}, {"checksum", "fletcher4"},
		{"dedup", "on"}, {"dedup", "verify"}, {"dedup", "sha256,verify"}, {"dedup", "edonr,verify"}, {"copies", "3"},
		{"atime", "off"}, {"relatime", "on"}, {"exec", "off"}, {"setuid", "off"}, {"devices", "off"}, {"readonly", "on"},
		{"overlay", "on"}, {"utf8only", "on"}, {"vscan", "off"}, {"nbmand", "off"}, {"xattr", "sa"}, {"xattr", "dir"},
		{"sync", "disabled"}, {"logbias", "throughput"}, {"primarycache", "metadata"}, {"secondarycache", "none"},
		{"snapdir", "visible"}, {"acltype", "posix"}, {"acltype", "posixacl"}, {"acltype", "noacl"}, {"acltype", "nfsv4"},
		{"aclinherit", "passthrough-x"}, {"aclmode", "passthrough"}, {"dnodesize", "auto"}, {"dnodesize", "16k"},
		{"redundant_metadata", "most"}, {"casesensitivity", "insensitive"}, {"casesensitivity", "mixed"},
		{"normalization", "formD"}, {"sharenfs", "off"}, {"sharesmb", "off"}, {"com.example:team", "data eng"},
		{"com.example:note", strings.Repeat("x", 8191)}, {"com.example:note", strings.Repeat("x", 8192)},
	} {
		out = append(out, one(kv[0], kv[1]))
	}
	return append(out,
		zfsCase{props: [][2]string{{"normalization", "formD"}, {"utf8only", "off"}}},
		zfsCase{props: [][2]string{{"normalization", "formC"}, {"utf8only", "on"}}},
		zfsCase{props: [][2]string{{"encryption", "on"}, {"keyformat", "raw"}, {"keylocation", "file://" + keyFile}, {"pbkdf2iters", "350000"}}},
		zfsCase{props: [][2]string{{"encryption", "off"}, {"keyformat", "hex"}}},
		zfsCase{props: [][2]string{{"encryption", "aes-256-gcm"}, {"keyformat", "passphrase"}, {"keylocation", "file://" + keyFile}, {"pbkdf2iters", "100000"}}},
		zfsCase{props: [][2]string{{"encryption", "aes-128-ccm"}, {"keyformat", "passphrase"}, {"keylocation", "file://" + keyFile}}},
	)
}

// pluginVerdict is the plugin's configuration check of a class's properties.
func pluginVerdict(c zfsCase) error {
	props := map[string]string{}
	for _, kv := range c.props {
		if err := zfs.ValidateProperty(kv[0], kv[1]); err != nil {
			return fmt.Errorf("%s = %q: %w", kv[0], kv[1], err)
		}
		props[kv[0]] = kv[1]
	}
	return zfs.ValidateProperties(props)
}

// TestConfigValuesAgreeWithZFS: every property value the plugin accepts at
// SetConfig, real OpenZFS accepts at `zfs create -o`; every value it
// refuses, zfs refuses too, but for the listed stricter ones.
func TestConfigValuesAgreeWithZFS(t *testing.T) {
	t.Parallel()
	p := newPool(t, "e2evalid", false)
	keyFile := filepath.Join(t.TempDir(), "key")
	// 32 bytes: a raw key; also a passphrase of at least 8 characters.
	if err := os.WriteFile(keyFile, []byte("0123456789abcdef0123456789abcdef"), 0o600); err != nil {
		t.Fatal(err)
	}
	var agree, stricterSeen int
	var stricterNames []string
	for i, c := range validateCases(keyFile) {
		want := pluginVerdict(c)
		ds := fmt.Sprintf("%s/v%d", p.Parent, i)
		args := []string{"create", "-o", "canmount=noauto"}
		for _, kv := range c.props {
			args = append(args, "-o", kv[0]+"="+kv[1])
		}
		_, got := runErr("zfs", append(args, ds)...)
		if got == nil {
			run(t, "zfs", "destroy", ds)
		}
		switch {
		case want == nil && got != nil:
			t.Errorf("%s: the plugin accepts it, zfs refuses it: %v", c, got)
		case want != nil && got == nil && stricter[strings.ReplaceAll(c.String(), keyFile, "KEY")] == "":
			t.Errorf("%s: the plugin refuses it (%v), zfs accepts it, and it is not listed as stricter on purpose", c, want)
		case want != nil && got == nil:
			stricterSeen++
			stricterNames = append(stricterNames, c.String())
		default:
			agree++
		}
	}
	sort.Strings(stricterNames)
	t.Logf("%d cases agree with zfs; %d refused by the plugin on purpose although zfs takes them: %s",
		agree, stricterSeen, strings.Join(stricterNames, " "))
}
