package zfs

import (
	"fmt"
	"strings"
)

// MaxNameLen is ZFS's limit on a full dataset or snapshot name (ZFS_MAX_DATASET_NAME_LEN - 1).
const MaxNameLen = 255

// ValidateName checks a dataset name ("pool/a/b") or, with snapshot allowed,
// a snapshot name ("pool/a@s"). The rules are stricter than ZFS's own: ZFS
// accepts spaces and a leading '-' in later components (captured: err-bad-name,
// err-dash-name both exit 0), which would let a name be read as a flag or
// break tab-separated output. Every component must start with a letter or
// digit and contain only letters, digits, '_', '-', '.' and ':'.
func ValidateName(name string, snapshot bool) error {
	if name == "" {
		return fmt.Errorf("empty dataset name")
	}
	if len(name) > MaxNameLen {
		return fmt.Errorf("dataset name %q is longer than %d characters", name, MaxNameLen)
	}
	ds, snap, isSnap := strings.Cut(name, "@")
	if isSnap && !snapshot {
		return fmt.Errorf("%q is a snapshot name, a dataset name is needed", name)
	}
	if snapshot && !isSnap {
		return fmt.Errorf("%q is not a snapshot name (dataset@snapshot)", name)
	}
	for i, comp := range strings.Split(ds, "/") {
		if err := validComponent(comp); err != nil {
			return fmt.Errorf("dataset name %q: %w", name, err)
		}
		if i == 0 && !isLetter(comp[0]) {
			return fmt.Errorf("dataset name %q: pool name %q must start with a letter", name, comp)
		}
	}
	if isSnap {
		if err := validComponent(snap); err != nil {
			return fmt.Errorf("snapshot name %q: %w", name, err)
		}
	}
	return nil
}

// SnapshotList names snapshots snaps (full names, all of one filesystem)
// as zfs destroy takes several at once: "tank/a@x,y". One snapshot is
// its own name.
func SnapshotList(snaps []string) (string, error) {
	if len(snaps) == 0 {
		return "", fmt.Errorf("no snapshots")
	}
	fs, _, _ := strings.Cut(snaps[0], "@")
	parts := make([]string, 0, len(snaps))
	for _, s := range snaps {
		if err := ValidateName(s, true); err != nil {
			return "", err
		}
		d, name, _ := strings.Cut(s, "@")
		if d != fs {
			return "", fmt.Errorf("snapshots %s and %s are not of one filesystem", snaps[0], s)
		}
		parts = append(parts, name)
	}
	return fs + "@" + strings.Join(parts, ","), nil
}

// SplitSnapshotList is the snapshots list names (SnapshotList's form, or
// one snapshot's name), each by its full name, each checked.
func SplitSnapshotList(list string) ([]string, error) {
	fs, names, ok := strings.Cut(list, "@")
	if !ok {
		return nil, fmt.Errorf("%q is not a snapshot name (dataset@snapshot)", list)
	}
	var out []string
	for _, n := range strings.Split(names, ",") {
		s := fs + "@" + n
		if err := ValidateName(s, true); err != nil {
			return nil, err
		}
		out = append(out, s)
	}
	return out, nil
}

// ValidateComponent checks one name component (a class or slot name).
func ValidateComponent(comp string) error { return validComponent(comp) }

func validComponent(comp string) error {
	if comp == "" {
		return fmt.Errorf("empty name component")
	}
	if !isLetter(comp[0]) && !isDigit(comp[0]) {
		return fmt.Errorf("component %q must start with a letter or digit", comp)
	}
	for i := 0; i < len(comp); i++ {
		c := comp[i]
		if !isLetter(c) && !isDigit(c) && !strings.ContainsRune("_-.:", rune(c)) {
			return fmt.Errorf("component %q contains %q; allowed are letters, digits, '_', '-', '.', ':'", comp, string(c))
		}
	}
	return nil
}

// ValidatePropertyName checks a property name before it goes on a command
// line: a native name (lower-case letters, digits, '_', '@') or a user
// property, which must contain ':'.
func ValidatePropertyName(name string) error {
	if name == "" {
		return fmt.Errorf("empty property name")
	}
	if !isLetter(name[0]) {
		return fmt.Errorf("property name %q must start with a letter", name)
	}
	for i := 0; i < len(name); i++ {
		c := name[i]
		if !isLetter(c) && !isDigit(c) && !strings.ContainsRune("_-.:@", rune(c)) {
			return fmt.Errorf("property name %q contains %q", name, string(c))
		}
	}
	if len(name) > 255 {
		return fmt.Errorf("property name %q is longer than 255 characters", name)
	}
	return nil
}

// validatePropertyValue rejects values that would break -H output parsing.
func validatePropertyValue(name, value string) error {
	if strings.ContainsAny(value, "\t\n\r") {
		return fmt.Errorf("property %s: value %q contains a tab or newline", name, value)
	}
	if len(value) > 8191 {
		return fmt.Errorf("property %s: value is longer than 8191 bytes", name)
	}
	return nil
}

func isLetter(c byte) bool { return c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' }
func isDigit(c byte) bool  { return c >= '0' && c <= '9' }

// PoolOf returns the pool part of a dataset or snapshot name.
func PoolOf(name string) string {
	name, _, _ = strings.Cut(name, "@")
	pool, _, _ := strings.Cut(name, "/")
	return pool
}

// Parent returns the parent dataset of name, or "" for a pool root. For a
// snapshot it returns the snapshotted dataset.
func Parent(name string) string {
	if ds, _, ok := strings.Cut(name, "@"); ok {
		return ds
	}
	i := strings.LastIndexByte(name, '/')
	if i < 0 {
		return ""
	}
	return name[:i]
}
