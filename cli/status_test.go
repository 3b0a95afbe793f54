package cli

import (
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/nomad-device-zfs/nomad-device-zfs/internal/nomadfake"
	"github.com/nomad-device-zfs/nomad-device-zfs/model"
	"github.com/nomad-device-zfs/nomad-device-zfs/zfs"
)

// statusRig: scratch-1 held by allocA (running in Nomad), and the data of
// allocB, which ran on scratch-2, retained by policy snapshot.
func statusRig(t *testing.T, parent string) (*env, string, *nomadfake.Server) {
	t.Helper()
	f, c := fakeHost(t)
	n := newFakeNomad(t)
	cfg := agentFile(t, t.TempDir(), pluginBody(parent, n.URL(), `token = "`+tokenFull+`"`, `release { policy = "snapshot" }`))
	st := settingsOf(t, cfg)
	if parent == "tank/nomad" {
		p := startPlugin(t, st.Slots, c, time.Hour)
		hold(t, c, slot1, allocA, 10)
		hold(t, c, "tank/nomad/scratch/scratch-2", allocB, 11)
		p.setAllocs(model.Alloc{ID: allocB, ClientStatus: "complete", CreateIndex: 11,
			Devices: []model.Device{{Task: "t", Vendor: "zfs", Type: "dataset", Name: "scratch", IDs: []string{"scratch-2"}}}})
		waitFor(t, 10*time.Second, "allocB's data retained", func() bool {
			return slotOf(t, c, &st.Slots, "scratch-2").Generation == 2
		})
		addAlloc(n, allocA, "running", "scratch-1")
	}
	return &env{runner: f}, cfg, n
}

func TestStatus(t *testing.T) {
	cases := []struct {
		name   string
		parent string
		flags  []string
		want   []string // regular expressions, each matching a line
	}{
		{"held slot with its allocation, job and task", "tank/nomad", nil, []string{
			`^Parent +=  ?tank/nomad$`,
			`^Pool +=  ?tank \(ONLINE, [0-9.]+G free\)$`,
			`^ID +Class +State +Gen +Allocation +Job +Task +Status +Since +Used +Quota +Dataset$`,
			`^scratch-1 +scratch +held +1 +aaaaaaaa +job-a +t +running +3m([0-9]+s)? ago +\d+K +1G +tank/nomad/scratch/scratch-1$`,
			`^scratch-2 +scratch +ready +2 +- +- +- +- +(just now|\ds ago) +\d+K +1G +tank/nomad/scratch/scratch-2$`,
			`^tank/nomad/scratch/retained-bbbbbbbb-0000-4000-8000-00000000000b +scratch +bbbbbbbb +complete +(just now|\ds ago) +in (3d|2d23h) +\d+K$`,
		}},
		{"Nomad API down: holders by ID only", "tank/nomad", []string{"-address", "@closed@"}, []string{
			`^Nomad API += http://127.0.0.1:\d+ \(the Nomad API at http://127.0.0.1:\d+ is down \(connection refused\); job and task not shown\)$`,
			`^scratch-1 +scratch +held +1 +aaaaaaaa +- +- +- +3m([0-9]+s)? ago`,
		}},
		{"token without read-job", "tank/nomad", []string{"-token", tokenNoJob}, []string{
			`^scratch-1 +scratch +held +1 +aaaaaaaa +- +- +denied +3m([0-9]+s)? ago`,
		}},
		{"missing pool", "nopool/nomad", nil, []string{
			`^Problem += pool "nopool" not found \(parent = "nopool/nomad"\)$`,
			`^scratch-1 +scratch +missing +- +- +- +- +- +- +- +- +nopool/nomad/scratch/scratch-1$`,
			`^scratch-1 +pool "nopool" not found`,
			`^No retained data$`,
		}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			e, cfg, _ := statusRig(t, tc.parent)
			flags := append([]string(nil), tc.flags...)
			for i, f := range flags {
				if f == "@closed@" {
					flags[i] = closedAddr(t)
				}
			}
			code, out, _ := runCLI(t, e, append([]string{"status", "-config", cfg}, flags...)...)
			if code != 0 {
				t.Fatalf("exit %d", code)
			}
			for _, w := range tc.want {
				if !regexp.MustCompile(`(?m)` + w).MatchString(out) {
					t.Errorf("no line matches %s", w)
				}
			}
		})
	}
}

func TestStatusJSON(t *testing.T) {
	e, cfg, _ := statusRig(t, "tank/nomad")
	code, out, _ := runCLI(t, e, "status", "-config", cfg, "-json")
	rep := decodeJSON[statusReport](t, out)
	if code != 0 || len(rep.Slots) != 2 || len(rep.Retained) != 1 || rep.Pool == nil || rep.Pool.Health != "ONLINE" {
		t.Fatalf("exit %d, report %+v", code, rep)
	}
	h := rep.Slots[0].Holder
	if h == nil || h.ID != allocA || h.JobID != "job-a" || strings.Join(h.Tasks, ",") != "t" || h.ClientStatus != "running" || !h.Found {
		t.Fatalf("holder %+v", h)
	}
	if r := rep.Retained[0]; r.Holder != allocB || r.Expires == nil || r.Since == nil {
		t.Fatalf("retained %+v", r)
	}
}

func TestStatusRefusesAnInvalidConfig(t *testing.T) {
	cfg := agentFile(t, t.TempDir(), `parent = "tank/nomad"
class "scratch" { slots = 0 }`)
	code, _, errOut := runCLI(t, &env{}, "status", "-config", cfg)
	if code != 1 || !strings.Contains(errOut, `slots = 0: must be between 1 and 1024`) {
		t.Fatalf("exit %d", code)
	}
}

func TestParkedState(t *testing.T) {
	const ds = "tank/nomad/pg/parked-A-pg-1"
	cases := []struct {
		name string
		r    model.Retained
		want string
	}{
		{"this node's, waiting for a replacement", model.Retained{Dataset: ds, State: model.StateParked}, "parked"},
		{"a copy still arriving", model.Retained{Dataset: ds, State: model.StateReceiving, Outcome: model.OutcomeMigrated},
			"receiving a copy from its node"},
		{"a whole copy", model.Retained{Dataset: ds, State: model.StateParked, Outcome: model.OutcomeMigrated},
			"copy received, for its replacement here"},
		{"the final snapshot sent", model.Retained{Dataset: ds, State: model.StateParked, OwnSnapshots: []string{ds + "@" + model.MigrateFinal}},
			"final copy sent to its replacement's node"},
		{"the copy confirmed", model.Retained{Dataset: ds, State: model.StateParked, OwnSnapshots: []string{ds + "@" + model.Migrated}},
			"copied to its replacement's node"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			if got := parkedState(tc.r); got != tc.want {
				t.Errorf("parkedState = %q, want %q", got, tc.want)
			}
		})
	}
}

// TestStatusReplicas: a replica this node keeps of another node's held
// slot (issue 30) is shown apart from the slots and the data kept aside,
// with whose data it is and its newest snapshot, in the text and the
// JSON; the running plugin leaves it as it is.
func TestStatusReplicas(t *testing.T) {
	e, cfg, _ := statusRig(t, "tank/nomad")
	c := zfs.NewClient(e.runner)
	const source = "cccccccc-0000-4000-8000-00000000000c"
	name := makeReplica(t, c, "scratch", source, "scratch-2", 3)
	code, out, _ := runCLI(t, e, "status", "-config", cfg)
	if code != 0 {
		t.Fatalf("exit %d", code)
	}
	for _, w := range []string{
		`^Replicas of other nodes' slots: `,
		`^Dataset +Class +Allocation +Slot +Newest +Used$`,
		`^` + name + ` +scratch +cccccccc +scratch-2 +@replica-3 +\d+K$`,
		`^scratch-1 +scratch +held `,
	} {
		if !regexp.MustCompile(`(?m)` + w).MatchString(out) {
			t.Errorf("no line matches %s in\n%s", w, out)
		}
	}
	code, out, _ = runCLI(t, e, "status", "-config", cfg, "-json")
	rep := decodeJSON[statusReport](t, out)
	want := replicaJSON{Class: "scratch", Dataset: name, Source: source, Slot: "scratch-2", Newest: 3}
	if code != 0 || len(rep.Replicas) != 1 || len(rep.Slots) != 2 || len(rep.Parked) != 0 {
		t.Fatalf("exit %d, report %+v", code, rep)
	}
	if got := rep.Replicas[0]; got.Used == 0 || (replicaJSON{got.Class, got.Dataset, got.Source, got.Slot, got.Newest, 0}) != want {
		t.Errorf("replica %+v, want %+v and its space", got, want)
	}
	if rows, err := c.List(t.Context(), name, nil); err != nil || len(rows) != 4 {
		t.Errorf("the replica after status and the plugin's passes: %v, %v", rows, err)
	}
}
