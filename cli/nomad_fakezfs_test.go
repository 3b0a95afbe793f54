package cli

// The CLI as an operator runs it — the built binary, in a subprocess — on a
// node where a real Nomad v1.11.3 agent (ACLs on) runs the same binary as
// its plugin, from its plugin_dir, with the least-privilege token of
// docs/security.md.
// ZFS below the seam is zfstest's fake, installed as zfs and zpool
// executables on the PATH of the agent, the plugin and the CLI.

import (
	"bytes"
	"context"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/hashicorp/nomad/api"

	"github.com/nomad-device-zfs/nomad-device-zfs/internal/nomadtest"
	"github.com/nomad-device-zfs/nomad-device-zfs/internal/testrig"
	"github.com/nomad-device-zfs/nomad-device-zfs/zfs/zfstest"
)

// policyExample is the least-privilege policy of docs/security.md.
const policyExample = "../examples/nomad-device-zfs.policy.hcl"

// cliAgent is a real agent running the plugin, and the CLI binary.
type cliAgent struct {
	*nomadtest.Agent
	f   *zfstest.Fake
	exe *zfstest.Executables
	bin string
}

// run runs the CLI binary as a person would, in the agent's environment
// (the fake zfs on PATH), and returns its exit status and its output.
func (a *cliAgent) run(t *testing.T, args ...string) (int, string) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	cmd := exec.CommandContext(ctx, a.bin, args...)
	cmd.Env = a.exe.Environ()
	var out bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &out
	err := cmd.Run()
	code := 0
	if ee, ok := err.(*exec.ExitError); ok {
		code = ee.ExitCode()
	} else if err != nil {
		t.Fatalf("running the CLI: %v", err)
	}
	t.Logf("$ nomad-device-zfs-ctl %s   → exit %d\n%s", strings.Join(args, " "), code, out.String())
	return code, out.String()
}

// variant writes a copy of the agent's configuration file with old
// replaced by new, for doctor and gc to read.
func (a *cliAgent) variant(t *testing.T, old, new string) string {
	t.Helper()
	b, err := os.ReadFile(a.ConfigFile())
	must(t, err)
	if !strings.Contains(string(b), old) {
		t.Fatalf("the agent's configuration has no %q", old)
	}
	p := filepath.Join(t.TempDir(), "agent.hcl")
	must(t, os.WriteFile(p, []byte(strings.Replace(string(b), old, new, 1)), 0o644))
	return p
}

// slotProp reads a slot's property from the fake ZFS.
func (a *cliAgent) slotProp(t *testing.T, id, prop string) string {
	t.Helper()
	return testrig.SlotProp(a.f, id, prop)
}

// slotOfAlloc is the device instance an allocation was given.
func (a *cliAgent) slotOfAlloc(t *testing.T, allocID string) string {
	t.Helper()
	alloc, _, err := a.Client().Allocations().Info(allocID, nil)
	must(t, err)
	for _, tr := range alloc.AllocatedResources.Tasks {
		for _, d := range tr.Devices {
			return d.DeviceIDs[0]
		}
	}
	t.Fatalf("allocation %s holds no device", allocID)
	return ""
}

func startCLIAgent(t *testing.T) *cliAgent {
	t.Helper()
	f, _ := fakeHost(t)
	exe := zfstest.InstallExecutables(t, f)
	dataDir := t.TempDir()
	tokenFile := filepath.Join(t.TempDir(), "nomad-device-zfs.token")
	must(t, os.WriteFile(tokenFile, nil, 0o600)) // written once ACLs are bootstrapped
	cfg := `parent = "tank/nomad"
scan_interval = "2s"
nomad {
  address        = "` + nomadtest.HTTPAddrPlaceholder + `"
  token_file     = "` + tokenFile + `"
  client_id_file = "` + filepath.Join(dataDir, "client", "client-id") + `"
}
class "scratch" {
  slots = 2
  mount = "/data"
  properties {
    quota       = "1G"
    compression = "lz4"
  }
  release {
    policy = "snapshot"
  }
}`
	agent := nomadtest.Start(t, nomadtest.Config{
		DataDir: dataDir, PluginDir: pluginDir(t, "nomad-device-zfs"), PluginName: "nomad-device-zfs",
		PluginConfig: cfg, Env: exe.Env, ACL: true,
	})
	must(t, os.WriteFile(tokenFile, []byte(agent.CreateToken(t, "nomad-device-zfs", readFile(t, policyExample))), 0o600))
	agent.WaitForNodeDevice(t, "zfs", "dataset", "scratch", 2, 90*time.Second)
	return &cliAgent{Agent: agent, f: f, exe: exe, bin: ctlBinary(t)}
}

const serviceJob = `job "web" {
  group "g" {
    task "server" {
      driver = "raw_exec"
      config {
        command = "/bin/sh"
        args    = ["-c", "echo up > $ZFS_SCRATCH_HOST_PATH/state; exec sleep 600"]
      }
      resources {
        device "zfs/dataset/scratch" {}
      }
    }
  }
}`

// batchJob runs long enough for the plugin to record it as the holder,
// writes, and completes.
const batchJob = `job "%s" {
  type = "batch"
  group "g" {
    task "report" {
      driver = "raw_exec"
      config {
        command = "/bin/sh"
        args    = ["-c", "sleep 4; echo done > $ZFS_SCRATCH_HOST_PATH/report"]
      }
      resources {
        device "zfs/dataset/scratch" {}
      }
    }
  }
}`

func TestCLINomadAgentFakeZFS(t *testing.T) {
	t.Parallel() // its own agent, ports and fake host: the package's two agent tests overlap
	a := startCLIAgent(t)
	cfg := a.ConfigFile()

	t.Run("doctor passes on a good setup", func(t *testing.T) {
		code, out := a.run(t, "doctor", "-config", cfg)
		if code != 0 || len(linesWith(out, "✗")) != 0 {
			t.Fatalf("exit %d", code)
		}
		for _, w := range []string{
			`✓ token "nomad-device-zfs-token" (nomad.token_file `,
			"✓ node:read: node " + a.NodeID() + " (from " + filepath.Join(a.DataDir(), "client", "client-id") + ") is registered",
			"✓ read-job: allocations readable in the namespaces the token sees: default",
			"✓ agent:read not needed: nomad.client_id_file is set",
			"Healthy          = 2 of 2",
			"attr.quota       = 1024 MiB",
			"No problems found.",
		} {
			if !strings.Contains(out, w) {
				t.Errorf("output lacks %q", w)
			}
		}
	})

	t.Run("doctor catches each misconfiguration", func(t *testing.T) {
		badToken := filepath.Join(t.TempDir(), "token")
		must(t, os.WriteFile(badToken, []byte("0b6a3c7e-1111-4222-8333-944445555666"), 0o600))
		renamed := t.TempDir()
		b, err := os.ReadFile(builtBinary(t))
		must(t, err)
		must(t, os.WriteFile(filepath.Join(renamed, "nomad-device-zfs-linux-amd64"), b, 0o755))
		tokenLine := regexp.MustCompile(`token_file += "[^"]+"`).FindString(readFile(t, cfg))
		pluginDirLine := regexp.MustCompile(`plugin_dir += "[^"]+"`).FindString(readFile(t, cfg))
		addrLine := regexp.MustCompile(`address += "http://127.0.0.1:\d+"`).FindString(readFile(t, cfg))
		cases := []struct {
			name, old, new, want string
		}{
			{"wrong parent", `parent = "tank/nomad"`, `parent = "tank/nomda"`,
				`✗ parent dataset "tank/nomda" does not exist (create it: zfs create -p tank/nomda)`},
			{"missing pool", `parent = "tank/nomad"`, `parent = "nopool/nomad"`,
				`✗ pool "nopool" not found (parent = "nopool/nomad")`},
			{"bad token", tokenLine, `token_file = "` + badToken + `"`,
				"✗ Nomad does not know the token (nomad.token_file " + badToken + "): /v1/acl/token/self answered 40"}, // 403 (1.11), 404 (1.6)
			{"API down", addrLine, `address = "http://127.0.0.1:1"`,
				"✗ the Nomad API at http://127.0.0.1:1 is down: connection refused"},
			{"binary name does not match its block", pluginDirLine, `plugin_dir = "` + renamed + `"`,
				"✗ plugin binary is named " + renamed + `/nomad-device-zfs-linux-amd64, but the block is plugin "nomad-device-zfs"`},
		}
		for _, tc := range cases {
			t.Run(tc.name, func(t *testing.T) {
				code, out := a.run(t, "doctor", "-config", a.variant(t, tc.old, tc.new))
				fails := linesWith(out, "✗")
				if code != 1 || len(fails) != 1 || !strings.Contains(fails[0], tc.want) {
					t.Fatalf("exit %d, problems %q; want exactly one: %q", code, fails, tc.want)
				}
			})
		}
	})

	var webAlloc, webSlot string
	t.Run("status shows a held slot with its allocation, job and task", func(t *testing.T) {
		j := a.RunJob(t, serviceJob)
		stubs := a.WaitAllocs(t, *j.ID, nomadtest.AllocsWithStatus(1, api.AllocClientStatusRunning), 60*time.Second)
		webAlloc = stubs[0].ID
		webSlot = a.slotOfAlloc(t, webAlloc)
		waitFor(t, 30*time.Second, "the plugin to record the holder", func() bool { return a.slotProp(t, webSlot, "holder") == webAlloc })
		code, out := a.run(t, "status", "-config", cfg)
		row := regexp.MustCompile(`(?m)^` + webSlot + ` +scratch +held +1 +` + webAlloc[:8] + ` +web +server +running +(just now|\S+ ago) +\S+ +1G +tank/nomad/scratch/` + webSlot + `$`)
		if code != 0 || !row.MatchString(out) {
			t.Fatalf("exit %d; no row %s", code, row)
		}
	})

	t.Run("release refuses a running holder", func(t *testing.T) {
		code, out := a.run(t, "release", "-config", cfg, webSlot)
		want := "✗ refusing to release " + webSlot + ": allocation " + webAlloc[:8] + " (job web) is running."
		if code != 1 || !strings.Contains(out, want) {
			t.Fatalf("exit %d, want %q", code, want)
		}
		if a.slotProp(t, webSlot, "state") != "held" || a.slotProp(t, webSlot, "generation") != "1" {
			t.Fatal("a refused release changed the slot")
		}
	})

	// The plugin fails to start the release of a completed holder (its
	// `zfs set` that marks the slot releasing fails), so the holder has
	// ended and its slot stays held: what an operator releases by hand.
	a.f.Inject(zfstest.Fault{Cmd: "zfs", ArgsContain: []string{"set", "nomad-device-zfs:outcome=complete"},
		Stderr: "cannot set property for 'tank/nomad/scratch': pool I/O is currently suspended\n"})
	stuck := func(t *testing.T, job string) (allocID, slot string) {
		t.Helper()
		j := a.RunJob(t, strings.Replace(batchJob, "%s", job, 1))
		stubs := a.WaitAllocs(t, *j.ID, nomadtest.AllocsWithStatus(1, api.AllocClientStatusComplete), 60*time.Second)
		allocID = stubs[0].ID
		slot = a.slotOfAlloc(t, allocID)
		if h := a.slotProp(t, slot, "holder"); h != allocID {
			t.Fatalf("the plugin did not record %s as %s's holder: %q", allocID, slot, h)
		}
		time.Sleep(5 * time.Second) // two scan intervals: the plugin tried and failed
		if st := a.slotProp(t, slot, "state"); st != "held" {
			t.Fatalf("%s is %s, want held", slot, st)
		}
		return allocID, slot
	}

	t.Run("release of a completed holder the plugin did not release", func(t *testing.T) {
		allocID, slot := stuck(t, "report-1")
		code, out := a.run(t, "status", "-config", cfg)
		if !regexp.MustCompile(`(?m)^` + slot + ` +scratch +held +1 +` + allocID[:8] + ` +report-1 +report +complete `).MatchString(out) {
			t.Fatalf("status exit %d does not show the completed holder", code)
		}
		code, out = a.run(t, "release", "-config", cfg, slot)
		if code != 0 || !strings.Contains(out, "✓ allocation "+allocID[:8]+" (job report-1) is complete") ||
			!strings.Contains(out, "✓ "+slot+" is ready again: generation 2") {
			t.Fatalf("exit %d", code)
		}
		report := filepath.Join(a.f.Mountpoint("tank/nomad/scratch/retained-"+allocID), "report")
		if b, err := os.ReadFile(report); err != nil || string(b) != "done\n" {
			t.Fatalf("the holder's data was not kept by policy snapshot: %q %v", b, err)
		}
	})

	t.Run("release -force when Nomad cannot be asked", func(t *testing.T) {
		_, slot := stuck(t, "report-2")
		gen := a.slotProp(t, slot, "generation")
		code, out := a.run(t, "release", "-config", cfg, "-address", "http://127.0.0.1:1", slot)
		if code != 1 || !strings.Contains(out, "is down (connection refused)") {
			t.Fatalf("exit %d: released without asking Nomad", code)
		}
		code, out = a.run(t, "release", "-config", cfg, "-address", "http://127.0.0.1:1", "-force", slot)
		if code != 0 || !strings.Contains(out, "! forced: cannot tell whether allocation") || !strings.Contains(out, " is ready again: generation ") ||
			a.slotProp(t, slot, "generation") == gen {
			t.Fatalf("exit %d", code)
		}
	})
	a.f.ClearFaults()

	t.Run("gc -dry-run lists, gc prunes", func(t *testing.T) {
		// retain_max lowered in the configuration, before the agent is
		// restarted with it: gc applies it now.
		lowered := a.variant(t, `policy = "snapshot"`, `policy = "snapshot"
        retain_max = 1`)
		code, out := a.run(t, "gc", "-config", lowered, "-dry-run")
		if code != 0 || !strings.Contains(out, "Would destroy (dry run) 1 retained dataset(s)") || !strings.Contains(out, "beyond retain_max 1") {
			t.Fatalf("exit %d", code)
		}
		if n := len(retainedIn(t, a.f)); n != 2 {
			t.Fatalf("a dry run destroyed something: %d retained left", n)
		}
		code, out = a.run(t, "gc", "-config", lowered)
		if code != 0 || !strings.Contains(out, "Destroyed 1 retained dataset(s)") || len(retainedIn(t, a.f)) != 1 {
			t.Fatalf("exit %d, retained left %q", code, retainedIn(t, a.f))
		}
		code, out = a.run(t, "status", "-config", cfg)
		if code != 0 || len(regexp.MustCompile(`(?m)^tank/nomad/scratch/retained-\S+ +scratch +\S+ +(complete|operator) `).FindAllString(out, -1)) != 1 {
			t.Fatalf("status after gc: exit %d", code)
		}
	})
}

func retainedIn(t *testing.T, f *zfstest.Fake) []string {
	t.Helper()
	out, err := f.Run(context.Background(), "zfs", "list", "-H", "-o", "name", "-r", "tank/nomad/scratch")
	must(t, err)
	var names []string
	for _, n := range strings.Fields(string(out)) {
		if strings.Contains(n, "/retained-") {
			names = append(names, n)
		}
	}
	return names
}

func readFile(t testing.TB, p string) string {
	t.Helper()
	b, err := os.ReadFile(p)
	must(t, err)
	return string(b)
}
