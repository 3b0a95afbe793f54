package zfs

import (
	"bufio"
	"bytes"
	"fmt"
	"strconv"
	"strings"

	gozfs "github.com/mistifyio/go-zfs/v3"
)

// Dataset is one row of a scan: a filesystem or a snapshot.
type Dataset struct {
	Name string
	// Type is gozfs.DatasetFilesystem or gozfs.DatasetSnapshot.
	Type       string
	Used       uint64
	Available  uint64 // 0 for snapshots
	Referenced uint64
	// Mountpoint is the path, "none", "legacy", or "" for snapshots.
	Mountpoint    string
	Mounted       bool
	Quota         uint64 // 0: none
	Refquota      uint64 // 0: none
	Reservation   uint64
	Compression   string
	CompressRatio float64
	Recordsize    uint64 // 0 for snapshots
	// Encryption is "off" or the cipher, e.g. "aes-256-gcm".
	Encryption string
	// Origin is the snapshot a clone was made from, "" otherwise.
	Origin    string
	GUID      string
	CreateTXG uint64
	// Written is what was written since the latest snapshot.
	Written       uint64
	LogicalUsed   uint64
	UsedByDataset uint64
	// User holds the requested user properties that have a value (set here
	// or inherited: `zfs list` cannot tell them apart).
	User map[string]string
}

// IsSnapshot reports whether d is a snapshot.
func (d *Dataset) IsSnapshot() bool { return d.Type == gozfs.DatasetSnapshot }

// Pool is one row of `zpool list`.
type Pool struct {
	Name      string
	Size      uint64
	Allocated uint64
	Free      uint64
	// Health is one of gozfs.ZpoolOnline, ZpoolDegraded, ZpoolFaulted, ... or
	// "SUSPENDED".
	Health   string
	ReadOnly bool
}

// Healthy reports whether the pool can take writes safely.
func (p *Pool) Healthy() bool { return p.Health == gozfs.ZpoolOnline && !p.ReadOnly }

// ParseList parses the -H -p output of the command built by ListArgs with the
// same userProps. Every line must have exactly the expected column count.
func ParseList(out []byte, userProps []string) ([]Dataset, error) {
	want := len(listColumns) + len(userProps)
	var sets []Dataset
	err := eachLine(out, want, func(f []string) error {
		d, err := parseDataset(f, userProps)
		if err != nil {
			return err
		}
		sets = append(sets, d)
		return nil
	})
	return sets, err
}

func parseDataset(f []string, userProps []string) (Dataset, error) {
	p := fieldParser{fields: f, cols: listColumns}
	d := Dataset{
		Name:          f[0],
		Type:          f[1],
		Used:          p.uint(2),
		Available:     p.uint(3),
		Referenced:    p.uint(4),
		Mountpoint:    p.str(5),
		Mounted:       f[6] == "yes",
		Quota:         p.uint(7),
		Refquota:      p.uint(8),
		Reservation:   p.uint(9),
		Compression:   p.str(10),
		CompressRatio: p.float(11),
		Recordsize:    p.uint(12),
		Encryption:    p.str(13),
		Origin:        p.str(14),
		GUID:          p.str(15),
		CreateTXG:     p.uint(16),
	}
	d.Written, d.LogicalUsed, d.UsedByDataset = p.uint(17), p.uint(18), p.uint(19)
	if p.err != nil {
		return Dataset{}, fmt.Errorf("dataset %q: %w", d.Name, p.err)
	}
	for i, name := range userProps {
		if v := f[len(listColumns)+i]; v != "-" {
			if d.User == nil {
				d.User = make(map[string]string, len(userProps))
			}
			d.User[name] = v
		}
	}
	return d, nil
}

// ParsePools parses the output of the command built by ZpoolListArgs.
func ParsePools(out []byte) ([]Pool, error) {
	var pools []Pool
	err := eachLine(out, len(poolColumns), func(f []string) error {
		p := fieldParser{fields: f, cols: poolColumns}
		pool := Pool{
			Name:      f[0],
			Size:      p.uint(1),
			Allocated: p.uint(2),
			Free:      p.uint(3),
			Health:    f[4],
			ReadOnly:  f[5] == "on",
		}
		if p.err != nil {
			return fmt.Errorf("pool %q: %w", pool.Name, p.err)
		}
		pools = append(pools, pool)
		return nil
	})
	return pools, err
}

// Hold is one hold on a snapshot.
type Hold struct {
	Snapshot string
	Tag      string
}

// ParseHolds parses `zfs holds -H` output: snapshot, tag, timestamp.
func ParseHolds(out []byte) ([]Hold, error) {
	var holds []Hold
	err := eachLine(out, 3, func(f []string) error {
		holds = append(holds, Hold{Snapshot: f[0], Tag: f[1]})
		return nil
	})
	return holds, err
}

// eachLine splits tab-separated output and checks the column count of every
// non-empty line, as go-zfs does: a mismatch means the output is not what
// this code was written for, and guessing would be worse than failing.
func eachLine(out []byte, want int, fn func([]string) error) error {
	sc := bufio.NewScanner(bytes.NewReader(out))
	sc.Buffer(make([]byte, 64*1024), 1024*1024)
	for n := 1; sc.Scan(); n++ {
		line := sc.Text()
		if line == "" {
			continue
		}
		f := strings.Split(line, "\t")
		if len(f) != want {
			return fmt.Errorf("line %d: %d columns, want %d: %q", n, len(f), want, line)
		}
		if err := fn(f); err != nil {
			return fmt.Errorf("line %d: %w", n, err)
		}
	}
	return sc.Err()
}

// fieldParser reads typed columns, keeping the first error.
type fieldParser struct {
	fields []string
	cols   []string
	err    error
}

// str reads a string column; "-" (unset, not applicable) is "".
func (p *fieldParser) str(i int) string {
	if p.fields[i] == "-" {
		return ""
	}
	return p.fields[i]
}

// uint reads an exact integer (-p); "-" and "none" are 0.
func (p *fieldParser) uint(i int) uint64 {
	s := p.fields[i]
	if s == "-" || s == "none" {
		return 0
	}
	v, err := strconv.ParseUint(s, 10, 64)
	if err != nil && p.err == nil {
		p.err = fmt.Errorf("column %s: %q is not an integer (was -p given?)", p.cols[i], s)
	}
	return v
}

// float reads a ratio such as "1.00" (OpenZFS >= 0.7 prints no "x" with -p).
func (p *fieldParser) float(i int) float64 {
	s := strings.TrimSuffix(p.fields[i], "x")
	if s == "-" {
		return 0
	}
	v, err := strconv.ParseFloat(s, 64)
	if err != nil && p.err == nil {
		p.err = fmt.Errorf("column %s: %q is not a number", p.cols[i], s)
	}
	return v
}
