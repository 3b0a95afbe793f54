package cli

import (
	"context"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/nomad-device-zfs/nomad-device-zfs/model"
	"github.com/nomad-device-zfs/nomad-device-zfs/zfs"
	"github.com/nomad-device-zfs/nomad-device-zfs/zfs/zfstest"
)

// gcRig retains the data of three allocations (policy snapshot, retain 72h,
// retain_max 10) and returns a config like the plugin's and one whose
// retain_max is 1.
func gcRig(t *testing.T) (f *zfstest.Fake, c *zfs.Client, cfg, cfgMax1 string) {
	t.Helper()
	f, c = fakeHost(t)
	n := newFakeNomad(t)
	cfg = agentFile(t, t.TempDir(), pluginBody("tank/nomad", n.URL(), "", `release { policy = "snapshot" }`))
	cfgMax1 = agentFile(t, t.TempDir(), pluginBody("tank/nomad", n.URL(), "", `release {
    policy     = "snapshot"
    retain_max = 1
  }`))
	st := settingsOf(t, cfg)
	p := startPlugin(t, st.Slots, c, time.Hour)
	ended := func(id string, index uint64, slot string) model.Alloc {
		return model.Alloc{ID: id, ClientStatus: "complete", CreateIndex: index,
			Devices: []model.Device{{Task: "t", Vendor: "zfs", Type: "dataset", Name: "scratch", IDs: []string{slot}}}}
	}
	hold(t, c, slot1, allocA, 10)
	hold(t, c, "tank/nomad/scratch/scratch-2", allocB, 11)
	p.setAllocs(ended(allocA, 10, "scratch-1"), ended(allocB, 11, "scratch-2"))
	waitFor(t, 10*time.Second, "two slots released", func() bool {
		return slotOf(t, c, &st.Slots, "scratch-1").Generation == 2 && slotOf(t, c, &st.Slots, "scratch-2").Generation == 2 &&
			retainedMarked(t, c) == 2
	})
	hold(t, c, slot1, allocC, 12)
	p.setAllocs(ended(allocA, 10, "scratch-1"), ended(allocB, 11, "scratch-2"), ended(allocC, 12, "scratch-1"))
	// Until the release's last command, the retained data's own marks
	// (after the fresh slot's create): a command the plugin still runs
	// after the rig returns would be counted as the CLI's.
	waitFor(t, 10*time.Second, "scratch-1 released again, its data retained", func() bool {
		return slotOf(t, c, &st.Slots, "scratch-1").Generation == 3 && retainedMarked(t, c) == 3
	})
	return f, c, cfg, cfgMax1
}

// retainedMarked counts the retained datasets whose own marks are written.
func retainedMarked(t *testing.T, c *zfs.Client) int {
	t.Helper()
	sets, err := c.List(context.Background(), "tank/nomad/scratch", model.UserProps)
	must(t, err)
	n := 0
	for _, d := range sets {
		if !d.IsSnapshot() && d.User.Get(model.PropOwner) == d.Name && d.User.Get(model.PropState) == string(model.StateRetained) {
			n++
		}
	}
	return n
}

func retainedLeft(t *testing.T, c *zfs.Client) []string {
	t.Helper()
	sets, err := c.List(context.Background(), "tank/nomad/scratch", nil)
	must(t, err)
	var out []string
	for _, d := range sets {
		if strings.Contains(d.Name, "/retained-") && !d.IsSnapshot() {
			out = append(out, d.Name)
		}
	}
	return out
}

func TestGC(t *testing.T) {
	later := func() time.Time { return time.Now().Add(73 * time.Hour) }
	cases := []struct {
		name     string
		maxOne   bool
		now      func() time.Time
		flags    []string
		fault    bool
		wantCode int
		want     []string // regular expressions
		left     int
	}{
		{"nothing due", false, nil, nil, false, 0,
			[]string{`^No retained data is past its retention or beyond retain_max\.$`}, 3},
		{"dry run lists the expired", false, later, []string{"-dry-run"}, false, 0, []string{
			`^Would destroy \(dry run\) 3 retained dataset\(s\)$`,
			`^Dataset +Class +Allocation +Outcome +Since +Why +Used$`,
			`^tank/nomad/scratch/retained-aaaaaaaa-0000-4000-8000-00000000000a +scratch +aaaaaaaa +complete +3d1h ago +expired (1h|59m\d+s) ago +\d+K$`,
		}, 3},
		{"gc destroys the expired", false, later, nil, false, 0, []string{
			`^Destroyed 3 retained dataset\(s\)$`,
			`^tank/nomad/scratch/retained-cccccccc-0000-4000-8000-00000000000c +scratch +cccccccc +complete`,
		}, 0},
		{"retain_max lowered in the config", true, nil, nil, false, 0, []string{
			`^Destroyed 2 retained dataset\(s\)$`,
			`beyond retain_max 1 +\d+K$`,
		}, 1},
		{"a failed destroy is reported", false, later, nil, true, 1, []string{
			`^Destroyed 2 retained dataset\(s\)$`,
		}, 1},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			f, c, cfg, cfgMax1 := gcRig(t)
			if tc.maxOne {
				cfg = cfgMax1
			}
			if tc.fault {
				f.Inject(zfstest.Fault{Cmd: "zfs", ArgsContain: []string{"destroy", "tank/nomad/scratch/retained-" + allocB},
					Stderr: "cannot destroy 'tank/nomad/scratch/retained-" + allocB + "': I/O error\n"})
			}
			f.ResetCalls()
			code, out, errOut := runCLI(t, &env{runner: f, now: tc.now}, append([]string{"gc", "-config", cfg}, tc.flags...)...)
			if code != tc.wantCode {
				t.Fatalf("exit %d, want %d", code, tc.wantCode)
			}
			for _, w := range tc.want {
				if !regexp.MustCompile(`(?m)` + w).MatchString(out) {
					t.Errorf("no line matches %s", w)
				}
			}
			if tc.fault && len(linesWith(errOut, "✗ tank/nomad/scratch/retained-"+allocB+": destroying")) != 1 {
				t.Errorf("the failed destroy is not reported on one line:\n%s", errOut)
			}
			if left := retainedLeft(t, c); len(left) != tc.left {
				t.Fatalf("retained datasets left: %q, want %d", left, tc.left)
			}
			for _, call := range f.Calls() {
				if call[1] != "list" && (len(tc.flags) > 0 && tc.flags[0] == "-dry-run" || tc.name == "nothing due") {
					t.Errorf("ran %q", call)
				}
				if call[1] == "destroy" && !strings.Contains(call[len(call)-1], "/retained-") {
					t.Errorf("gc destroyed something that is not retained data: %q", call)
				}
			}
		})
	}
}

func TestGCJSON(t *testing.T) {
	f, _, cfg, _ := gcRig(t)
	code, out, _ := runCLI(t, &env{runner: f, now: func() time.Time { return time.Now().Add(100 * time.Hour) }}, "gc", "-config", cfg, "-dry-run", "-json")
	rep := decodeJSON[gcReport](t, out)
	if code != 0 || !rep.DryRun || len(rep.Pruned) != 3 || rep.Pruned[0].Why != "expired" || rep.Pruned[0].Destroyed {
		t.Fatalf("exit %d, report %+v", code, rep)
	}
}

// TestGCNeverDestroysWhatIsNotThePlugins: a dataset and a snapshot someone
// made below retained data keep it alive past its retention; gc says why
// and what to do, destroys the other expired data, and exits 1.
func TestGCNeverDestroysWhatIsNotThePlugins(t *testing.T) {
	f, c, cfg, _ := gcRig(t)
	retainedA := "tank/nomad/scratch/retained-" + allocA
	must(t, c.Create(context.Background(), retainedA+"/notes", nil))
	must(t, c.Snapshot(context.Background(), retainedA+"@mine", nil))
	later := func() time.Time { return time.Now().Add(73 * time.Hour) }
	code, out, errOut := runCLI(t, &env{runner: f, now: later}, "gc", "-config", cfg)
	if code != 1 {
		t.Fatalf("exit %d, want 1\n%s%s", code, out, errOut)
	}
	if !strings.Contains(out, "Destroyed 2 retained dataset(s)") {
		t.Errorf("the other expired data was not destroyed:\n%s", out)
	}
	if lines := linesWith(errOut, "✗ "+retainedA+": not destroyed: "); len(lines) != 1 || !strings.Contains(lines[0], retainedA+"/notes") {
		t.Errorf("no line says why %s is kept:\n%s", retainedA, errOut)
	}
	if left := retainedLeft(t, c); len(left) != 2 || left[0] != retainedA {
		t.Fatalf("left %q, want %s and its foreign child", left, retainedA)
	}
	code, out, _ = runCLI(t, &env{runner: f, now: later}, "status", "-config", cfg)
	if code != 0 || !strings.Contains(out, "! "+retainedA+": ") {
		t.Errorf("status does not show why %s is kept (exit %d):\n%s", retainedA, code, out)
	}
}
