package nomadtest_test

import (
	"os"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/hashicorp/nomad/api"

	"github.com/nomad-device-zfs/nomad-device-zfs/internal/nomadtest"
	"github.com/nomad-device-zfs/nomad-device-zfs/internal/testrig"
)

func TestMain(m *testing.M) {
	if os.Getenv(fakePluginEnv) == "1" {
		serveFakeDevice()
		os.Exit(0)
	}
	os.Exit(m.Run())
}

// startAgent skips under -short, then starts an agent with cfg.
func startAgent(t *testing.T, cfg nomadtest.Config) *nomadtest.Agent {
	t.Helper()
	if testing.Short() {
		t.Skip("starts a real Nomad agent; skipped with -short")
	}
	cfg.Binary = nomadtest.Binary(t)
	return nomadtest.Start(t, cfg)
}

const helloJob = `
job "hello" {
  type = "batch"
  group "g" {
    task "hello" {
      driver = "raw_exec"
      config {
        command = "/bin/sh"
        args    = ["-c", "echo hello"]
      }
    }
  }
}
`

func TestRawExecJob(t *testing.T) {
	t.Parallel()
	var log testrig.LockedBuffer
	a := startAgent(t, nomadtest.Config{LogWriter: &log})

	job := a.RunJob(t, helloJob)
	allocs := a.WaitAllocs(t, *job.ID, nomadtest.AllocsWithStatus(1, api.AllocClientStatusComplete), time.Minute)

	if got := a.AllocLogs(t, allocs[0].ID, "hello", "stdout"); got != "hello\n" {
		t.Errorf("stdout = %q, want %q", got, "hello\n")
	}
	if a.ManagementToken() != "" {
		t.Errorf("ManagementToken() = %q without ACLs, want empty", a.ManagementToken())
	}
	if !a.LogContains("Nomad agent started") || !strings.Contains(log.String(), "Nomad agent started") {
		t.Errorf("agent start banner missing from Logs() or the LogWriter")
	}
}

func TestACL(t *testing.T) {
	t.Parallel()
	a := startAgent(t, nomadtest.Config{ACL: true})

	if a.ManagementToken() == "" {
		t.Fatal("ManagementToken() is empty with ACLs enabled")
	}
	self, _, err := a.Client().ACLTokens().Self(nil)
	if err != nil {
		t.Fatalf("management client: token self: %v", err)
	}
	if self.Type != "management" {
		t.Errorf("Client() token type = %q, want management", self.Type)
	}

	if _, _, err := a.ClientWithToken("").Nodes().List(nil); err == nil || !strings.Contains(err.Error(), "403") {
		t.Errorf("anonymous node list: err = %v, want 403", err)
	}

	tok := a.CreateToken(t, "node-reader", `node { policy = "read" }`)
	reader := a.ClientWithToken(tok)
	nodes, _, err := reader.Nodes().List(nil)
	if err != nil {
		t.Fatalf("node list with node-reader token: %v", err)
	}
	if len(nodes) != 1 || nodes[0].ID != a.NodeID() {
		t.Errorf("nodes = %+v, want just %s", nodes, a.NodeID())
	}
	if _, _, err := reader.Jobs().List(nil); err == nil || !strings.Contains(err.Error(), "403") {
		t.Errorf("job list with node-reader token: err = %v, want 403", err)
	}
}

const deviceJob = `
job "devices" {
  type = "batch"
  group "g" {
    task "show" {
      driver = "raw_exec"
      config {
        command = "/bin/sh"
        args    = ["-c", "echo ids=$NOMADTEST_FAKE_DEVICE_IDS"]
      }
      resources {
        device "nomadtest/fake/dev" {
          count = 2
        }
      }
    }
  }
}
`

// TestDevicePluginAndRestart loads a device plugin (the test binary, see
// fakedevice_test.go), places a job on its instances, then restarts the
// agent and checks that state and devices come back.
func TestDevicePluginAndRestart(t *testing.T) {
	t.Parallel()
	a := startAgent(t, nomadtest.Config{
		PluginDir:    installFakePlugin(t),
		PluginName:   fakePluginName,
		PluginConfig: "count     = 3\nunhealthy = 1",
		Env:          []string{fakePluginEnv + "=1"},
	})

	g := a.WaitForNodeDevice(t, fakeVendor, fakeType, fakeModel, 2, time.Minute)
	if len(g.Instances) != 3 {
		t.Errorf("instances = %d, want 3", len(g.Instances))
	}

	job := a.RunJob(t, deviceJob)
	allocs := a.WaitAllocs(t, *job.ID, nomadtest.AllocsWithStatus(1, api.AllocClientStatusComplete), time.Minute)
	out := a.AllocLogs(t, allocs[0].ID, "show", "stdout")
	// dev-0 is unhealthy, so the scheduler must pick the other two.
	if ids := strings.TrimSpace(strings.TrimPrefix(out, "ids=")); ids != "dev-1,dev-2" && ids != "dev-2,dev-1" {
		t.Errorf("task saw device ids %q, want dev-1 and dev-2", out)
	}
	if !a.LogContains(fakePluginName) {
		t.Errorf("agent log never mentions %s", fakePluginName)
	}

	nodeID := a.NodeID()
	a.Restart(t)
	if a.NodeID() != nodeID {
		t.Errorf("node ID after restart = %s, want %s", a.NodeID(), nodeID)
	}
	a.WaitForNodeDevice(t, fakeVendor, fakeType, fakeModel, 2, time.Minute)
	if j, _, err := a.Client().Jobs().Info(*job.ID, nil); err != nil || *j.Status != "dead" {
		t.Errorf("job after restart: %v, err %v", j, err)
	}
}

const sleepJob = `
job "sleeper" {
  group "g" {
    task "sleep" {
      driver = "raw_exec"
      config {
        command = "/bin/sh"
        args    = ["-c", "echo $$; exec sleep 600"]
      }
    }
  }
}
`

// TestCleanupReapsTasks leaves a service task running when its test ends
// and checks that cleanup killed it and unmounted its secrets dir (or the
// subtest's TempDir removal would have failed).
func TestCleanupReapsTasks(t *testing.T) {
	t.Parallel()
	var pid int
	var dataDir string
	t.Run("agent", func(t *testing.T) {
		a := startAgent(t, nomadtest.Config{})
		dataDir = a.DataDir()
		job := a.RunJob(t, sleepJob)
		allocs := a.WaitAllocs(t, *job.ID, nomadtest.AllocsWithStatus(1, api.AllocClientStatusRunning), time.Minute)
		deadline := time.Now().Add(30 * time.Second)
		for pid == 0 && time.Now().Before(deadline) {
			pid, _ = strconv.Atoi(strings.TrimSpace(a.AllocLogs(t, allocs[0].ID, "sleep", "stdout")))
			time.Sleep(100 * time.Millisecond)
		}
		if pid == 0 {
			t.Fatal("task never printed its pid")
		}
		if !running(pid) {
			t.Fatalf("task pid %d not running", pid)
		}
		a.Stop(t)
		if !running(pid) {
			t.Errorf("task pid %d died with the agent; want it left running for restore", pid)
		}
	})
	if pid == 0 {
		return
	}
	if running(pid) {
		t.Errorf("task pid %d still running after cleanup", pid)
	}
	mounts, err := os.ReadFile("/proc/self/mountinfo")
	if err != nil {
		t.Fatal(err)
	}
	if strings.Contains(string(mounts), dataDir+"/") {
		t.Errorf("mounts left under %s:\n%s", dataDir, mounts)
	}
}

// running reports whether pid exists and is not a zombie (killed orphans
// may linger as zombies when PID 1 is slow to reap them).
func running(pid int) bool {
	b, err := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/stat")
	if err != nil {
		return false
	}
	i := strings.LastIndexByte(string(b), ')')
	return i >= 0 && i+2 < len(b) && b[i+2] != 'Z'
}
