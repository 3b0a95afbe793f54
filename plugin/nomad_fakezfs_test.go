package plugin_test

// Integration tests on a real Nomad v1.11.3 agent: the agent loads the
// plugin binary from its plugin_dir through the plugin block, exactly as in
// production. ZFS below the seam is zfstest's fake: this test binary
// impersonates the zfs and zpool executables on the agent's PATH. The e2e
// suite (e2e/, build tag e2e) runs the same flow on real OpenZFS in a VM.

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/hashicorp/nomad/api"

	"github.com/nomad-device-zfs/nomad-device-zfs/internal/nomadtest"
	"github.com/nomad-device-zfs/nomad-device-zfs/internal/testrig"
	"github.com/nomad-device-zfs/nomad-device-zfs/zfs/zfstest"
)

func TestMain(m *testing.M) {
	zfstest.ImpersonateIfCalled()
	code := m.Run()
	testrig.Cleanup()
	os.Exit(code)
}

// pluginBinary is a fresh plugin_dir with the plugin binary.
func pluginBinary(t testing.TB) string { return testrig.PluginDir(t, testrig.BinaryName) }

// fakeZFSHost is a fake pool "tank" with the operator's parent tank/nomad,
// installed as zfs and zpool executables for the agent's children.
func fakeZFSHost(t testing.TB, withParent bool) (*zfstest.Fake, *zfstest.Executables) {
	t.Helper()
	f, _ := testrig.FakeHost(t, 4<<30, withParent)
	return f, zfstest.InstallExecutables(t, f)
}

const scratchConfig = `parent = "tank/nomad"
scan_interval = "2s"
nomad {
  address = "` + nomadtest.HTTPAddrPlaceholder + `"
}
class "scratch" {
  slots = 3
  properties {
    quota       = "1G"
    compression = "lz4"
  }
  mount = "/data"
  release {
    policy = "snapshot"   # keep each holder's data aside, so the test can read it
  }
}`

func TestNomadAgentFakeZFS(t *testing.T) {
	if testing.Short() {
		t.Skip("starts a real Nomad agent")
	}
	f, exe := fakeZFSHost(t, true)
	agent := nomadtest.Start(t, nomadtest.Config{
		PluginDir:    pluginBinary(t),
		PluginName:   "nomad-device-zfs",
		PluginConfig: scratchConfig,
		Env:          exe.Env,
	})

	t.Run("node record shows the slots and attributes", func(t *testing.T) {
		g := agent.WaitForNodeDevice(t, "zfs", "dataset", "scratch", 3, 90*time.Second)
		for i, inst := range g.Instances {
			if want := "scratch-"; !strings.HasPrefix(inst.ID, want) {
				t.Errorf("instance %d ID %q", i, inst.ID)
			}
		}
		attrs := g.Attributes
		check := func(name, want string) {
			t.Helper()
			if a, ok := attrs[name]; !ok || a.String() != want {
				t.Errorf("attribute %s = %v, want %s", name, a, want)
			}
		}
		check("pool", "tank")
		check("compression", "lz4")
		check("quota", "1024 MiB")
		check("dataset", "tank/nomad/scratch")
	})

	t.Run("example job specs parse and ask for the device", func(t *testing.T) {
		files, err := filepath.Glob("../examples/job-*.nomad.hcl")
		if err != nil || len(files) < 3 {
			t.Fatalf("example jobs: %v %v", files, err)
		}
		for _, file := range files {
			src, err := os.ReadFile(file)
			if err != nil {
				t.Fatal(err)
			}
			job, err := agent.Client().Jobs().ParseHCL(string(src), true)
			if err != nil {
				t.Errorf("%s: %v", file, err)
				continue
			}
			dev := job.TaskGroups[0].Tasks[0].Resources.Devices
			if len(dev) != 1 || !strings.HasPrefix(dev[0].Name, "zfs/dataset/") {
				t.Errorf("%s: devices %+v", file, dev)
			}
		}
	})

	t.Run("raw_exec job gets a slot through the environment", func(t *testing.T) {
		job := agent.RunJob(t, `job "raw" {
  type = "batch"
  group "g" {
    task "write" {
      driver = "raw_exec"
      config {
        command = "/bin/sh"
        args = ["-c", "env | grep ^ZFS_ | sort; echo hello-from-task > \"$ZFS_SCRATCH_HOST_PATH/hello\""]
      }
      resources {
        device "zfs/dataset/scratch" {
          constraint {
            attribute = "${device.attr.quota}"
            operator  = ">="
            value     = "1 GiB"
          }
        }
      }
    }
  }
}`)
		stubs := agent.WaitAllocs(t, *job.ID, nomadtest.AllocsWithStatus(1, api.AllocClientStatusComplete), 90*time.Second)
		alloc, _, err := agent.Client().Allocations().Info(stubs[0].ID, nil)
		if err != nil {
			t.Fatal(err)
		}
		devs := alloc.AllocatedResources.Tasks["write"].Devices
		if len(devs) != 1 || devs[0].Vendor != "zfs" || devs[0].Type != "dataset" || devs[0].Name != "scratch" || len(devs[0].DeviceIDs) != 1 {
			t.Fatalf("allocated devices %+v", devs)
		}
		id := devs[0].DeviceIDs[0]
		dataset := "tank/nomad/scratch/" + id
		logs := agent.AllocLogs(t, alloc.ID, "write", "stdout")
		for _, want := range []string{"ZFS_SCRATCH_DATASET=" + dataset, "ZFS_SCRATCH_ID=" + id, "ZFS_SCRATCH_MOUNT=/data", "ZFS_SCRATCH_HOST_PATH=" + f.Mountpoint(dataset)} {
			if !strings.Contains(logs, want) {
				t.Errorf("task env lacks %s; stdout:\n%s", want, logs)
			}
		}
		// Released by policy snapshot: the data is aside, the slot fresh.
		retained := "tank/nomad/scratch/retained-" + alloc.ID
		waitFor(t, 30*time.Second, "the slot released with its data retained", func() bool {
			_, err := os.Stat(filepath.Join(f.Mountpoint(retained), "hello"))
			return err == nil
		})
		b, err := os.ReadFile(filepath.Join(f.Mountpoint(retained), "hello"))
		if err != nil || string(b) != "hello-from-task\n" {
			t.Fatalf("the task's write is not in %s: %q %v", retained, b, err)
		}
		agent.WaitForNodeDevice(t, "zfs", "dataset", "scratch", 3, 60*time.Second)
		if _, err := os.Stat(filepath.Join(f.Mountpoint(dataset), "hello")); err == nil {
			t.Fatal("the replenished slot still has the previous holder's data")
		}
	})

	t.Run("exec job sees the dataset mounted", func(t *testing.T) {
		node, _, err := agent.Client().Nodes().Info(agent.NodeID(), nil)
		if err != nil {
			t.Fatal(err)
		}
		if d := node.Drivers["exec"]; d == nil || !d.Detected || !d.Healthy {
			t.Skipf("the exec driver is not usable on this host (%+v); the e2e suite covers mounts in the VM", d)
		}
		job := agent.RunJob(t, `job "exec" {
  type = "batch"
  group "g" {
    task "write" {
      driver = "exec"
      config {
        command = "/bin/sh"
        args = ["-c", "echo from-exec > /data/exec && grep ' /data ' /proc/mounts"]
      }
      resources {
        device "zfs/dataset/scratch" {}
      }
    }
  }
}`)
		stubs := agent.WaitAllocs(t, *job.ID, nomadtest.AllocsWithStatus(1, api.AllocClientStatusComplete), 120*time.Second)
		alloc, _, err := agent.Client().Allocations().Info(stubs[0].ID, nil)
		if err != nil {
			t.Fatal(err)
		}
		retained := "tank/nomad/scratch/retained-" + alloc.ID
		waitFor(t, 30*time.Second, "the slot released with its data retained", func() bool {
			_, err := os.Stat(filepath.Join(f.Mountpoint(retained), "exec"))
			return err == nil
		})
		if b, err := os.ReadFile(filepath.Join(f.Mountpoint(retained), "exec")); err != nil || string(b) != "from-exec\n" {
			t.Fatalf("write through the mount did not reach the dataset: %q %v", b, err)
		}
	})
}

// TestNomadAgentFakeZFSParentMissing: a parent whose pool is not imported is
// not a configuration error (the agent must start), but every instance is
// unhealthy with the reason, the agent's log names the key and the value,
// and nothing is created.
func TestNomadAgentFakeZFSParentMissing(t *testing.T) {
	if testing.Short() {
		t.Skip("starts a real Nomad agent")
	}
	f, exe := fakeZFSHost(t, false)
	agent := nomadtest.Start(t, nomadtest.Config{
		PluginDir:    pluginBinary(t),
		PluginName:   "nomad-device-zfs",
		PluginConfig: strings.Replace(scratchConfig, `parent = "tank/nomad"`, `parent = "nopool/nomad"`, 1),
		Env:          exe.Env,
	})
	g := agent.WaitForNodeDevice(t, "zfs", "dataset", "scratch", 0, 90*time.Second)
	if len(g.Instances) != 3 {
		t.Fatalf("instances %+v", g.Instances)
	}
	for _, inst := range g.Instances {
		if inst.Healthy || !strings.Contains(inst.HealthDescription, `pool "nopool" not found (parent = "nopool/nomad")`) {
			t.Errorf("%s: healthy=%v %q", inst.ID, inst.Healthy, inst.HealthDescription)
		}
	}
	if !agent.LogContains(`parent=nopool/nomad`) || !agent.LogContains(`pool \"nopool\" not found`) {
		t.Errorf("the agent log does not name the parent and the reason")
	}
	for _, c := range f.Calls() {
		if c[0] == "zfs" && c[1] != "list" || c[0] == "zpool" && c[1] != "list" {
			t.Errorf("ran %q with a missing pool", c)
		}
	}
}

// TestNomadAgentRejectsBadConfig: bad plugin configuration keeps the agent
// from starting (Nomad validates every plugin block first) and the agent's
// output names the key and the value; no zfs command runs.
func TestNomadAgentRejectsBadConfig(t *testing.T) {
	if testing.Short() {
		t.Skip("starts a real Nomad agent")
	}
	pluginDir := pluginBinary(t)
	f, exe := fakeZFSHost(t, true)
	f.ResetCalls()
	cases := []struct {
		name, config string
		want         []string
	}{
		{"missing parent", `class "scratch" {}`, []string{`"parent"`, "required"}},
		{"relative parent", `parent = "../nomad"
class "scratch" {}`, []string{`parent = \"../nomad\"`}},
		{"zero slots", `parent = "tank/nomad"
class "scratch" { slots = 0 }`, []string{`slots = 0`}},
		{"invalid property value", `parent = "tank/nomad"
class "scratch" {
  properties { compression = "bogus" }
}`, []string{`compression = \"bogus\"`}},
		{"class name with a slash", `parent = "tank/nomad"
class "a/b" {}`, []string{`class \"a/b\"`}},
		{"unknown key", `parent = "tank/nomad"
pool = "tank"
class "scratch" {}`, []string{`"pool"`}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			// The agent refuses to start every time (StartFailure fails the
			// test otherwise), but it sometimes exits before flushing the
			// last lines of its own multi-line error: the message is looked
			// for in up to three starts.
			var out string
			for attempt := 0; attempt < 3; attempt++ {
				out = nomadtest.StartFailure(t, nomadtest.Config{
					PluginDir:    pluginDir,
					PluginName:   "nomad-device-zfs",
					PluginConfig: tc.config,
					Env:          exe.Env,
				}, 90*time.Second)
				if containsAll(out, tc.want) {
					return
				}
			}
			t.Errorf("agent output does not contain all of %q:\n%s", tc.want, lastLines(out, 15))
		})
	}
	for _, c := range f.Calls() {
		t.Errorf("a rejected configuration ran %q", c)
	}
}

func containsAll(s string, subs []string) bool {
	for _, sub := range subs {
		if !strings.Contains(s, sub) {
			return false
		}
	}
	return true
}

// waitFor polls cond every 200ms until it holds or timeout passes.
func waitFor(t *testing.T, timeout time.Duration, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(timeout)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("timed out after %s waiting for %s", timeout, what)
		}
		time.Sleep(200 * time.Millisecond)
	}
}

func lastLines(s string, n int) string {
	lines := strings.Split(strings.TrimRight(s, "\n"), "\n")
	if len(lines) > n {
		lines = lines[len(lines)-n:]
	}
	return strings.Join(lines, "\n")
}
