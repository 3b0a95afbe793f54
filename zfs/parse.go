package zfs

import (
	"bytes"
	"fmt"
	"slices"
	"strconv"
	"strings"
)

// Dataset types and pool health as zfs and zpool print them. They are the
// values of github.com/mistifyio/go-zfs/v3's constants (TestNamesMatchGoZFS
// holds them to it), spelled here so that what reads a listing (the slot
// model) links no process code: go-zfs runs zfs with os/exec.
const (
	DatasetFilesystem = "filesystem"
	DatasetSnapshot   = "snapshot"
	DatasetVolume     = "volume"
	// DatasetBookmark is a bookmark's row ("pool/fs#name") in ListArgs'
	// listing: a snapshot's guid and txg, no blocks, no properties of its
	// own (its other columns are "-").
	DatasetBookmark = "bookmark"
	PoolOnline      = "ONLINE"
	PoolDegraded    = "DEGRADED"
	PoolFaulted     = "FAULTED"
)

// Dataset is one row of a listing: a filesystem, snapshot or bookmark. Its strings
// are all cut from one copy of its own row, so a Dataset kept for long (a
// slot's last reading) holds one small allocation and never the whole
// output of the command that listed it.
type Dataset struct {
	Name string
	// Type is DatasetFilesystem, DatasetSnapshot or DatasetBookmark
	// (DatasetVolume only in ListAll's rows, which hold no bookmarks).
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
	Origin string
	GUID   string
	// ResumeToken is a filesystem's or volume's receive_resume_token (an
	// interrupted receive into it), "" for none; read by ListAll only.
	ResumeToken string
	// User holds the requested user properties that have a value (set here
	// or inherited: `zfs list` cannot tell them apart).
	User UserProps
}

// IsSnapshot reports whether d is a snapshot.
func (d *Dataset) IsSnapshot() bool { return d.Type == DatasetSnapshot }

// IsBookmark reports whether d is a bookmark.
func (d *Dataset) IsBookmark() bool { return d.Type == DatasetBookmark }

// Pool is one row of `zpool list`.
type Pool struct {
	Name      string
	Size      uint64
	Allocated uint64
	Free      uint64
	// Health is one of PoolOnline, PoolDegraded, PoolFaulted, ... or
	// "SUSPENDED".
	Health   string
	ReadOnly bool
}

// Healthy reports whether the pool can take writes safely.
func (p *Pool) Healthy() bool { return p.Health == PoolOnline && !p.ReadOnly }

// ParseList parses the -H -p output of the command built by ListArgs with the
// same userProps. Every line must have exactly the expected column count.
func ParseList(out []byte, userProps []string) ([]Dataset, error) {
	return parseList(out, listColumns, userProps)
}

// parseList parses rows of the native columns cols (each one listSetters
// knows) followed by userProps.
func parseList(out []byte, cols, userProps []string) ([]Dataset, error) {
	setters := make([]listSetter, len(cols))
	for i, c := range cols {
		if setters[i] = listSetters[c]; setters[i] == nil {
			return nil, fmt.Errorf("column %q: not one Dataset holds", c)
		}
	}
	// One copy of the names for every row: Get finds a value by position.
	names := slices.Clone(userProps)
	sets := make([]Dataset, 0, bytes.Count(out, []byte{'\n'}))
	err := eachLine(out, len(cols)+len(userProps), func(line string, f []string) error {
		p := fieldParser{fields: f, cols: cols}
		var d Dataset
		for i, set := range setters {
			set(&d, &p, i)
		}
		if p.err != nil {
			return fmt.Errorf("dataset %q: %w", d.Name, p.err)
		}
		if len(userProps) > 0 {
			// The user columns are the line's tail, after len(cols) tabs.
			off := len(cols)
			for _, v := range f[:len(cols)] {
				off += len(v)
			}
			d.User = UserProps{names: names, vals: line[off:]}
		}
		sets = append(sets, d)
		return nil
	})
	return sets, err
}

// listSetter stores column i of a row into d.
type listSetter func(d *Dataset, p *fieldParser, i int)

// listSetters read each native column a Dataset holds.
var listSetters = map[string]listSetter{
	"name":                 func(d *Dataset, p *fieldParser, i int) { d.Name = p.fields[i] },
	"type":                 func(d *Dataset, p *fieldParser, i int) { d.Type = datasetType(p.fields[i]) },
	"used":                 func(d *Dataset, p *fieldParser, i int) { d.Used = p.uint(i) },
	"available":            func(d *Dataset, p *fieldParser, i int) { d.Available = p.uint(i) },
	"referenced":           func(d *Dataset, p *fieldParser, i int) { d.Referenced = p.uint(i) },
	"mountpoint":           func(d *Dataset, p *fieldParser, i int) { d.Mountpoint = p.str(i) },
	"mounted":              func(d *Dataset, p *fieldParser, i int) { d.Mounted = p.fields[i] == "yes" },
	"quota":                func(d *Dataset, p *fieldParser, i int) { d.Quota = p.uint(i) },
	"refquota":             func(d *Dataset, p *fieldParser, i int) { d.Refquota = p.uint(i) },
	"reservation":          func(d *Dataset, p *fieldParser, i int) { d.Reservation = p.uint(i) },
	"compression":          func(d *Dataset, p *fieldParser, i int) { d.Compression = p.str(i) },
	"compressratio":        func(d *Dataset, p *fieldParser, i int) { d.CompressRatio = p.float(i) },
	"recordsize":           func(d *Dataset, p *fieldParser, i int) { d.Recordsize = p.uint(i) },
	"encryption":           func(d *Dataset, p *fieldParser, i int) { d.Encryption = p.str(i) },
	"origin":               func(d *Dataset, p *fieldParser, i int) { d.Origin = p.str(i) },
	"guid":                 func(d *Dataset, p *fieldParser, i int) { d.GUID = p.str(i) },
	"receive_resume_token": func(d *Dataset, p *fieldParser, i int) { d.ResumeToken = p.str(i) },
}

// datasetType returns the constant for the types a listing shows, so rows
// share it instead of each keeping its own copy.
func datasetType(s string) string {
	for _, t := range []string{DatasetFilesystem, DatasetSnapshot, DatasetVolume, DatasetBookmark} {
		if s == t {
			return t
		}
	}
	return s
}

// ParsePools parses the output of the command built by ZpoolListArgs.
func ParsePools(out []byte) ([]Pool, error) {
	var pools []Pool
	err := eachLine(out, len(poolColumns), func(_ string, f []string) error {
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
	err := eachLine(out, 3, func(_ string, f []string) error {
		holds = append(holds, Hold{Snapshot: f[0], Tag: f[1]})
		return nil
	})
	return holds, err
}

// eachLine splits tab-separated output and checks the column count of every
// non-empty line, as go-zfs does: a mismatch means the output is not what
// this code was written for, and guessing would be worse than failing. fn
// gets the line's fields, cut from one copy of that line (the output itself
// is not kept); the slice is reused for the next line.
func eachLine(out []byte, want int, fn func(line string, f []string) error) error {
	var f []string
	for n := 1; len(out) > 0; n++ {
		raw := out
		if i := bytes.IndexByte(out, '\n'); i >= 0 {
			raw, out = out[:i], out[i+1:]
		} else {
			out = nil
		}
		if len(raw) > maxLine {
			return fmt.Errorf("line %d: longer than %d bytes", n, maxLine)
		}
		raw = bytes.TrimSuffix(raw, []byte{'\r'}) // as bufio.ScanLines
		if len(raw) == 0 {
			continue
		}
		line := string(raw)
		f = f[:0]
		for rest, more := line, true; more; {
			var field string
			field, rest, more = strings.Cut(rest, "\t")
			f = append(f, field)
		}
		if len(f) != want {
			return fmt.Errorf("line %d: %d columns, want %d: %q", n, len(f), want, raw)
		}
		if err := fn(line, f); err != nil {
			return fmt.Errorf("line %d: %w", n, err)
		}
	}
	return nil
}

// maxLine bounds one line of output: a row of the widest listing is well
// under 1 KiB; anything longer is not output this code was written for.
const maxLine = 1 << 20

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
