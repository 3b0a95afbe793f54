package model

import (
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/nomad-device-zfs/nomad-device-zfs/zfs"
)

func TestDecideSend(t *testing.T) {
	const ds = "tank/nomad/pg/pg-1"
	const parked = "tank/nomad/pg/parked-A-pg-1"
	row := func(name, guid string) zfs.Dataset { return zfs.Dataset{Name: name, GUID: guid} }
	live := []zfs.Dataset{row(ds, "1"), row(ds+"@pristine", "2"), row(ds+"@migrate-1", "11"), row(ds+"@migrate-2", "12")}
	parkedRows := []zfs.Dataset{row(parked, "1"), row(parked+"@migrate-1", "11"), row(parked+"@migrate-2", "12")}
	withFinal := append(append([]zfs.Dataset(nil), parkedRows...), row(parked+"@migrate-final", "13"))
	migrated := append(append([]zfs.Dataset(nil), parkedRows...), row(parked+"@migrated", "13"))
	cases := []struct {
		name string
		in   SendInput
		want string // Send as "take T send S from F", "complete", or an error's words
	}{
		{name: "first request while the holder runs: a full stream of a new pre-copy snapshot",
			in:   SendInput{Dataset: ds, Rows: live[:2]},
			want: "take @migrate-1 send @migrate-1 from -"},
		{name: "the receiver holds a pre-copy: the increment from it to a new one",
			in:   SendInput{Dataset: ds, Rows: live[:3], HaveGUID: 11},
			want: "take @migrate-2 send @migrate-2 from @migrate-1 drop -"},
		{name: "the receiver did not keep the newer pre-copy sent last time: sent again, not another taken",
			in:   SendInput{Dataset: ds, Rows: live, HaveGUID: 11},
			want: "take - send @migrate-2 from @migrate-1 drop -"},
		{name: "the receiver holds the newest pre-copy: a new one, the older dropped",
			in:   SendInput{Dataset: ds, Rows: live, HaveGUID: 12},
			want: "take @migrate-3 send @migrate-3 from @migrate-2 drop @migrate-1"},
		{name: "a base the data no longer has: a full stream",
			in:   SendInput{Dataset: ds, Rows: live, HaveGUID: 99},
			want: "take - send @migrate-2 from - drop @migrate-1"},
		{name: "the pristine snapshot is never a base: it is not a migration's",
			in:   SendInput{Dataset: ds, Rows: live, HaveGUID: 2},
			want: "take - send @migrate-2 from - drop @migrate-1"},
		{name: "parked: the final snapshot, from the receiver's pre-copy",
			in:   SendInput{Dataset: parked, Rows: parkedRows, Final: true, HaveGUID: 12},
			want: "take @migrate-final send @migrate-final from @migrate-2"},
		{name: "parked, final taken already (a resend): not taken again",
			in:   SendInput{Dataset: parked, Rows: withFinal, Final: true, HaveGUID: 11},
			want: "take - send @migrate-final from @migrate-1"},
		{name: "the receiver names the final snapshot: complete, the pre-copies left to the policy",
			in:   SendInput{Dataset: parked, Rows: withFinal, Final: true, HaveGUID: 13},
			want: "complete drop -"},
		{name: "parked: the final snapshot from a newer pre-copy, the older left to the policy",
			in:   SendInput{Dataset: parked, Rows: withFinal, Final: true, HaveGUID: 12},
			want: "take - send @migrate-final from @migrate-2 drop -"},
		{name: "an interrupted receive of a pre-copy resumes it",
			in:   SendInput{Dataset: ds, Rows: live, HaveGUID: 11, Token: &Resume{ToGUID: 12, FromGUID: 11}},
			want: "take - send @migrate-2 from @migrate-1"},
		{name: "a token from another base is not resumed: a new snapshot",
			in:   SendInput{Dataset: ds, Rows: live, HaveGUID: 11, Token: &Resume{ToGUID: 12}},
			want: "take - send @migrate-2 from @migrate-1 drop -"},
		{name: "a token naming a snapshot that is not the data's own is not resumed",
			in:   SendInput{Dataset: ds, Rows: live, Token: &Resume{ToGUID: 2}},
			want: "take - send @migrate-2 from - drop @migrate-1"},
		{name: "parked: a token for a pre-copy is not resumed, the final state is sent",
			in:   SendInput{Dataset: parked, Rows: withFinal, Final: true, HaveGUID: 11, Token: &Resume{ToGUID: 12, FromGUID: 11}},
			want: "take - send @migrate-final from @migrate-1"},
		// Once the receiver has named the final snapshot, its copy is whole
		// and the original goes by the class's policy: a request after that
		// (its pull still running after the replacement claimed the copy,
		// which renames it away) must not get the whole data again.
		{name: "migrated: the receiver names the final snapshot again: complete",
			in:   SendInput{Dataset: parked, Rows: migrated, Final: true, HaveGUID: 13},
			want: "complete"},
		{name: "migrated: a request from nothing gets nothing, not a whole stream",
			in:   SendInput{Dataset: parked, Rows: migrated, Final: true},
			want: "holds its final copy"},
		{name: "migrated: a request from a pre-copy gets nothing",
			in:   SendInput{Dataset: parked, Rows: migrated, Final: true, HaveGUID: 12},
			want: "holds its final copy"},
		{name: "migrated: a token for the final snapshot is not resumed",
			in:   SendInput{Dataset: parked, Rows: migrated, Final: true, HaveGUID: 12, Token: &Resume{ToGUID: 13, FromGUID: 12}},
			want: "holds its final copy"},
		{name: "a guid that is not a number is an error, not a guess",
			in:   SendInput{Dataset: ds, Rows: []zfs.Dataset{row(ds+"@migrate-1", "x")}},
			want: `guid "x"`},
	}
	short := func(name string) string {
		if name == "" {
			return "-"
		}
		return name[strings.IndexByte(name, '@'):]
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			s, err := DecideSend(tc.in)
			var got string
			switch {
			case err != nil:
				got = err.Error()
			default:
				got = "take " + short(s.Take) + " send " + short(s.Options.Snapshot) + " from " + short(s.Options.From)
				if s.Complete {
					got = "complete"
				}
				var drop []string
				for _, d := range s.Drop {
					drop = append(drop, short(d))
				}
				got += " drop " + short(strings.Join(drop, ","))
			}
			if !strings.Contains(got, tc.want) {
				t.Errorf("DecideSend = %q, want %q", got, tc.want)
			}
		})
	}
}

func TestDecideInheritAcrossNodes(t *testing.T) {
	migrating := Class{Name: "pg", Sticky: true, Migrate: Migrate{Enabled: true, Timeout: time.Minute, OnTimeout: MigrateFail}}
	startEmpty := migrating
	startEmpty.Migrate.OnTimeout = MigrateStartEmpty
	notMigrating := Class{Name: "pg", Sticky: true}
	prev := Alloc{ID: "A", NodeID: "node-1"}
	caller := Alloc{ID: "B", NodeID: "node-2", PreviousAllocation: "A"}
	copyOf := func(state State) *Retained {
		return &Retained{Dataset: "tank/nomad/pg/parked-A-pg-1", State: state, Holder: "A", Outcome: OutcomeMigrated}
	}
	cases := []struct {
		name   string
		class  Class
		parked *Retained
		waited time.Duration
		want   InheritKind
	}{
		{name: "the final copy is here: claim", class: migrating, parked: copyOf(StateParked), want: InheritClaim},
		{name: "the copy is still arriving: wait", class: migrating, parked: copyOf(StateReceiving), waited: time.Second, want: InheritWait},
		{name: "no copy yet: wait", class: migrating, waited: time.Second, want: InheritWait},
		{name: "still arriving past the timeout, fail: fail the start", class: migrating, parked: copyOf(StateReceiving),
			waited: time.Minute, want: InheritFail},
		{name: "none past the timeout, start_empty: start empty", class: startEmpty, waited: 2 * time.Minute, want: InheritNone},
		{name: "a class that does not migrate starts empty at once", class: notMigrating, want: InheritNone},
		{name: "a partial copy is never claimed, even past the timeout", class: startEmpty, parked: copyOf(StateReceiving),
			waited: time.Hour, want: InheritNone},
		// Seed 73 of the two-node simulation: the replacement started
		// empty at once, with on_timeout = "fail".
		{name: "a copy refused for the datasets below it, fail: wait, then fail the start", class: migrating,
			parked: withStranger(copyOf(StateReceiving)), waited: time.Second, want: InheritWait},
		{name: "a copy refused for the datasets below it past the timeout, fail: fail the start", class: migrating,
			parked: withStranger(copyOf(StateReceiving)), waited: time.Minute, want: InheritFail},
		{name: "a copy refused for the datasets below it past the timeout, start_empty: start empty", class: startEmpty,
			parked: withStranger(copyOf(StateReceiving)), waited: time.Minute, want: InheritNone},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			d := DecideInherit(InheritInput{Class: tc.class, Slot: Slot{ID: "pg-2"}, Caller: caller, Prev: prev,
				Parked: tc.parked, NodeID: "node-2", Waited: tc.waited})
			if d.Kind != tc.want {
				t.Errorf("DecideInherit = %v (%s), want %v", d.Kind, d.Reason, tc.want)
			}
		})
	}
}

// withStranger is p with a dataset below it that is not the plugin's.
func withStranger(p *Retained) *Retained {
	p.Strangers = []string{p.Dataset + "/from-a-peer"}
	return p
}

func TestMigrations(t *testing.T) {
	cfg := &Config{Parent: "tank/nomad", Classes: []Class{
		{Name: "pg", Slots: 2, Sticky: true, Migrate: Migrate{Enabled: true, Timeout: time.Minute}},
		{Name: "scratch", Slots: 2, Sticky: true}}}
	on := func(id, node, class, client, prev string, slots ...string) Alloc {
		return Alloc{ID: id, NodeID: node, ClientStatus: client, DesiredStatus: "run", PreviousAllocation: prev,
			Devices: []Device{{Task: "t", Vendor: Vendor, Type: DeviceType, Name: class, IDs: slots}}}
	}
	a := on("A", "node-1", "pg", "running", "", "pg-2")
	cases := []struct {
		name string
		snap *Snapshot
		want string // "slot<-prev:prevslot@node into name" each; "need X"
	}{
		{name: "a replacement here of one there: pull its slot's data",
			snap: &Snapshot{NodeID: "node-2", Allocs: []Alloc{on("B", "node-2", "pg", "pending", "A", "pg-1")}, Others: []Alloc{a}},
			want: "pg-1<-A:pg-2@node-1 into tank/nomad/pg/parked-A-pg-2"},
		{name: "its predecessor not looked up yet: look it up",
			snap: &Snapshot{NodeID: "node-2", Allocs: []Alloc{on("B", "node-2", "pg", "pending", "A", "pg-1")}},
			want: "need A"},
		{name: "started already: nothing more comes",
			snap: &Snapshot{NodeID: "node-2", Allocs: []Alloc{on("B", "node-2", "pg", "running", "A", "pg-1")}, Others: []Alloc{a}}},
		{name: "a replacement on the same node: sticky's business, not a migration",
			snap: &Snapshot{NodeID: "node-1", Allocs: []Alloc{a, on("B", "node-1", "pg", "pending", "A", "pg-1")}}},
		{name: "a class that does not migrate",
			snap: &Snapshot{NodeID: "node-2", Allocs: []Alloc{on("B", "node-2", "scratch", "pending", "A", "scratch-1")},
				Others: []Alloc{on("A", "node-1", "scratch", "running", "", "scratch-1")}}},
		{name: "a replacement being stopped: nothing",
			snap: &Snapshot{NodeID: "node-2", Allocs: []Alloc{func() Alloc { b := on("B", "node-2", "pg", "pending", "A", "pg-1"); b.DesiredStatus = "stop"; return b }()},
				Others: []Alloc{a}}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			migs, need := Migrations(cfg, tc.snap)
			var got []string
			for _, m := range migs {
				got = append(got, m.Slot+"<-"+m.Previous.ID+":"+m.PrevSlot+"@"+m.Node+" into "+m.ParkedName)
			}
			for _, n := range need {
				got = append(got, "need "+n)
			}
			if g := strings.Join(got, "; "); g != tc.want {
				t.Errorf("Migrations = %q, want %q", g, tc.want)
			}
		})
	}
}

// TestPreCopySnapshotsStayFew: whatever a peer asks while the holder
// runs (from nothing, from a base it has, from a guid it made up, again
// and again), the data never carries more than two pre-copy snapshots
// (issue 28: 50 requests from nothing took and held 50).
func TestPreCopySnapshotsStayFew(t *testing.T) {
	const ds = "tank/nomad/pg/pg-1"
	rows := []zfs.Dataset{{Name: ds, GUID: "1"}}
	guid := uint64(100)
	have := uint64(0) // what an honest receiver holds
	for i := range 200 {
		var ask uint64
		switch i % 4 {
		case 0:
			ask = 0 // from nothing
		case 1:
			ask = have
		case 2:
			ask = 7 // a guid of nothing here
		case 3:
			ask = have
		}
		d, err := DecideSend(SendInput{Dataset: ds, Rows: rows, HaveGUID: ask})
		if err != nil {
			t.Fatalf("request %d: %v", i, err)
		}
		if d.Take != "" {
			guid++
			rows = append(rows, zfs.Dataset{Name: d.Take, GUID: strconv.FormatUint(guid, 10)})
		}
		rows = slices.DeleteFunc(rows, func(r zfs.Dataset) bool { return slices.Contains(d.Drop, r.Name) })
		var sent uint64
		var pre []string
		for _, r := range rows {
			if r.Name == d.Options.Snapshot {
				sent, _ = strconv.ParseUint(r.GUID, 10, 64)
			}
			if strings.Contains(r.Name, "@migrate-") {
				pre = append(pre, r.Name)
			}
		}
		if sent == 0 {
			t.Fatalf("request %d: sends %s, which is not there (rows %v)", i, d.Options.Snapshot, rows)
		}
		if len(pre) > 2 {
			t.Fatalf("request %d (from %d): %d pre-copy snapshots: %v", i, ask, len(pre), pre)
		}
		if i%4 == 1 || i%4 == 3 {
			have = sent // the honest receiver kept what it was sent
		}
	}
}

func TestCopyOverLimits(t *testing.T) {
	withProps := func(p map[string]string) Class { return Class{Name: "pg", Properties: p} }
	cases := []struct {
		name  string
		class Class
		ref   uint64
		want  string
	}{
		{name: "no limits", class: withProps(nil), ref: 1 << 40},
		{name: "under the quota", class: withProps(map[string]string{"quota": "100M"}), ref: 99 << 20},
		{name: "at the quota", class: withProps(map[string]string{"quota": "100M"}), ref: 100 << 20},
		{name: "over the quota", class: withProps(map[string]string{"quota": "100M"}), ref: 101 << 20,
			want: "more than the class's quota 100M"},
		{name: "over the refquota", class: withProps(map[string]string{"refquota": "1G", "quota": "10G"}), ref: 2 << 30,
			want: "more than the class's refquota 1G"},
		{name: "quota none", class: withProps(map[string]string{"quota": "none"}), ref: 1 << 40},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			got := CopyOverLimits(tc.class, zfs.Dataset{Name: "tank/nomad/pg/parked-A-pg-1", Referenced: tc.ref})
			if (tc.want == "") != (got == "") || !strings.Contains(got, tc.want) {
				t.Errorf("CopyOverLimits = %q, want %q", got, tc.want)
			}
		})
	}
}

func TestCopyNotOneFilesystem(t *testing.T) {
	const name = "tank/nomad/pg/parked-A-pg-1"
	row := func(n, typ string) zfs.Dataset { return zfs.Dataset{Name: n, Type: typ} }
	cases := []struct {
		name string
		rows []zfs.Dataset
		want string
		drop bool // the copy is dropped, not left
	}{
		{name: "one filesystem and its snapshots",
			rows: []zfs.Dataset{row(name, zfs.DatasetFilesystem), row(name+"@migrate-1", zfs.DatasetSnapshot)}},
		{name: "a child from a replication stream",
			rows: []zfs.Dataset{row(name, zfs.DatasetFilesystem), row(name+"/evil", zfs.DatasetFilesystem),
				row(name+"/evil@migrate-1", zfs.DatasetSnapshot)},
			want: "1 dataset(s) below the copy (" + name + "/evil)"},
		{name: "a sibling whose name starts alike is not below it",
			rows: []zfs.Dataset{row(name, zfs.DatasetFilesystem), row(name+"x", zfs.DatasetFilesystem)}},
		{name: "a volume: its snapshots listed, not itself",
			rows: []zfs.Dataset{row(name+"@migrate-1", zfs.DatasetSnapshot)},
			want: "a volume (zvol), not a filesystem", drop: true},
		{name: "a volume listed as one",
			rows: []zfs.Dataset{row(name, zfs.DatasetVolume), row(name+"@migrate-1", zfs.DatasetSnapshot)},
			want: "a volume (zvol), not a filesystem", drop: true},
		{name: "nothing received yet",
			rows: nil},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			got, drop := CopyNotOneFilesystem(name, tc.rows)
			if (tc.want == "") != (got == "") || !strings.Contains(got, tc.want) || drop != tc.drop {
				t.Errorf("CopyNotOneFilesystem = %q, %v; want %q, %v", got, drop, tc.want, tc.drop)
			}
		})
	}
}

// TestSendsFinal: a snapshot of the data is its copy's last state only
// once it is renamed aside as its holder ended: parked, or still in the
// release's state while the park creates the fresh slot; never a copy
// from another node, nor another allocation's data, nor retained data.
func TestSendsFinal(t *testing.T) {
	cases := []struct {
		name string
		r    Retained
		want bool
	}{
		{name: "parked", r: Retained{Holder: "A", State: StateParked, Outcome: OutcomeComplete}, want: true},
		{name: "renamed aside, the park still running", r: Retained{Holder: "A", State: StateReleasing, Outcome: OutcomeComplete}, want: true},
		{name: "another allocation's", r: Retained{Holder: "C", State: StateParked, Outcome: OutcomeComplete}},
		{name: "a copy received from another node", r: Retained{Holder: "A", State: StateParked, Outcome: OutcomeMigrated}},
		{name: "a copy still arriving", r: Retained{Holder: "A", State: StateReceiving, Outcome: OutcomeMigrated}},
		{name: "retained by the snapshot policy", r: Retained{Holder: "A", State: StateRetained, Outcome: OutcomeComplete}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			if got := tc.r.SendsFinal("A"); got != tc.want {
				t.Errorf("SendsFinal = %v, want %v", got, tc.want)
			}
		})
	}
}
