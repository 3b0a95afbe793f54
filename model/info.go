package model

import (
	"strings"
	"unique"

	"github.com/nomad-device-zfs/nomad-device-zfs/zfs"
)

// Info is what a view keeps of a slot's scanned row: the columns the model,
// the fingerprint, Stats and status read. A zfs.Dataset holds substrings of
// its listing's line, so a slot that kept its row kept the whole line
// (about 250 bytes) and the row's 224; at 10,000 slots, with two views live
// while a scan builds the next, that was the plugin's largest heap item.
// Info copies the few strings it keeps into one small allocation per row.
// It leaves out the row's name and mountpoint, which are the slot's
// Dataset and Mountpoint, and its type: a slot's row is a filesystem (the
// scan lists filesystems and snapshots, and a snapshot's name is never a
// slot's).
type Info struct {
	Used, Available, Referenced uint64
	Quota, Refquota             uint64 // 0: none
	Reservation, Recordsize     uint64
	CompressRatio               float64
	Compression, Encryption     string
	// Origin is the snapshot a clone was made from, "" otherwise.
	Origin string
	GUID   string
	// User are the plugin's user properties (UserProps) the row had.
	User Props
}

// Props are the values of the plugin's user properties (UserProps) that a
// row had, kept in one string: tab-separated, in UserProps order, empty
// when unset (a value listed by zfs -H holds no tab).
type Props struct{ vals string }

// Get returns the value of user property name, "" when it has none or is
// not one of UserProps, as zfs.UserProps.Get does.
func (p Props) Get(name string) string {
	for i, n := range UserProps {
		if n == name {
			return nthField(p.vals, i)
		}
	}
	return ""
}

// nthField is field i of tab-separated s, "" past its end.
func nthField(s string, i int) string {
	for ; i > 0; i-- {
		_, rest, ok := strings.Cut(s, "\t")
		if !ok {
			return ""
		}
		s = rest
	}
	v, _, _ := strings.Cut(s, "\t")
	return v
}

// InfoOf copies what a view keeps of row d.
func InfoOf(d *zfs.Dataset) Info {
	// One allocation for the row's own strings: GUID, origin, then the
	// user property values.
	var b strings.Builder
	n := len(d.GUID) + 1 + len(d.Origin)
	for _, name := range UserProps {
		n += 1 + len(d.User.Get(name))
	}
	b.Grow(n)
	b.WriteString(d.GUID)
	b.WriteByte('\t')
	b.WriteString(d.Origin)
	for _, name := range UserProps {
		b.WriteByte('\t')
		b.WriteString(d.User.Get(name))
	}
	all := b.String()
	guid, rest, _ := strings.Cut(all, "\t")
	origin, vals, _ := strings.Cut(rest, "\t")
	if strings.Trim(vals, "\t") == "" {
		vals = ""
	}
	return Info{
		Used: d.Used, Available: d.Available, Referenced: d.Referenced,
		Quota: d.Quota, Refquota: d.Refquota, Reservation: d.Reservation, Recordsize: d.Recordsize,
		CompressRatio: d.CompressRatio,
		Compression:   intern(d.Compression), Encryption: intern(d.Encryption),
		Origin: origin, GUID: guid, User: Props{vals: vals},
	}
}

// intern returns one shared copy of a value many rows repeat (a
// compression or cipher name), not a substring of each row's line.
func intern(s string) string {
	if s == "" {
		return ""
	}
	return unique.Make(s).Value()
}

// row rebuilds the zfs.Dataset Info was read from, with the slot's
// mountpoint: the previous view's rows when a scan fails (prevDatasets).
func (s *Slot) row() *zfs.Dataset {
	user := map[string]string{}
	for _, name := range UserProps {
		if v := s.Info.User.Get(name); v != "" {
			user[name] = v
		}
	}
	i := &s.Info
	return &zfs.Dataset{
		Name: s.Dataset, Type: zfs.DatasetFilesystem,
		Used: i.Used, Available: i.Available, Referenced: i.Referenced,
		Mountpoint: s.Mountpoint, Mounted: s.Mounted,
		Quota: i.Quota, Refquota: i.Refquota, Reservation: i.Reservation, Recordsize: i.Recordsize,
		Compression: i.Compression, CompressRatio: i.CompressRatio, Encryption: i.Encryption,
		Origin: i.Origin, GUID: i.GUID, User: zfs.UserPropsOf(user),
	}
}
