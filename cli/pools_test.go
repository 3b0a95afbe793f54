package cli

import (
	"context"
	"fmt"
	"regexp"
	"strings"
	"testing"

	"github.com/nomad-device-zfs/nomad-device-zfs/hooks"
	"github.com/nomad-device-zfs/nomad-device-zfs/model"
	"github.com/nomad-device-zfs/nomad-device-zfs/zfs/zfstest"
)

// Two pools: class scratch below the block's parent tank/nomad, class fast
// below its own, nvme/nomad.

// twoPoolHost is the fake host with both pools, the agent file of a plugin
// block with both classes, and the slots the agent's plugin made.
func twoPoolHost(t *testing.T, dir string) (*zfstest.Fake, string) {
	t.Helper()
	f, c := fakeHost(t)
	must(t, f.AddPool("nvme", 1<<30))
	must(t, c.Create(t.Context(), "nvme/nomad", nil))
	n := newFakeNomad(t)
	cfg := agentFile(t, dir, pluginBody("tank/nomad", n.URL(), fmt.Sprintf("token = %q", tokenFull), "")+`
class "fast" {
  parent = "nvme/nomad"
  mount  = "/fast"
}`)
	st := settingsOf(t, cfg)
	newManager(t, hooks.Config{Slots: &st.Slots, ZFS: c}).Reconcile(context.Background())
	return f, cfg
}

func TestDoctorTwoPools(t *testing.T) {
	cases := []struct {
		name  string
		setup func(t *testing.T, f *zfstest.Fake)
		// fail is the one problem doctor must report; "" means none.
		fail string
		want []string
	}{
		{name: "both pools online", want: []string{
			`✓ configuration valid: parent "tank/nomad", 2 class(es): fast (1 slots, release destroy, parent nvme/nomad), scratch (2 slots, release destroy)`,
			`✓ pool "tank" ONLINE`,
			`✓ parent "tank/nomad" exists and is mounted`,
			`✓ pool "nvme" ONLINE`,
			`✓ parent "nvme/nomad" exists and is mounted`,
			`✓ class "fast": nvme/nomad/fast is the plugin's, mounted at`,
			`✓ class "scratch": tank/nomad/scratch is the plugin's, mounted at`,
			"attr.pool        = nvme",
			"Healthy          = 1 of 1",
			"Healthy          = 2 of 2",
		}},
		{name: "the second pool degraded", setup: func(t *testing.T, f *zfstest.Fake) { must(t, f.SetPoolHealth("nvme", "DEGRADED")) },
			fail: `✗ pool "nvme" is DEGRADED`, want: []string{
				`✓ parent "tank/nomad" exists and is mounted`,
				`✓ class "scratch": tank/nomad/scratch is the plugin's`,
				"Healthy          = 0 of 1",
				"Healthy          = 2 of 2",
				`fast-1    false    pool "nvme" is DEGRADED`,
			}},
		{name: "the second parent missing", setup: func(t *testing.T, f *zfstest.Fake) {
			_, err := f.Run(t.Context(), "zfs", "destroy", "-r", "nvme/nomad")
			must(t, err)
		}, fail: `✗ parent dataset "nvme/nomad" does not exist (create it: zfs create -p nvme/nomad)`, want: []string{
			`✓ class "scratch": tank/nomad/scratch is the plugin's`,
		}},
		{name: "a class moved to another parent left its dataset", setup: func(t *testing.T, f *zfstest.Fake) {
			_, err := f.Run(t.Context(), "zfs", "create", "-o", model.PropOwner+"=nvme/nomad/scratch", "nvme/nomad/scratch")
			must(t, err)
		}, want: []string{
			`! nvme/nomad/scratch is the plugin's dataset of class "scratch", which is below tank/nomad now: the plugin leaves it alone`,
		}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			dir := pluginDir(t, "nomad-device-zfs")
			f, cfg := twoPoolHost(t, dir)
			exe := zfstest.InstallExecutables(t, f)
			for _, kv := range exe.Env {
				k, v, _ := strings.Cut(kv, "=")
				t.Setenv(k, v)
			}
			if tc.setup != nil {
				tc.setup(t, f)
			}
			f.ResetCalls()
			code, out, _ := runCLI(t, &env{runner: f}, "doctor", "-config", cfg)
			fails := linesWith(out, "✗")
			switch {
			case tc.fail == "" && (code != 0 || len(fails) != 0):
				t.Errorf("exit %d with problems %q, want none", code, fails)
			case tc.fail != "" && (code != 1 || len(fails) != 1 || !strings.Contains(fails[0], tc.fail)):
				t.Errorf("exit %d with problems %q, want exactly one: %q", code, fails, tc.fail)
			}
			for _, w := range tc.want {
				if !strings.Contains(out, w) {
					t.Errorf("output lacks %q", w)
				}
			}
			for _, call := range f.Calls() {
				if call[1] != "list" && call[1] != "get" && call[1] != "version" && call[1] != "holds" {
					t.Errorf("doctor changed something: %q", call)
				}
			}
		})
	}
}

func TestStatusTwoPools(t *testing.T) {
	f, cfg := twoPoolHost(t, t.TempDir())
	// scratch's class dataset from when it lived below nvme/nomad.
	_, err := f.Run(t.Context(), "zfs", "create", "-o", model.PropOwner+"=nvme/nomad/scratch", "nvme/nomad/scratch")
	must(t, err)
	must(t, f.SetPoolHealth("nvme", "DEGRADED"))
	code, out, _ := runCLI(t, &env{runner: f}, "status", "-config", cfg)
	if code != 0 {
		t.Fatalf("exit %d", code)
	}
	for _, w := range []string{
		`^Parent +=  ?tank/nomad \(class scratch\)$`,
		`^Pool +=  ?tank \(ONLINE, [0-9.]+G free\)$`,
		`^Parent +=  ?nvme/nomad \(class fast\)$`,
		`^Pool +=  ?nvme \(DEGRADED, [0-9.]+[MG] free\)$`,
		`^Problem += pool "nvme" is DEGRADED$`,
		`^fast-1 +fast +ready +1 .* nvme/nomad/fast/fast-1$`,
		`^scratch-1 +scratch +ready +1 .* tank/nomad/scratch/scratch-1$`,
		`^fast-1 +pool "nvme" is DEGRADED$`,
		`^Left behind += nvme/nomad/scratch \(its class is below another parent now; the plugin leaves it alone`,
	} {
		if !regexp.MustCompile(`(?m)` + w).MatchString(out) {
			t.Errorf("no line matches %s", w)
		}
	}
	if strings.Contains(out, "scratch-1  pool") || strings.Contains(out, "scratch-2  pool") {
		t.Error("the block's class is reported unhealthy for the other pool")
	}

	_, out, _ = runCLI(t, &env{runner: f}, "status", "-config", cfg, "-json")
	rep := decodeJSON[statusReport](t, out)
	if len(rep.Parents) != 2 || rep.Parent != "tank/nomad" || rep.Problem != "" || rep.Pool == nil || rep.Pool.Name != "tank" {
		t.Fatalf("report: parent %q problem %q pool %+v parents %+v", rep.Parent, rep.Problem, rep.Pool, rep.Parents)
	}
	nv := rep.Parents[1]
	if nv.Parent != "nvme/nomad" || nv.Pool == nil || nv.Pool.Health != "DEGRADED" || nv.Problem != `pool "nvme" is DEGRADED` ||
		strings.Join(nv.Classes, ",") != "fast" || strings.Join(nv.Moved, ",") != "nvme/nomad/scratch" {
		t.Errorf("second parent %+v", nv)
	}
}
