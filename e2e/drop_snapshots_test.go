//go:build e2e

package e2e

import (
	"errors"
	"strings"
	"testing"

	"github.com/nomad-device-zfs/nomad-device-zfs/model"
	"github.com/nomad-device-zfs/nomad-device-zfs/zfs"
)

// TestSeveralSnapshotsInOneCommand: the command forms the cutover's plans
// use to drop a dataset's snapshots (zfs.SnapshotList), on real OpenZFS
// through the project's client, with what each failure means to the plan
// (model.Op's Done): one zfs release of several snapshots, one of them
// without the hold or gone; one zfs destroy of several, all or none when
// one is held, the missing ones skipped, and all missing read as gone.
// The captures behind the fake are zfs/testdata/openzfs-2.1.11/multi-*.
func TestSeveralSnapshotsInOneCommand(t *testing.T) {
	t.Parallel()
	p := newPool(t, "e2emulti", false)
	ctx := t.Context()
	ds := p.Parent + "/d"
	run(t, "zfs", "create", ds)
	snap := func(names ...string) []string {
		var out []string
		for _, n := range names {
			out = append(out, ds+"@"+n)
		}
		return out
	}
	for _, s := range snap("a", "b", "c") {
		run(t, "zfs", "snapshot", s)
	}
	run(t, "zfs", "hold", model.HoldTag, ds+"@a")
	run(t, "zfs", "hold", model.HoldTag, ds+"@b")
	list := func(snaps []string) string {
		l, err := zfs.SnapshotList(snaps)
		if err != nil {
			t.Fatal(err)
		}
		return l
	}
	exec := func(verb zfs.Verb, snaps []string) error {
		c := zfs.Command{Verb: verb, Name: list(snaps)}
		if verb == zfs.VerbRelease {
			c.Arg = model.HoldTag
		}
		return zc.Exec(ctx, c)
	}
	snapshots := func() string {
		return strings.TrimSpace(run(t, "zfs", "list", "-H", "-o", "name", "-t", "snapshot", "-r", ds))
	}

	// @c has no hold: that one fails alone (done, for the plan), the
	// others are released.
	if err := exec(zfs.VerbRelease, snap("a", "c", "b")); !errors.Is(err, zfs.ErrNotExist) {
		t.Fatalf("release of a@, c@ (no hold), b@: %v, want ErrNotExist", err)
	}
	if out := run(t, "zfs", "holds", "-H", ds+"@a", ds+"@b"); strings.TrimSpace(out) != "" {
		t.Fatalf("holds left after the release: %q", out)
	}
	// One held by someone else: nothing destroyed, busy.
	run(t, "zfs", "hold", "keep", ds+"@b")
	if err := exec(zfs.VerbDestroy, snap("a", "b", "c")); !errors.Is(err, zfs.ErrBusy) {
		t.Fatalf("destroy with b@ held: %v, want ErrBusy", err)
	}
	if got := snapshots(); got != strings.Join(snap("a", "b", "c"), "\n") {
		t.Fatalf("after a refused destroy: %q, want all three", got)
	}
	run(t, "zfs", "release", "keep", ds+"@b")
	// A missing one among them is skipped.
	if err := exec(zfs.VerbDestroy, snap("a", "gone")); err != nil {
		t.Fatalf("destroy of a@ and a missing one: %v", err)
	}
	if err := exec(zfs.VerbDestroy, snap("b", "c")); err != nil {
		t.Fatalf("destroy of b@, c@: %v", err)
	}
	if got := snapshots(); got != "" {
		t.Fatalf("snapshots left: %q", got)
	}
	// All gone, and the dataset gone: what a crash after the destroy
	// leaves, done for the plan.
	if err := exec(zfs.VerbDestroy, snap("b", "c")); !errors.Is(err, zfs.ErrNotExist) {
		t.Fatalf("destroy of snapshots already gone: %v, want ErrNotExist", err)
	}
	if err := exec(zfs.VerbRelease, snap("b", "c")); !errors.Is(err, zfs.ErrNotExist) {
		t.Fatalf("release of snapshots gone: %v, want ErrNotExist", err)
	}
	run(t, "zfs", "destroy", ds)
	if err := exec(zfs.VerbDestroy, snap("b", "c")); !errors.Is(err, zfs.ErrNotExist) {
		t.Fatalf("destroy of a gone dataset's snapshots: %v, want ErrNotExist", err)
	}
}
