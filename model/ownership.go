package model

import (
	"fmt"
	"strings"

	"github.com/nomad-device-zfs/nomad-device-zfs/zfs"
)

// Ownership: the plugin changes only what carries its mark, and nothing
// with anything foreign below it.
//
// A dataset is the plugin's when its PropOwner names the dataset itself
// (user properties are inherited, so a child someone creates below a slot
// inherits a value naming the slot, not itself). A snapshot inherits its
// dataset's user properties too, so a snapshot is the plugin's only when its
// dataset is and it has one of the plugin's snapshot names; any other
// snapshot (an operator's, an auto-snapshot tool's) is foreign. A replica
// snapshot, @replica-<n>, is the plugin's only when its own PropOwner
// names it, set by the `zfs snapshot -o` that took it
// (ReplicaSnapshotProps): a name a replication tool might well use too,
// so the name alone is not the plugin's mark there.
//
// A bookmark has no user properties (its columns but name, type and guid
// are "-"): a #replica-<n> bookmark of a dataset the plugin owns is the
// plugin's (ownBookmark); any other is foreign. A bookmark holds no
// blocks, so taking a stranger's of that name for the plugin's loses no
// data; it would only end that stranger's increments from it.

// Owned reports whether d carries the ownership mark for itself. A slot
// renamed aside for retention is also recognised by PropRetainAs naming it,
// which covers a crash between the rename and rewriting its owner mark.
func Owned(d *zfs.Dataset) bool {
	if d.IsSnapshot() {
		return ownSnapshot(d)
	}
	return d.User.Get(PropOwner) == d.Name || d.User.Get(PropRetainAs) == d.Name
}

// ownSnapshot reports whether snapshot d is one the plugin takes:
// @pristine, @retained or a migration's (migrate.go) of a dataset it owns,
// or a replica snapshot carrying its own mark (replica.go).
func ownSnapshot(d *zfs.Dataset) bool {
	if !d.IsSnapshot() {
		return false
	}
	ds, snap, _ := strings.Cut(d.Name, "@")
	if _, replica := ReplicaNumber(snap); replica {
		return d.User.Get(PropOwner) == d.Name
	}
	if snap != PristineSnapshot && snap != RetainedSnapshot && !migrationSnapshot(snap) {
		return false
	}
	return d.User.Get(PropOwner) == ds || d.User.Get(PropRetainAs) == ds
}

// ownBookmark reports whether bookmark d is one the plugin makes on
// dataset, which the caller knows the plugin owns: #replica-<n> of dataset
// itself (not of anything below it), a replica pull's base
// (replica_send.go).
func ownBookmark(d *zfs.Dataset, dataset string) bool {
	ds, mark, ok := strings.Cut(d.Name, "#")
	_, replica := ReplicaNumber(mark)
	return d.IsBookmark() && ok && ds == dataset && replica
}

// replicaSnapshot reports whether full snapshot name snap is a replica
// snapshot, @replica-<n>.
func replicaSnapshot(snap string) bool {
	_, short, ok := strings.Cut(snap, "@")
	_, replica := ReplicaNumber(short)
	return ok && replica
}

// CheckRelease says why slot s must not be released now, or nil: anything
// foreign below it would be destroyed (destroy), moved (snapshot policy's
// rename) or rolled away (rollback). Nothing is changed then; the slot
// keeps its data and its state, and its health says what to do.
func CheckRelease(cfg *Config, s Slot) error {
	if len(s.Strangers) > 0 {
		return fmt.Errorf("not released: %s", strangersAdvice(parentOf(&s), s.Dataset, s.Strangers))
	}
	return nil
}

// CheckDestroyRetained says why retained data r must not be destroyed, or
// nil.
func CheckDestroyRetained(cfg *Config, r Retained) error {
	if p := r.Problem(cfg); p != "" {
		return fmt.Errorf("not destroyed: %s", p)
	}
	return nil
}

// Problem says what keeps retained data r from being pruned, "" if nothing.
func (r Retained) Problem(cfg *Config) string {
	if len(r.Strangers) == 0 {
		return ""
	}
	return strangersAdvice(zfs.Parent(zfs.Parent(r.Dataset)), r.Dataset, r.Strangers)
}

// Trespassed reports whether slot s has something foreign below it, or a
// path or origin that does not follow from the plugin's naming: a problem
// only the operator can clear (its Reason says how).
func (s *Slot) Trespassed() bool {
	return s.Exists && (len(s.Strangers) > 0 || strings.HasPrefix(s.Info.Origin, parentOf(s)+"/") ||
		(s.Mountpoint != s.WantMountpoint && (s.Mounted || Mountable(s.Mountpoint))))
}

// strangersAdvice names what is foreign below dataset and what the operator
// can do about it.
func strangersAdvice(parent, dataset string, strangers []string) string {
	what := fmt.Sprintf("%q", strangers[0])
	if len(strangers) > 1 {
		what = fmt.Sprintf("%q and %d more", strangers[0], len(strangers)-1)
	}
	advice := fmt.Sprintf("move or destroy it (zfs rename / zfs destroy %s)", strangers[0])
	if strings.ContainsAny(strangers[0], "@#") {
		advice = fmt.Sprintf("destroy or rename it (zfs destroy %s); if an auto-snapshot tool made it, exclude the parent "+
			"(zfs set com.sun:auto-snapshot=false %s)", strangers[0], parent)
	}
	return fmt.Sprintf("%s below %s is not nomad-device-zfs's, and the plugin never destroys, renames or rolls back "+
		"what it does not own; %s, and the plugin goes on by itself", what, dataset, advice)
}
