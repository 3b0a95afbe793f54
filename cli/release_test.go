package cli

import (
	"context"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/nomad-device-zfs/nomad-device-zfs/hooks"
	"github.com/nomad-device-zfs/nomad-device-zfs/internal/nomadfake"
	"github.com/nomad-device-zfs/nomad-device-zfs/model"
	"github.com/nomad-device-zfs/nomad-device-zfs/zfs"
	"github.com/nomad-device-zfs/nomad-device-zfs/zfs/zfstest"
)

const slot1 = "tank/nomad/scratch/scratch-1"

// releaseRig is a fake host whose slot scratch-1 is held by allocA, a
// running test plugin, and the fake Nomad API.
type releaseRig struct {
	f     *zfstest.Fake
	c     *zfs.Client
	n     *nomadfake.Server
	cfg   string
	st    *settings
	p     *testPlugin
	slot1 string // the slot's mountpoint
}

func newReleaseRig(t *testing.T, classExtra string, startThePlugin bool) *releaseRig {
	t.Helper()
	f, c := fakeHost(t)
	n := newFakeNomad(t)
	cfg := agentFile(t, t.TempDir(), pluginBody("tank/nomad", n.URL(), `token = "`+tokenFull+`"`, classExtra))
	r := &releaseRig{f: f, c: c, n: n, cfg: cfg, st: settingsOf(t, cfg)}
	if startThePlugin {
		r.p = startPlugin(t, r.st.Slots, c, 100*time.Millisecond)
	} else {
		m := newManager(t, hooks.Config{Slots: &r.st.Slots, ZFS: c})
		m.Reconcile(t.Context())
	}
	hold(t, c, slot1, allocA, 10)
	r.slot1 = f.Mountpoint(slot1)
	must(t, os.WriteFile(filepath.Join(r.slot1, "data"), []byte("allocA's"), 0o644))
	return r
}

func (r *releaseRig) env() *env { return &env{runner: r.f, poll: 50 * time.Millisecond} }

func TestReleaseDecidesOnTheHolder(t *testing.T) {
	cases := []struct {
		name string
		// status is the holder's client status in Nomad; "" means Nomad no
		// longer knows it.
		status   string
		local    bool // the local client still has it
		apiDown  bool
		flags    []string
		wantCode int
		want     string
		released bool
	}{
		{"running holder refused", "running", true, false, nil, 1,
			"✗ refusing to release scratch-1: allocation aaaaaaaa (job job-a) is running. -force", false},
		{"pending holder refused", "pending", true, false, nil, 1, "(job job-a) is pending. -force", false},
		{"unknown holder refused", "unknown", true, false, nil, 1, "(job job-a) is unknown. -force", false},
		{"lost holder still on this node refused", "lost", true, false, nil, 1, "is lost, but this node's client still has it", false},
		{"API down refused", "complete", false, true, nil, 1,
			"cannot tell whether allocation aaaaaaaa still runs: the Nomad API at", false},
		{"API down forced", "complete", false, true, []string{"-force"}, 0, "! forced: cannot tell whether allocation aaaaaaaa still runs", true},
		{"complete holder released", "complete", true, false, nil, 0, "✓ allocation aaaaaaaa (job job-a) is complete", true},
		{"failed holder released", "failed", false, false, nil, 0, "✓ allocation aaaaaaaa (job job-a) is failed", true},
		{"garbage-collected holder released", "", false, false, nil, 0, "✓ allocation aaaaaaaa no longer exists in Nomad", true},
		{"lost holder gone from this node released", "lost", false, false, nil, 0, "is lost and no longer on this node", true},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			r := newReleaseRig(t, "", true)
			if tc.status != "" {
				addAlloc(r.n, allocA, tc.status, "scratch-1")
				r.n.SetLocal(allocA, tc.local)
			}
			args := append([]string{"release", "-config", r.cfg}, tc.flags...)
			if tc.apiDown {
				args = append(args, "-address", closedAddr(t))
			}
			code, out, errOut := runCLI(t, r.env(), append(args, "scratch-1")...)
			if code != tc.wantCode || !strings.Contains(out+errOut, tc.want) {
				t.Fatalf("exit %d, want %d with %q", code, tc.wantCode, tc.want)
			}
			s := slotOf(t, r.c, &r.st.Slots, "scratch-1")
			_, err := os.Stat(filepath.Join(r.slot1, "data"))
			if tc.released {
				if !strings.Contains(out, "✓ scratch-1 is ready again: generation 2") || s.State != model.StateReady || s.Generation != 2 || err == nil {
					t.Fatalf("not released: %+v, data still there: %v", s, err == nil)
				}
				return
			}
			if s.State != model.StateHeld || s.Holder != allocA || s.Generation != 1 || err != nil {
				t.Fatalf("a refused release changed the slot: %+v, data: %v", s, err)
			}
			if len(linesWith(errOut, "✗")) != 1 {
				t.Fatalf("want one ✗ line:\n%s", errOut)
			}
		})
	}
}

func TestReleaseRefusesWhatIsNotHeld(t *testing.T) {
	cases := []struct {
		name  string
		setup func(t *testing.T, r *releaseRig)
		id    string
		want  string
	}{
		{"ready slot", nil, "scratch-2", "✗ slot scratch-2 is ready (generation 1, no holder): nothing to release"},
		{"unknown slot", nil, "scratch-9", `✗ no slot "scratch-9" in this configuration (parent tank/nomad; slots scratch-1..2)`},
		{"not a slot ID", nil, "tank/nomad/scratch/scratch-1", `✗ no slot "tank/nomad/scratch/scratch-1"`},
		{"foreign dataset", func(t *testing.T, r *releaseRig) {
			must(t, r.c.Destroy(t.Context(), "tank/nomad/scratch/scratch-2", zfs.DestroyOptions{Recursive: true}))
			must(t, r.c.Create(t.Context(), "tank/nomad/scratch/scratch-2", nil))
		}, "scratch-2", "✗ tank/nomad/scratch/scratch-2 exists but is not owned by nomad-device-zfs; not touching it"},
		{"missing dataset", func(t *testing.T, r *releaseRig) {
			must(t, r.c.Destroy(t.Context(), "tank/nomad/scratch/scratch-2", zfs.DestroyOptions{Recursive: true}))
		}, "scratch-2", "✗ tank/nomad/scratch/scratch-2 does not exist"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			r := newReleaseRig(t, "", false)
			if tc.setup != nil {
				tc.setup(t, r)
			}
			r.f.ResetCalls()
			code, _, errOut := runCLI(t, r.env(), "release", "-config", r.cfg, tc.id)
			if code != 1 || !strings.Contains(errOut, tc.want) {
				t.Fatalf("exit %d, want 1 with %q", code, tc.want)
			}
			for _, c := range r.f.Calls() {
				if c[1] != "list" {
					t.Errorf("a refused release ran %q", c)
				}
			}
		})
	}
}

func TestReleaseByPolicySnapshotKeepsTheData(t *testing.T) {
	r := newReleaseRig(t, `release { policy = "snapshot" }`, true)
	addAlloc(r.n, allocA, "complete", "scratch-1")
	code, out, _ := runCLI(t, r.env(), "release", "-config", r.cfg, "scratch-1")
	if code != 0 || !strings.Contains(out, "Policy  = snapshot: the holder's data is kept at tank/nomad/scratch/retained-"+allocA+" for 3d") ||
		!strings.Contains(out, "generation 2") {
		t.Fatalf("exit %d", code)
	}
	b, err := os.ReadFile(filepath.Join(r.f.Mountpoint("tank/nomad/scratch/retained-"+allocA), "data"))
	if err != nil || string(b) != "allocA's" {
		t.Fatalf("retained data: %q %v", b, err)
	}
}

func TestReleaseAlreadyReleasingWaits(t *testing.T) {
	r := newReleaseRig(t, "", false)
	seen := slotOf(t, r.c, &r.st.Slots, "scratch-1")
	must(t, hooks.MarkReleasing(t.Context(), &r.st.Slots, r.c, seen, time.Now()))
	// The plugin comes back while the command waits.
	time.AfterFunc(500*time.Millisecond, func() { startPlugin(t, r.st.Slots, r.c, 100*time.Millisecond) })
	code, out, _ := runCLI(t, r.env(), "release", "-config", r.cfg, "scratch-1")
	if code != 0 || !strings.Contains(out, "Already releasing (outcome operator)") || !strings.Contains(out, "generation 2") {
		t.Fatalf("exit %d", code)
	}
}

func TestReleaseDetachDoesNotWait(t *testing.T) {
	r := newReleaseRig(t, "", false) // no plugin: nothing would ever finish it
	addAlloc(r.n, allocA, "complete", "scratch-1")
	start := time.Now()
	code, out, _ := runCLI(t, r.env(), "release", "-config", r.cfg, "-detach", "scratch-1")
	if code != 0 || !strings.Contains(out, "The plugin releases it on its next pass (scan_interval 1s)") || time.Since(start) > 5*time.Second {
		t.Fatalf("exit %d after %s", code, time.Since(start))
	}
	if s := slotOf(t, r.c, &r.st.Slots, "scratch-1"); s.State != model.StateReleasing || s.Outcome != model.OutcomeOperator || s.Holder != allocA {
		t.Fatalf("slot after -detach: %+v", s)
	}
}

func TestReleaseWaitIsBounded(t *testing.T) {
	r := newReleaseRig(t, "", false) // no plugin running
	addAlloc(r.n, allocA, "complete", "scratch-1")
	code, _, errOut := runCLI(t, r.env(), "release", "-config", r.cfg, "-wait", "300ms", "scratch-1")
	if code != 1 || !strings.Contains(errOut, "✗ scratch-1 is still releasing after") {
		t.Fatalf("exit %d", code)
	}
}

// changingRunner changes the slot under the CLI between its decision and
// its mark: on the second read of the slot, another holder appears.
type changingRunner struct {
	*zfstest.Fake
	mu    sync.Mutex
	reads int
}

func (c *changingRunner) Run(ctx context.Context, cmd string, args ...string) ([]byte, error) {
	if cmd == "zfs" && len(args) > 0 && args[0] == "list" && args[len(args)-1] == slot1 {
		c.mu.Lock()
		c.reads++
		second := c.reads == 2
		c.mu.Unlock()
		if second {
			if _, err := c.Fake.Run(ctx, "zfs", "set", model.PropHolder+"="+allocB, slot1); err != nil {
				return nil, err
			}
		}
	}
	return c.Fake.Run(ctx, cmd, args...)
}

func TestReleaseRefusesASlotThatChanged(t *testing.T) {
	r := newReleaseRig(t, "", false)
	addAlloc(r.n, allocA, "complete", "scratch-1")
	e := r.env()
	e.runner = &changingRunner{Fake: r.f}
	code, _, errOut := runCLI(t, e, "release", "-config", r.cfg, "-detach", "scratch-1")
	if code != 1 || !strings.Contains(errOut, "slot changed since it was read") || !strings.Contains(errOut, `is now held (holder "`+allocB+`"`) {
		t.Fatalf("exit %d", code)
	}
	if s := slotOf(t, r.c, &r.st.Slots, "scratch-1"); s.State != model.StateHeld {
		t.Fatalf("marked anyway: %+v", s)
	}
}

func TestReleaseJSON(t *testing.T) {
	r := newReleaseRig(t, "", true)
	addAlloc(r.n, allocA, "running", "scratch-1")
	code, out, _ := runCLI(t, r.env(), "release", "-config", r.cfg, "-json", "scratch-1")
	rep := decodeJSON[releaseReport](t, out)
	if code != 1 || rep.Safe || rep.Marked || rep.Holder == nil || rep.Holder.ClientStatus != "running" || !strings.Contains(rep.Error, "refusing") {
		t.Fatalf("exit %d, report %+v", code, rep)
	}
}
