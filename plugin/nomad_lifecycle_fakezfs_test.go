package plugin_test

// The slot lifecycle on a real Nomad v1.11.3 agent with ACLs on, the plugin
// talking to it with a token of the least-privilege policy of docs/security.md. ZFS
// below the seam is the fake (real files), as in nomad_fakezfs_test.go.

import (
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/hashicorp/nomad/api"

	"github.com/nomad-device-zfs/nomad-device-zfs/internal/nomadtest"
	"github.com/nomad-device-zfs/nomad-device-zfs/internal/testrig"
	"github.com/nomad-device-zfs/nomad-device-zfs/zfs/zfstest"
)

// leastPrivilege is docs/security.md's policy, with client_id_file so agent:read
// is not needed.
const leastPrivilege = `
node { policy = "read" }
namespace "*" { capabilities = ["read-job"] }
`

type lifecycleAgent struct {
	*nomadtest.Agent
	f         *zfstest.Fake
	pluginDir string
}

// startLifecycleAgent starts an ACL-enabled agent whose plugin watches
// allocations with a least-privilege token read from a file.
func startLifecycleAgent(t testing.TB, slots int, release string) *lifecycleAgent {
	t.Helper()
	f, exe := fakeZFSHost(t, true)
	pluginDir := pluginBinary(t)
	dataDir := t.TempDir()
	tokenFile := filepath.Join(t.TempDir(), "token")
	// Empty until the ACL system is bootstrapped; the watcher re-reads it
	// when the API answers 403.
	must(t, os.WriteFile(tokenFile, nil, 0o600))
	cfg := `parent = "tank/nomad"
scan_interval = "2s"
nomad {
  address        = "` + nomadtest.HTTPAddrPlaceholder + `"
  token_file     = "` + tokenFile + `"
  client_id_file = "` + filepath.Join(dataDir, "client", "client-id") + `"
}
class "scratch" {
  slots = ` + strconv.Itoa(slots) + `
  mount = "/data"
  release {
    ` + release + `
  }
}`
	agent := nomadtest.Start(t, nomadtest.Config{
		DataDir: dataDir, PluginDir: pluginDir, PluginName: "nomad-device-zfs",
		PluginConfig: cfg, Env: exe.Env, ACL: true,
	})
	token := agent.CreateToken(t, "nomad-device-zfs", leastPrivilege)
	must(t, os.WriteFile(tokenFile, []byte(token), 0o600))
	agent.WaitForNodeDevice(t, "zfs", "dataset", "scratch", slots, 90*time.Second)
	return &lifecycleAgent{Agent: agent, f: f, pluginDir: pluginDir}
}

// slotProp reads one of a slot's recorded properties from the fake ZFS.
func (a *lifecycleAgent) slotProp(t testing.TB, id, prop string) string {
	t.Helper()
	return testrig.SlotProp(a.f, id, prop)
}

func (a *lifecycleAgent) deviceID(t *testing.T, allocID string) string {
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

const batchWriter = `job "%s" {
  type = "batch"
  group "g" {
    task "t" {
      driver = "raw_exec"
      config {
        command = "/bin/sh"
        args = ["-c", "%s; echo data-of-$NOMAD_ALLOC_ID > $ZFS_SCRATCH_HOST_PATH/owner"]
      }
      resources {
        device "zfs/dataset/scratch" {}
      }
    }
  }
}`

// job is a batch job that runs check, then writes its own data to its slot.
func job(name, check string) string {
	return strings.Replace(strings.Replace(batchWriter, "%s", name, 1), "%s", check, 1)
}

func TestNomadLifecycleFakeZFS(t *testing.T) {
	if testing.Short() {
		t.Skip("starts a real Nomad agent")
	}
	a := startLifecycleAgent(t, 1, `policy = "destroy"`)
	slotPath := a.f.Mountpoint("tank/nomad/scratch/scratch-1")

	t.Run("batch job completes: released and replenished", func(t *testing.T) {
		j := a.RunJob(t, job("batch", "true"))
		a.WaitAllocs(t, *j.ID, nomadtest.AllocsWithStatus(1, api.AllocClientStatusComplete), 60*time.Second)
		ended := time.Now()
		waitFor(t, 60*time.Second, "scratch-1 released to generation 2", func() bool {
			// generation 2: the slot was created (1) and released once.
			return a.slotProp(t, "scratch-1", "generation") == "2" && a.slotProp(t, "scratch-1", "state") == "ready"
		})
		t.Logf("client-terminal seen → slot ready: %s", time.Since(ended).Round(10*time.Millisecond))
		if _, err := os.Stat(filepath.Join(slotPath, "owner")); err == nil {
			t.Fatal("the released slot still has the holder's data")
		}
		if got := a.slotProp(t, "scratch-1", "holder_index"); got == "-" || got == "" {
			t.Errorf("holder_index not kept after release: %q", got)
		}
	})

	t.Run("the next allocation never sees the previous holder's data", func(t *testing.T) {
		// The previous job wrote "owner" to this slot; this one must not
		// find it (it fails otherwise).
		j := a.RunJob(t, job("second", `test ! -e $ZFS_SCRATCH_HOST_PATH/owner || { cat $ZFS_SCRATCH_HOST_PATH/owner; exit 1; }`))
		a.WaitAllocs(t, *j.ID, nomadtest.AllocsWithStatus(1, api.AllocClientStatusComplete), 60*time.Second)
	})

	t.Run("alloc restart keeps the data", func(t *testing.T) {
		j := a.RunJob(t, `job "svc" {
  group "g" {
    task "t" {
      driver = "raw_exec"
      config {
        command = "/bin/sh"
        args = ["-c", "test -e $ZFS_SCRATCH_HOST_PATH/first && echo restarted >> $ZFS_SCRATCH_HOST_PATH/log || { echo first > $ZFS_SCRATCH_HOST_PATH/first; }; exec sleep 600"]
      }
      resources {
        device "zfs/dataset/scratch" {}
      }
    }
  }
}`)
		stubs := a.WaitAllocs(t, *j.ID, nomadtest.AllocsWithStatus(1, api.AllocClientStatusRunning), 60*time.Second)
		waitFor(t, 30*time.Second, "the holder recorded", func() bool { return a.slotProp(t, "scratch-1", "holder") == stubs[0].ID })
		alloc, _, err := a.Client().Allocations().Info(stubs[0].ID, nil)
		must(t, err)
		must(t, a.Client().Allocations().Restart(alloc, "", nil))
		waitFor(t, 60*time.Second, "the restarted task to find its data", func() bool {
			b, _ := os.ReadFile(filepath.Join(slotPath, "log"))
			return strings.Contains(string(b), "restarted")
		})
		if a.slotProp(t, "scratch-1", "generation") != "3" || a.slotProp(t, "scratch-1", "state") != "held" {
			t.Fatalf("a restart changed the slot: generation %s state %s", a.slotProp(t, "scratch-1", "generation"), a.slotProp(t, "scratch-1", "state"))
		}

		t.Run("service job stopped: released", func(t *testing.T) {
			_, _, err := a.Client().Jobs().Deregister(*j.ID, false, nil)
			must(t, err)
			waitFor(t, 60*time.Second, "scratch-1 released after the stop", func() bool {
				return a.slotProp(t, "scratch-1", "generation") == "4" && a.slotProp(t, "scratch-1", "state") == "ready"
			})
			if _, err := os.Stat(filepath.Join(slotPath, "first")); err == nil {
				t.Fatal("data kept after release")
			}
		})
	})

	t.Run("plugin killed mid-release: relaunched, release completes", func(t *testing.T) {
		a.f.Inject(zfstest.Fault{Cmd: "zfs", ArgsContain: []string{"destroy"}, Hang: true, Times: 1})
		j := a.RunJob(t, job("killed", "true"))
		a.WaitAllocs(t, *j.ID, nomadtest.AllocsWithStatus(1, api.AllocClientStatusComplete), 60*time.Second)
		// A destroy release writes no mark first (model.Class.MarksRelease):
		// the release is under way once its zfs destroy runs, and hangs.
		waitFor(t, 30*time.Second, "the release's zfs destroy to run", func() bool {
			return processRunning("destroy", "tank/nomad/scratch/scratch-1")
		})
		if st := a.slotProp(t, "scratch-1", "state"); st != "held" {
			t.Fatalf("scratch-1 %s while its destroy runs, want held (a destroy release writes no mark)", st)
		}
		pid := pluginPID(t, a.pluginDir)
		must(t, syscall.Kill(pid, syscall.SIGKILL))
		waitFor(t, 60*time.Second, "a relaunched plugin to finish the release", func() bool {
			return a.slotProp(t, "scratch-1", "state") == "ready" && a.slotProp(t, "scratch-1", "generation") == "5"
		})
		if p := pluginPID(t, a.pluginDir); p == pid {
			t.Fatal("the plugin was not relaunched")
		}
		a.WaitForNodeDevice(t, "zfs", "dataset", "scratch", 1, 60*time.Second)
	})

	t.Run("agent restarted: the watcher resumes", func(t *testing.T) {
		a.Restart(t)
		a.WaitForNodeDevice(t, "zfs", "dataset", "scratch", 1, 90*time.Second)
		j := a.RunJob(t, job("after-restart", "true"))
		a.WaitAllocs(t, *j.ID, nomadtest.AllocsWithStatus(1, api.AllocClientStatusComplete), 60*time.Second)
		waitFor(t, 60*time.Second, "a release after the agent restart", func() bool {
			return a.slotProp(t, "scratch-1", "generation") == "6"
		})
	})
}

// processRunning reports whether a live process has every one of args
// among its arguments.
func processRunning(args ...string) bool {
	return len(processes(func(argv []string) bool {
		for _, a := range args {
			if !slices.Contains(argv, a) {
				return false
			}
		}
		return true
	})) > 0
}

// pluginPID finds the long-lived plugin process started from pluginDir.
func pluginPID(t *testing.T, pluginDir string) int {
	t.Helper()
	want := filepath.Join(pluginDir, "nomad-device-zfs")
	found := processes(func(argv []string) bool { return argv[0] == want })
	if len(found) != 1 {
		t.Fatalf("want one plugin process from %s, found %v", want, found)
	}
	return found[0]
}

// processes lists the live processes whose argv match says, leaving out
// the zombies of earlier runs.
func processes(match func(argv []string) bool) []int {
	var found []int
	entries, _ := os.ReadDir("/proc")
	for _, e := range entries {
		pid, err := strconv.Atoi(e.Name())
		if err != nil {
			continue
		}
		cmdline, err := os.ReadFile(filepath.Join("/proc", e.Name(), "cmdline"))
		if err != nil || len(cmdline) == 0 {
			continue
		}
		stat, _ := os.ReadFile(filepath.Join("/proc", e.Name(), "stat"))
		if strings.Contains(string(stat), ") Z ") {
			continue
		}
		if match(strings.Split(strings.TrimSuffix(string(cmdline), "\x00"), "\x00")) {
			found = append(found, pid)
		}
	}
	return found
}

func must(t testing.TB, err error) {
	t.Helper()
	if err != nil {
		t.Fatal(err)
	}
}
