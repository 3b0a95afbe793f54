package zfs

import (
	"strings"
	"testing"
)

func TestValidateProperty(t *testing.T) {
	cases := []struct {
		name, prop, value string
		wantErr           string // "" means valid
	}{
		{name: "quota with suffix", prop: "quota", value: "1G"},
		{name: "quota none", prop: "quota", value: "none"},
		{name: "refquota decimal", prop: "refquota", value: "1.5T"},
		{name: "compression lz4", prop: "compression", value: "lz4"},
		{name: "compression zstd level", prop: "compression", value: "zstd-19"},
		{name: "compression zstd-fast level", prop: "compression", value: "zstd-fast-500"},
		{name: "recordsize 1M", prop: "recordsize", value: "1M"},
		{name: "atime off", prop: "atime", value: "off"},
		{name: "user property", prop: "com.example:team", value: "data eng"},
		{name: "encryption cipher", prop: "encryption", value: "aes-256-gcm"},
		// The same values real zfs refuses (testdata/openzfs-2.1.11/err-bad-*).
		{name: "bad compression", prop: "compression", value: "bogus", wantErr: "must be one of on, off, lzjb"},
		{name: "bad quota suffix", prop: "quota", value: "12QB", wantErr: `"12QB" is not a size`},
		{name: "quota zero", prop: "quota", value: "0", wantErr: "write none"},
		{name: "quota below an empty file system", prop: "refquota", value: "64K", wantErr: "below 1M"},
		{name: "special_small_blocks over 1M", prop: "special_small_blocks", value: "2M", wantErr: "512 to 1M"},
		{name: "special_small_blocks zero", prop: "special_small_blocks", value: "0"},
		{name: "upper-case user property", prop: "com.Example:team", value: "x", wantErr: `zfs refuses "E"`},
		{name: "pbkdf2iters too few", prop: "pbkdf2iters", value: "1000", wantErr: "at least 100000"},
		{name: "unknown property", prop: "bogusprop", value: "1", wantErr: "invalid property"},
		{name: "recordsize not power of two", prop: "recordsize", value: "100K", wantErr: "power of 2"},
		{name: "recordsize too big", prop: "recordsize", value: "32M", wantErr: "power of 2"},
		{name: "recordsize over the 2.1 default limit", prop: "recordsize", value: "2M", wantErr: "512 to 1M"},
		{name: "atime yes", prop: "atime", value: "yes", wantErr: "on, off"},
		{name: "zstd level 20", prop: "compression", value: "zstd-20", wantErr: "must be one of"},
		{name: "newline in user value", prop: "a:b", value: "x\ny", wantErr: "tab or newline"},
		{name: "flag-like property name", prop: "-o", value: "x", wantErr: "must start with a letter"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			err := ValidateProperty(tc.prop, tc.value)
			if tc.wantErr == "" {
				if err != nil {
					t.Fatalf("unexpected error: %v", err)
				}
				return
			}
			if err == nil || !strings.Contains(err.Error(), tc.wantErr) {
				t.Fatalf("got %v, want error containing %q", err, tc.wantErr)
			}
		})
	}
}

func TestParseSize(t *testing.T) {
	cases := []struct {
		in   string
		want uint64
		ok   bool
	}{
		{"512", 512, true},
		{"64K", 64 << 10, true},
		{"1G", 1 << 30, true},
		{"1g", 1 << 30, true},
		{"1GiB", 1 << 30, true},
		{"1.5M", 3 << 19, true},
		{"2 T", 0, false}, // zfs: invalid numeric suffix ' T'
		{" 1G", 0, false},
		{"1iB", 0, false},
		{"1BB", 0, false},
		{"1B", 1, true},
		{".5K", 512, true},
		{"1kib", 1 << 10, true},
		{"16E", 0, false},
		{"1Z", 0, false},
		{"15E", 15 << 60, true},
		{"", 0, false},
		{"-1G", 0, false},
		{"12QB", 0, false},
		{"G", 0, false},
	}
	for _, tc := range cases {
		t.Run(tc.in, func(t *testing.T) {
			got, err := ParseSize(tc.in)
			if (err == nil) != tc.ok || got != tc.want {
				t.Fatalf("ParseSize(%q) = %d, %v; want %d, ok=%v", tc.in, got, err, tc.want, tc.ok)
			}
		})
	}
}
