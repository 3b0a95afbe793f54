package hooks

import (
	"strings"
	"testing"
	"time"

	"github.com/nomad-device-zfs/nomad-device-zfs/model"
)

// TestReceiverOnTheCutoversPath: the receiving node's zfs commands from
// the final increment to the copy marked claimable (docs/performance.md,
// the cutover against its floor). Once the final snapshot is in, the
// older pre-copy snapshot stays for the claim to drop (one release and one
// destroy with the final one), and the request for "complete" reads no
// resume token: the sender answers it from the base alone.
func TestReceiverOnTheCutoversPath(t *testing.T) {
	class := model.Class{Name: "pg", Slots: 1, MountPath: "/data", Sticky: true, StickyWait: time.Hour,
		Migrate: model.Migrate{Enabled: true, Timeout: time.Minute, OnTimeout: model.MigrateFail}}
	c := &cluster{}
	n1 := newMigrationNode(t, c, "node-1", class)
	n2 := newMigrationNode(t, c, "node-2", class)
	n2.m.fetcher = directFetcher{source: n1.m.Sender(), from: n1.c, to: n2.c}
	a, b := placeReplacement(t, c, n1, "A's data")
	ctx := t.Context()
	n2.m.storeSnapshot(nodeAllocs{c: c, node: "node-2"}.snap())
	n2.m.lookupPredecessors(ctx)
	migs, _ := model.Migrations(n2.m.cfg, n2.m.snapshot())
	if len(migs) != 1 {
		t.Fatalf("migrations: %v", migs)
	}
	mg := migs[0]
	if got := pullRound(t, n2.m, mg); got.Kind != model.MoveWait || got.For != model.PullEvery || got.Retry != nil {
		t.Fatalf("the pre-copy: the round ends %s (%s) after %s, error %v", got.Kind, got.Phase, got.For, got.Retry)
	}
	a.ClientStatus = "complete"
	c.set(a, b)
	waitUntil(t, 30*time.Second, "A's data parked on node 1", func() bool {
		n1.settle(t, c, "node-1")
		p, _ := n1.m.readParked(ctx, "tank/nomad/pg/parked-A-pg-1")
		return p != nil && p.State == model.StateParked
	})
	const copyName = "tank/nomad/pg/parked-A-pg-1"
	steps := []struct {
		name     string
		want     string // how the round ends
		commands []string
	}{
		{name: "the final increment: no drop of the pre-copy", want: "wait 0s",
			commands: []string{"list", "list", "receive", "list"}}, // the copy, its resume token, the increment, the copy
		{name: "complete: no resume token read", want: "done",
			commands: []string{"list", "set"}},
	}
	for _, st := range steps {
		t.Run(st.name, func(t *testing.T) {
			end := pullRoundFrom(t, n2.m, mg, n2.f.ResetCalls)
			got := end.Kind.String()
			if end.Kind == model.MoveWait {
				got += " " + end.For.String()
			}
			if got != st.want || end.Retry != nil {
				t.Fatalf("the round ends %s (%s), error %v; want %s", got, end.Phase, end.Retry, st.want)
			}
			var verbs []string
			for _, call := range n2.f.Calls() {
				verbs = append(verbs, call[1])
			}
			if strings.Join(verbs, " ") != strings.Join(st.commands, " ") {
				t.Errorf("zfs commands %q, want %q", n2.f.Calls(), st.commands)
			}
		})
	}
	rows, err := n2.c.List(ctx, copyName, model.UserProps)
	if err != nil {
		t.Fatal(err)
	}
	var snaps []string
	for _, r := range rows[1:] {
		snaps = append(snaps, r.Name)
	}
	if want := []string{copyName + "@migrate-1", copyName + "@migrate-final"}; strings.Join(snaps, " ") != strings.Join(want, " ") {
		t.Errorf("the claimable copy's snapshots: %v, want %v (the claim drops them)", snaps, want)
	}
}
