package zfs

import (
	"errors"
	"fmt"
	"sort"
	"strings"
)

// The argv builders below are pure: they validate every name and property
// and return the arguments that follow "zfs" or "zpool". Names are checked by
// ValidateName, so no operand can be read as a flag; properties are emitted
// in sorted order, so the same request always gives the same command line.

// listColumns are the native columns of one scan, in output order, each one
// Dataset holds (ParseList reads them by name); user properties follow
// them. Only what the plugin reads: every column is formatted for every row,
// and at scale that is most of the listing's cost beyond the bare names.
var listColumns = []string{
	"name", "type", "used", "available", "referenced", "mountpoint", "mounted",
	"quota", "refquota", "reservation", "compression", "compressratio",
	"recordsize", "encryption", "origin", "guid",
}

// copyColumns are ListAll's: a received copy's listing carries its
// interrupted receive's receive_resume_token, so that a pull needs no
// listing of its own for it (Dataset.ResumeToken).
var copyColumns = append(append([]string(nil), listColumns...), "receive_resume_token")

// poolColumns are the columns of one `zpool list`, in output order.
var poolColumns = []string{"name", "size", "allocated", "free", "health", "readonly"}

// ListArgs lists root and everything below it, filesystems, snapshots and
// bookmarks, with the native columns and the given user properties: one
// process per scan. Bookmarks are listed because they are part of what a
// release must know: a rollback is refused while one is newer than its
// snapshot (OpenZFS's zfs_do_rollback checks bookmarks as snapshots), and
// the plugin destroys only what it owns (a bookmark row has "-" in every
// column but name, type and guid: capture rep-list-holder-1).
func ListArgs(root string, userProps []string) ([]string, error) {
	return ListManyArgs([]string{root}, userProps)
}

// ListManyArgs is ListArgs for several roots in one process: zfs lists each
// root's tree in turn.
func ListManyArgs(roots []string, userProps []string) ([]string, error) {
	return listArgs("filesystem,snapshot,bookmark", listColumns, roots, userProps)
}

// ListAllArgs is ListArgs with volumes too, and the resume token column
// (ListAll).
func ListAllArgs(root string, userProps []string) ([]string, error) {
	return listArgs("filesystem,snapshot,volume", copyColumns, []string{root}, userProps)
}

func listArgs(types string, native, roots []string, userProps []string) ([]string, error) {
	if len(roots) == 0 {
		return nil, errors.New("no dataset to list")
	}
	for _, root := range roots {
		if err := ValidateName(root, false); err != nil {
			return nil, err
		}
	}
	cols := append([]string(nil), native...)
	for _, p := range userProps {
		if !strings.Contains(p, ":") {
			return nil, fmt.Errorf("user property %q must contain ':'", p)
		}
		if err := ValidatePropertyName(p); err != nil {
			return nil, err
		}
		cols = append(cols, p)
	}
	return append([]string{"list", "-H", "-p", "-r", "-t", types, "-o", strings.Join(cols, ",")}, roots...), nil
}

// ZpoolListArgs lists the given pools, or all pools when none is given.
func ZpoolListArgs(pools ...string) ([]string, error) {
	args := []string{"list", "-H", "-p", "-o", strings.Join(poolColumns, ",")}
	for _, p := range pools {
		if err := ValidateName(p, false); err != nil || strings.Contains(p, "/") {
			return nil, fmt.Errorf("invalid pool name %q", p)
		}
		args = append(args, p)
	}
	return args, nil
}

// CreateArgs creates a filesystem. The parent must exist: the plugin never
// creates intermediate datasets it would not own.
func CreateArgs(name string, props map[string]string) ([]string, error) {
	if err := ValidateName(name, false); err != nil {
		return nil, err
	}
	opts, err := propOptions(props)
	if err != nil {
		return nil, err
	}
	return append(append([]string{"create"}, opts...), name), nil
}

// CloneArgs clones snapshot snap into a new filesystem name.
func CloneArgs(snap, name string, props map[string]string) ([]string, error) {
	if err := ValidateName(snap, true); err != nil {
		return nil, err
	}
	if err := ValidateName(name, false); err != nil {
		return nil, err
	}
	opts, err := propOptions(props)
	if err != nil {
		return nil, err
	}
	return append(append([]string{"clone"}, opts...), snap, name), nil
}

// SnapshotArgs creates snapshot name (dataset@snap) with properties.
func SnapshotArgs(name string, props map[string]string) ([]string, error) {
	if err := ValidateName(name, true); err != nil {
		return nil, err
	}
	opts, err := propOptions(props)
	if err != nil {
		return nil, err
	}
	return append(append([]string{"snapshot"}, opts...), name), nil
}

// DestroyOptions select destroy's flags.
type DestroyOptions struct {
	// Recursive destroys children and snapshots too (-r).
	Recursive bool
	// Force unmounts even when busy (-f). The plugin never sets it on a
	// dataset a task may use: a busy dataset is a live one.
	Force bool
}

// DestroyArgs destroys a filesystem, snapshot or bookmark, or several
// snapshots of one filesystem named in zfs's own form, "tank/a@x,y"
// (SnapshotList): one process, and ZFS destroys all of them or none.
func DestroyArgs(name string, o DestroyOptions) ([]string, error) {
	switch {
	case strings.Contains(name, "#"):
		if err := ValidateBookmarkName(name); err != nil {
			return nil, err
		}
	case strings.Contains(name, "@"):
		if _, err := SplitSnapshotList(name); err != nil {
			return nil, err
		}
	default:
		if err := ValidateName(name, false); err != nil {
			return nil, err
		}
	}
	args := []string{"destroy"}
	if o.Recursive {
		args = append(args, "-r")
	}
	if o.Force {
		args = append(args, "-f")
	}
	return append(args, name), nil
}

// RollbackArgs rolls a filesystem back to snap; destroyNewer (-r) destroys
// the snapshots taken after it.
func RollbackArgs(snap string, destroyNewer bool) ([]string, error) {
	if err := ValidateName(snap, true); err != nil {
		return nil, err
	}
	args := []string{"rollback"}
	if destroyNewer {
		args = append(args, "-r")
	}
	return append(args, snap), nil
}

// SetArgs sets several properties in one process (OpenZFS >= 0.7).
func SetArgs(name string, props map[string]string) ([]string, error) {
	if err := ValidateName(name, strings.Contains(name, "@")); err != nil {
		return nil, err
	}
	if len(props) == 0 {
		return nil, fmt.Errorf("set %s: no properties", name)
	}
	pairs, err := propPairs(props)
	if err != nil {
		return nil, err
	}
	return append(append([]string{"set"}, pairs...), name), nil
}

// InheritArgs clears a local property so it is inherited again; for a user
// property that set nowhere above, this removes it.
func InheritArgs(name, prop string) ([]string, error) {
	if err := ValidateName(name, strings.Contains(name, "@")); err != nil {
		return nil, err
	}
	if err := ValidatePropertyName(prop); err != nil {
		return nil, err
	}
	return []string{"inherit", prop, name}, nil
}

// RenameArgs renames a filesystem within its pool.
func RenameArgs(oldName, newName string) ([]string, error) {
	snap := strings.Contains(oldName, "@")
	if err := ValidateName(oldName, snap); err != nil {
		return nil, err
	}
	if err := ValidateName(newName, snap); err != nil {
		return nil, err
	}
	if oldFS, _, _ := strings.Cut(oldName, "@"); snap && !strings.HasPrefix(newName, oldFS+"@") {
		return nil, fmt.Errorf("rename %s to %s: a snapshot keeps its filesystem", oldName, newName)
	}
	return []string{"rename", oldName, newName}, nil
}

// HoldArgs places hold tag on snapshot snap; ReleaseArgs removes it from
// snap, or from each snapshot of a list in destroy's form, "tank/a@x,y"
// (SnapshotList), in one process. zfs release takes each snapshot in turn
// (OpenZFS 2.1.11: one without the tag fails alone, "no such tag on this
// dataset", and the others are released; zfs/testdata/openzfs-2.1.11/
// release-multi-*).
func HoldArgs(tag, snap string) ([]string, error) {
	if err := ValidateName(snap, true); err != nil {
		return nil, err
	}
	return holdArgs("hold", tag, []string{snap})
}

func ReleaseArgs(tag, snaps string) ([]string, error) {
	names, err := SplitSnapshotList(snaps)
	if err != nil {
		return nil, err
	}
	return holdArgs("release", tag, names)
}

func holdArgs(verb, tag string, snaps []string) ([]string, error) {
	if err := validComponent(tag); err != nil {
		return nil, fmt.Errorf("hold tag %q: %w", tag, err)
	}
	return append([]string{verb, tag}, snaps...), nil
}

// HoldsArgs lists the holds on snapshot snap.
func HoldsArgs(snap string) ([]string, error) {
	if err := ValidateName(snap, true); err != nil {
		return nil, err
	}
	return []string{"holds", "-H", snap}, nil
}

// MountArgs mounts a filesystem at its mountpoint.
func MountArgs(name string) ([]string, error) {
	if err := ValidateName(name, false); err != nil {
		return nil, err
	}
	return []string{"mount", name}, nil
}

// propOptions renders properties as sorted "-o k=v" pairs.
func propOptions(props map[string]string) ([]string, error) {
	pairs, err := propPairs(props)
	if err != nil {
		return nil, err
	}
	opts := make([]string, 0, 2*len(pairs))
	for _, p := range pairs {
		opts = append(opts, "-o", p)
	}
	return opts, nil
}

// propPairs renders properties as sorted "k=v" strings.
func propPairs(props map[string]string) ([]string, error) {
	keys := make([]string, 0, len(props))
	for k := range props {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	pairs := make([]string, 0, len(keys))
	for _, k := range keys {
		if err := ValidatePropertyName(k); err != nil {
			return nil, err
		}
		if err := validatePropertyValue(k, props[k]); err != nil {
			return nil, err
		}
		pairs = append(pairs, k+"="+props[k])
	}
	return pairs, nil
}
