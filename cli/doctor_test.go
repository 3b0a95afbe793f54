package cli

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/nomad-device-zfs/nomad-device-zfs/hooks"
	"github.com/nomad-device-zfs/nomad-device-zfs/internal/nomadfake"
	"github.com/nomad-device-zfs/nomad-device-zfs/internal/testrig"
	"github.com/nomad-device-zfs/nomad-device-zfs/model"
	"github.com/nomad-device-zfs/nomad-device-zfs/zfs"
	"github.com/nomad-device-zfs/nomad-device-zfs/zfs/zfstest"
)

// doctorCase is one host and configuration for doctor, on the fake ZFS
// (installed as executables, for the plugin doctor starts) and the fake
// Nomad API.
type doctorCase struct {
	name string
	// binary is the plugin binary's file name in plugin_dir.
	binary string
	// ctlAsPlugin puts the operator CLI there instead of the plugin;
	// ctlBeside puts it there beside the plugin.
	ctlAsPlugin, ctlBeside bool
	parent                 string
	// token is the plugin's nomad.token; nomadExtra more of its nomad block.
	token, nomadExtra string
	// apiDown points nomad.address where nothing listens.
	apiDown bool
	// block replaces the whole agent file's plugin block when set.
	block string
	// slotsExtra is added to the class block.
	classExtra string
	// noPlugin: the running plugin has not created the slots yet.
	noPlugin bool
	setup    func(t *testing.T, f *zfstest.Fake, c *zfs.Client, n *nomadfake.Server)
	// fail is the one problem doctor must report; "" means none.
	fail string
	// want are more lines of the output.
	want []string
}

func TestDoctorFakeZFS(t *testing.T) {
	cases := []doctorCase{
		{name: "good setup", want: []string{
			"✓ plugin binary @dir@/nomad-device-zfs matches its block plugin \"nomad-device-zfs\"",
			`✓ configuration valid: parent "tank/nomad", 1 class(es): scratch (2 slots, release destroy)`,
			"✓ zfs-2.1.11-1",
			`✓ pool "tank" ONLINE`,
			`✓ parent "tank/nomad" exists and is mounted`,
			`✓ class "scratch": tank/nomad/scratch is the plugin's, mounted at`,
			"2 of 2 slots created",
			`✓ token "nomad-device-zfs" (nomad.token, client; policies nomad-device-zfs)`,
			"✓ node:read: node " + nodeID + " (from /v1/agent/self) is registered",
			"✓ read-job: allocations readable in the namespaces the token sees: default",
			"✓ agent:read: node ID " + nodeID + " from /v1/agent/self",
			"Device Group     = zfs/dataset/scratch",
			"Healthy          = 2 of 2",
			"attr.quota       = 1024 MiB",
			"scratch-1  true",
			"No problems found.",
		}},
		{name: "fresh host: nothing created yet, nothing created by doctor", noPlugin: true, want: []string{
			`✓ class "scratch": tank/nomad/scratch not created yet (the plugin creates it)`,
			"scratch-1  false    not created yet (the plugin creates it; doctor changes nothing)",
			"No problems found.",
		}},
		{name: "wrong parent", parent: "tank/nomda",
			fail: `✗ parent dataset "tank/nomda" does not exist (create it: zfs create -p tank/nomda)`},
		{name: "missing pool", parent: "nopool/nomad",
			fail: `✗ pool "nopool" not found (parent = "nopool/nomad")`},
		{name: "bad token, Nomad 1.6", token: tokenUnknown,
			fail: "✗ Nomad does not know the token (nomad.token): /v1/acl/token/self answered 404; it was deleted, expired or belongs to another cluster"},
		{name: "bad token, Nomad 1.11", token: tokenUnknown,
			setup: func(t *testing.T, _ *zfstest.Fake, _ *zfs.Client, n *nomadfake.Server) {
				n.SetDialect(nomadfake.Nomad111)
			},
			fail: "✗ Nomad does not know the token (nomad.token): /v1/acl/token/self answered 403; it was deleted, expired or belongs to another cluster"},
		{name: "Nomad API down", apiDown: true,
			fail: "is down: connection refused (is the agent running, and is nomad.address its HTTP address?)"},
		{name: "binary name does not match its block", binary: "zfs-plugin",
			fail: `✗ plugin binary is named @dir@/zfs-plugin, but the block is plugin "nomad-device-zfs": the agent loads a binary only under its block's name (mv @dir@/zfs-plugin @dir@/nomad-device-zfs)`},
		{name: "the operator CLI installed as the plugin", ctlAsPlugin: true,
			fail: `✗ @dir@/nomad-device-zfs is the operator CLI (nomad-device-zfs-ctl), not the plugin: the agent could not start it; install the nomad-device-zfs binary there`},
		{name: "the operator CLI beside the plugin", ctlBeside: true,
			fail: `✗ the operator CLI @dir@/nomad-device-zfs-ctl is in plugin_dir: Nomad 1.6 launches every file there and does not start while one is no plugin (Nomad 1.7 and later skip it); move it onto the PATH (mv @dir@/nomad-device-zfs-ctl /usr/local/bin/)`},
		{name: "no plugin block", block: `plugin "raw_exec" { config { enabled = true } }`,
			fail: `✗ no plugin "nomad-device-zfs" block in @cfg@: the agent loads @dir@/nomad-device-zfs only when a plugin block names it`},
		{name: "invalid configuration", classExtra: "release { policy = \"shred\" }",
			fail: `✗ configuration invalid; the agent would refuse to start: `,
			want: []string{`release: policy = "shred": "shred" is not a release policy (destroy, rollback or snapshot)`}},
		{name: "foreign slot dataset", noPlugin: true, setup: func(t *testing.T, f *zfstest.Fake, c *zfs.Client, _ *nomadfake.Server) {
			must(t, c.Create(t.Context(), "tank/nomad/scratch", map[string]string{model.PropOwner: "tank/nomad/scratch"}))
			must(t, c.Create(t.Context(), "tank/nomad/scratch/scratch-2", nil))
		}, fail: `✗ dataset "tank/nomad/scratch/scratch-2" exists but is not owned by nomad-device-zfs; not touching it`},
		{name: "a replica of another node's slot beside the slots: counted, no problem",
			setup: func(t *testing.T, f *zfstest.Fake, c *zfs.Client, _ *nomadfake.Server) {
				makeReplica(t, c, "scratch", "bbbbbbbb-0000-4000-8000-00000000000b", "scratch-1", 2)
			},
			want: []string{"2 of 2 slots created; 1 replica of another node's slot", "No problems found."}},
		{name: "foreign child below a slot", setup: func(t *testing.T, f *zfstest.Fake, c *zfs.Client, _ *nomadfake.Server) {
			must(t, c.Create(t.Context(), "tank/nomad/scratch/scratch-1/mine", nil))
		}, fail: `✗ slot scratch-1: "tank/nomad/scratch/scratch-1/mine" below tank/nomad/scratch/scratch-1 is not nomad-device-zfs's`},
		{name: "slot mountpoint changed by hand", setup: func(t *testing.T, f *zfstest.Fake, c *zfs.Client, _ *nomadfake.Server) {
			must(t, c.Set(t.Context(), "tank/nomad/scratch/scratch-2", map[string]string{"mountpoint": "/tmp/elsewhere"}))
		}, fail: `✗ slot scratch-2: mounted at "`, want: []string{`/tmp/elsewhere", not at "`, "scratch-2  false"}},
		{name: "foreign class dataset", noPlugin: true, setup: func(t *testing.T, f *zfstest.Fake, c *zfs.Client, _ *nomadfake.Server) {
			must(t, c.Create(t.Context(), "tank/nomad/scratch", nil))
		}, fail: `✗ dataset "tank/nomad/scratch" exists but is not owned by nomad-device-zfs (no nomad-device-zfs:owner=tank/nomad/scratch); not touching it`},
		{name: "parent not mounted", setup: func(t *testing.T, f *zfstest.Fake, c *zfs.Client, _ *nomadfake.Server) {
			_, err := f.Run(t.Context(), "zfs", "unmount", "-f", "tank/nomad")
			must(t, err)
		}, fail: `✗ parent dataset "tank/nomad" is not mounted; nothing below it is mounted until it is (zfs mount tank/nomad)`},
		{name: "pool degraded", setup: func(t *testing.T, f *zfstest.Fake, _ *zfs.Client, _ *nomadfake.Server) {
			must(t, f.SetPoolHealth("tank", "DEGRADED"))
		}, fail: `✗ pool "tank" is DEGRADED`},
		{name: "token lacks node:read", token: tokenNoNode,
			fail: `✗ the token lacks node:read: GET /v1/node/` + nodeID + ` answered 403, so the plugin cannot list this node's allocations (add node { policy = "read" })`},
		{name: "token lacks read-job", token: tokenNoJob,
			fail: `✗ the token lacks read-job: GET /v1/allocations?namespace=* answered 403`},
		{name: "token lacks agent:read and no client_id_file", token: tokenNoAgent,
			fail: `✗ the token lacks agent:read, which the plugin needs to find its node ID since nomad.client_id_file is not set: GET /v1/agent/self answered 403 (add agent { policy = "read" }, or set client_id_file)`},
		{name: "client_id_file makes agent:read unneeded", token: tokenNoAgent, nomadExtra: "client_id_file = \"@clientid@\"", want: []string{
			"✓ node:read: node " + nodeID + " (from @clientid@) is registered",
			"✓ agent:read not needed: nomad.client_id_file is set",
		}},
		{name: "ACLs disabled", setup: func(t *testing.T, _ *zfstest.Fake, _ *zfs.Client, n *nomadfake.Server) { n.SetTokens(nil) },
			want: []string{"✓ ACLs are disabled: every request is allowed"}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			f, c := fakeHost(t)
			n := newFakeNomad(t)
			exe := zfstest.InstallExecutables(t, f)
			for _, kv := range exe.Env {
				k, v, _ := strings.Cut(kv, "=")
				t.Setenv(k, v)
			}
			if tc.binary == "" {
				tc.binary = "nomad-device-zfs"
			}
			dir := pluginDir(t, tc.binary)
			if tc.ctlAsPlugin {
				b, err := os.ReadFile(testrig.Ctl(t))
				must(t, err)
				must(t, os.WriteFile(filepath.Join(dir, tc.binary), b, 0o755))
			}
			if tc.ctlBeside {
				b, err := os.ReadFile(testrig.Ctl(t))
				must(t, err)
				must(t, os.WriteFile(filepath.Join(dir, "nomad-device-zfs-ctl"), b, 0o755))
			}
			if tc.parent == "" {
				tc.parent = "tank/nomad"
			}
			if tc.token == "" {
				tc.token = tokenFull
			}
			addr := n.URL()
			if tc.apiDown {
				addr = closedAddr(t)
			}
			clientID := filepath.Join(t.TempDir(), "client-id")
			must(t, os.WriteFile(clientID, []byte(nodeID+"\n"), 0o600))
			extra := strings.ReplaceAll(fmt.Sprintf("token = %q\n  %s", tc.token, tc.nomadExtra), "@clientid@", clientID)
			cfg := agentFile(t, dir, pluginBody(tc.parent, addr, extra, tc.classExtra))
			if tc.block != "" {
				must(t, os.WriteFile(cfg, []byte(fmt.Sprintf("plugin_dir = %q\n%s\n", dir, tc.block)), 0o644))
			}
			if !tc.noPlugin && tc.parent == "tank/nomad" && tc.classExtra == "" && tc.block == "" {
				// The agent's plugin has created the slots.
				st := settingsOf(t, cfg)
				newManager(t, hooks.Config{Slots: &st.Slots, ZFS: c}).Reconcile(context.Background())
			}
			if tc.setup != nil {
				tc.setup(t, f, c, n)
			}
			f.ResetCalls()

			code, out, _ := runCLI(t, &env{runner: f}, "doctor", "-config", cfg)
			expand := func(s string) string {
				return strings.NewReplacer("@dir@", dir, "@cfg@", cfg, "@clientid@", clientID).Replace(s)
			}
			fails := linesWith(out, "✗")
			switch {
			case tc.fail == "" && (code != 0 || len(fails) != 0):
				t.Errorf("exit %d with problems %q, want none", code, fails)
			case tc.fail != "" && (code != 1 || len(fails) != 1 || !strings.Contains(fails[0], expand(tc.fail))):
				t.Errorf("exit %d with problems %q, want exactly one: %q", code, fails, expand(tc.fail))
			}
			for _, w := range tc.want {
				if !strings.Contains(out, expand(w)) {
					t.Errorf("output lacks %q", expand(w))
				}
			}
			reads := map[string]bool{"zfs list": true, "zfs get": true, "zfs holds": true, "zfs version": true, "zpool list": true, "zpool get": true}
			for _, call := range f.Calls() {
				if !reads[call[0]+" "+call[1]] {
					t.Errorf("doctor changed something: %q", call)
				}
			}
			if tc.noPlugin && tc.setup == nil {
				if _, err := f.Run(t.Context(), "zfs", "list", "tank/nomad/scratch"); err == nil {
					t.Error("doctor created the class dataset")
				}
			}
		})
	}
}

func TestDoctorJSON(t *testing.T) {
	f, _ := fakeHost(t)
	exe := zfstest.InstallExecutables(t, f)
	for _, kv := range exe.Env {
		k, v, _ := strings.Cut(kv, "=")
		t.Setenv(k, v)
	}
	n := newFakeNomad(t)
	cfg := agentFile(t, pluginDir(t, "nomad-device-zfs"), pluginBody("nopool/nomad", n.URL(), fmt.Sprintf("token = %q", tokenFull), ""))
	code, out, _ := runCLI(t, &env{runner: f}, "doctor", "-config", cfg, "-json")
	rep := decodeJSON[doctorReport](t, out)
	if code != 1 || rep.OK || rep.Problems != 1 || len(rep.Devices) != 1 || len(rep.Devices[0].Instances) != 2 {
		t.Fatalf("exit %d, report %+v", code, rep)
	}
	var failed []string
	for _, c := range rep.Checks {
		if c.Status == "fail" {
			failed = append(failed, c.Section+": "+c.Message)
		}
	}
	if len(failed) != 1 || failed[0] != `ZFS: pool "nopool" not found (parent = "nopool/nomad")` {
		t.Fatalf("failed checks %q", failed)
	}
	if inst := rep.Devices[0].Instances[0]; inst.Healthy || !strings.Contains(inst.Reason, `pool "nopool" not found`) {
		t.Fatalf("instance %+v", inst)
	}
}
