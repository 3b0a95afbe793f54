//go:build bench

package bench

import (
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/hashicorp/nomad/api"

	"github.com/nomad-device-zfs/nomad-device-zfs/internal/nomadtest"
	"github.com/nomad-device-zfs/nomad-device-zfs/internal/testrig"
	"github.com/nomad-device-zfs/nomad-device-zfs/model"
	"github.com/nomad-device-zfs/nomad-device-zfs/zfs"
	"github.com/nomad-device-zfs/nomad-device-zfs/zfs/zfstest"
)

// TestChurn runs as many allocations a minute as one node holds, for
// NDZ_BENCH_CHURN (default 10m), on a real Nomad agent whose plugin is the
// real one with ZFS faked in process (bench/churnplugin): NDZ_BENCH_CHURN_SLOTS
// slots (default 16), raw_exec batch jobs of as many allocations as there
// are slots, each task exiting at once, two jobs in flight, each purged once
// its allocations are complete (NDZ_BENCH_CPUPROFILE=path profiles the
// plugin's first minute). It prints
//
//	churn minutes=... allocs=... allocs_per_min=... plugin_cpu_s=... agent_cpu_s=... plugin_share_pct=...
//
// where agent_cpu_s is the nomad process's own CPU time over the run (its
// tasks and executors are its children, counted apart as tasks_cpu_s),
// plugin_cpu_s the plugin process's, fake ZFS included, and fake_zfs_cpu_s
// the fake's part of it (what real ZFS spends in the kernel and in zfs
// processes): plugin_share_pct counts the fake as the plugin's,
// without_fake_pct does not. At the end it waits for the last releases and checks
// that nothing leaked: every slot ready with no holder, nothing else below
// the parent but the class dataset, no snapshot.
func TestChurn(t *testing.T) {
	dur := envDuration(t, "NDZ_BENCH_CHURN", 10*time.Minute)
	slots := envInt(t, "NDZ_BENCH_CHURN_SLOTS", 16)

	f, c := testrig.FakeHost(t, 1<<40, true)
	exe := zfstest.InstallExecutables(t, f)
	agent := nomadtest.Start(t, nomadtest.Config{
		PluginDir: churnPluginDir(t), PluginName: testrig.BinaryName, Env: exe.Env, LogLevel: "INFO",
		PluginConfig: fmt.Sprintf(`parent = %q
nomad {
  address = "%s"
}
class "churn" {
  slots = %d
  mount = "/data"
}`, testrig.Parent, nomadtest.HTTPAddrPlaceholder, slots),
		// Purged jobs' allocations and evaluations are collected soon, as
		// an operator of a node this busy would set it: the node's
		// allocation list, which the plugin's watcher reads, stays short.
		ExtraHCL: `server {
  job_gc_interval         = "30s"
  job_gc_threshold        = "1m"
  eval_gc_threshold       = "1m"
  batch_eval_gc_threshold = "1m"
}
`,
	})
	agent.WaitForNodeDevice(t, "zfs", "dataset", "churn", slots, 2*time.Minute)
	nomadPID, pluginPID := agentPIDs(t, agent)

	nomad0, tasks0 := cpuSeconds(t, nomadPID)
	plugin0, _ := cpuSeconds(t, pluginPID)
	fake0 := fakeCPU(t, exe.StateFile)
	start := time.Now()
	ctx, cancel := context.WithDeadline(t.Context(), start.Add(dur))
	defer cancel()
	var completed atomic.Int64
	var seq atomic.Int64
	var wg sync.WaitGroup
	for w := 0; w < 2; w++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for ctx.Err() == nil {
				n, err := runChurnJob(ctx, agent, fmt.Sprintf("churn-%d", seq.Add(1)), slots)
				completed.Add(int64(n))
				if err != nil && ctx.Err() == nil {
					t.Error(err)
					return
				}
			}
		}()
	}
	wg.Wait()
	elapsed := time.Since(start)
	nomad1, tasks1 := cpuSeconds(t, nomadPID)
	plugin1, _ := cpuSeconds(t, pluginPID)
	fake1 := fakeCPU(t, exe.StateFile)

	pluginCPU, agentCPU, fake := plugin1-plugin0, nomad1-nomad0, fake1-fake0
	fmt.Printf("churn minutes=%.1f slots=%d allocs=%d allocs_per_min=%.0f plugin_cpu_s=%.1f fake_zfs_cpu_s=%.1f agent_cpu_s=%.1f tasks_cpu_s=%.1f plugin_share_pct=%.1f without_fake_pct=%.1f\n",
		elapsed.Minutes(), slots, completed.Load(), float64(completed.Load())/elapsed.Minutes(),
		pluginCPU, fake, agentCPU, tasks1-tasks0, 100*pluginCPU/agentCPU, 100*(pluginCPU-fake)/agentCPU)

	checkNothingLeaked(t, c, slots)
}

// runChurnJob runs one batch job of n allocations, each needing a slot,
// waits until all are complete, and purges it. It returns how many
// completed.
func runChurnJob(ctx context.Context, a *nomadtest.Agent, id string, n int) (int, error) {
	job := fmt.Sprintf(`job %q {
  type = "batch"
  group "g" {
    count = %d
    restart {
      attempts = 0
      mode     = "fail"
    }
    reschedule {
      attempts  = 0
      unlimited = false
    }
    task "t" {
      driver = "raw_exec"
      config {
        command = "/bin/true"
      }
      resources {
        cpu    = 10
        memory = 10
        device "zfs/dataset/churn" {}
      }
    }
  }
}`, id, n)
	c := a.Client()
	parsed, err := c.Jobs().ParseHCL(job, true)
	if err != nil {
		return 0, err
	}
	if _, _, err := c.Jobs().Register(parsed, nil); err != nil {
		return 0, fmt.Errorf("registering %s: %w", id, err)
	}
	// The run's end does not cut a job short: its allocations finish and
	// it is purged, so the leak check sees a quiet node.
	for deadline := time.Now().Add(5 * time.Minute); ; time.Sleep(100 * time.Millisecond) {
		allocs, _, err := c.Jobs().Allocations(id, true, nil)
		if err != nil {
			return 0, fmt.Errorf("allocations of %s: %w", id, err)
		}
		done, failed := 0, 0
		for _, al := range allocs {
			switch al.ClientStatus {
			case api.AllocClientStatusComplete:
				done++
			case api.AllocClientStatusFailed, api.AllocClientStatusLost:
				failed++
			}
		}
		if failed > 0 {
			return done, fmt.Errorf("job %s: %d allocations failed or lost", id, failed)
		}
		if done == n {
			break
		}
		if time.Now().After(deadline) {
			return done, fmt.Errorf("job %s: %d of %d allocations complete after 5 minutes", id, done, n)
		}
	}
	if _, _, err := c.Jobs().Deregister(id, true, nil); err != nil {
		return n, fmt.Errorf("purging %s: %w", id, err)
	}
	return n, nil
}

// checkNothingLeaked waits up to a minute for the fake pool to show every
// slot ready with no holder, and nothing else below the parent but the
// class dataset: no retained data, no snapshot, no stray dataset.
func checkNothingLeaked(t *testing.T, c *zfs.Client, slots int) {
	t.Helper()
	class := testrig.Parent + "/churn"
	var problems []string
	for deadline := time.Now().Add(time.Minute); ; time.Sleep(time.Second) {
		sets, err := c.List(t.Context(), testrig.Parent, model.UserProps)
		if err != nil {
			t.Fatal(err)
		}
		problems = problems[:0]
		ready := 0
		for _, d := range sets {
			switch {
			case d.Name == testrig.Parent || d.Name == class:
			case d.IsSnapshot() || zfs.Parent(d.Name) != class:
				problems = append(problems, "left over: "+d.Name)
			case d.User.Get(model.PropState) != string(model.StateReady) || d.User.Get(model.PropHolder) != "":
				problems = append(problems, fmt.Sprintf("%s: state %q holder %q", d.Name, d.User.Get(model.PropState), d.User.Get(model.PropHolder)))
			default:
				ready++
			}
		}
		if ready != slots {
			problems = append(problems, fmt.Sprintf("%d of %d slots ready", ready, slots))
		}
		if len(problems) == 0 {
			fmt.Printf("churn leaked=0 slots_ready=%d\n", ready)
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("after the run: %s", strings.Join(problems, "; "))
		}
	}
}

// fakeCPU is the CPU seconds the churn plugin's fake ZFS has taken so far
// (written next to its state file every second).
func fakeCPU(t *testing.T, stateFile string) float64 {
	t.Helper()
	b, err := os.ReadFile(stateFile + ".cpu")
	if os.IsNotExist(err) {
		return 0
	}
	if err != nil {
		t.Fatal(err)
	}
	s, err := strconv.ParseFloat(strings.TrimSpace(string(b)), 64)
	if err != nil {
		t.Fatalf("%s.cpu: %v", stateFile, err)
	}
	return s
}

// churnPluginDir builds bench/churnplugin (bench tag) as the plugin
// binary's name in a fresh plugin_dir, as the shipped binary is built.
func churnPluginDir(t *testing.T) string {
	t.Helper()
	dir := t.TempDir()
	cmd := exec.Command("go", "build", "-tags", "bench", "-trimpath", "-o", filepath.Join(dir, testrig.BinaryName), "./bench/churnplugin")
	cmd.Dir = ".."
	cmd.Env = append(os.Environ(), "CGO_ENABLED=0")
	if out, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("building the churn plugin: %v\n%s", err, out)
	}
	return dir
}

// agentPIDs finds the agent's nomad process (the one started with its
// config file) and its plugin (its child running the plugin binary).
func agentPIDs(t *testing.T, a *nomadtest.Agent) (nomad, plugin int) {
	t.Helper()
	entries, err := os.ReadDir("/proc")
	if err != nil {
		t.Fatal(err)
	}
	nomad = a.PID()
	for _, e := range entries {
		pid, err := strconv.Atoi(e.Name())
		if err != nil || nomad == 0 {
			continue
		}
		b, _ := os.ReadFile(filepath.Join("/proc", e.Name(), "cmdline"))
		argv0, _, _ := strings.Cut(string(b), "\x00")
		if filepath.Base(argv0) == testrig.BinaryName && parentPID(pid) == nomad {
			plugin = pid
		}
	}
	if nomad == 0 || plugin == 0 {
		t.Fatalf("agent process %d, plugin process %d: not both found", nomad, plugin)
	}
	return nomad, plugin
}

// parentPID is the PPid of pid, 0 if unknown.
func parentPID(pid int) int {
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
	if err != nil {
		return 0
	}
	f := strings.Fields(string(b[strings.LastIndexByte(string(b), ')')+1:]))
	if len(f) < 2 {
		return 0
	}
	ppid, _ := strconv.Atoi(f[1])
	return ppid
}

// cpuSeconds is a process's own CPU time (user + system) and its reaped
// children's, from /proc/<pid>/stat.
func cpuSeconds(t *testing.T, pid int) (self, children float64) {
	t.Helper()
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
	if err != nil {
		t.Fatalf("process %d: %v", pid, err)
	}
	f := strings.Fields(string(b[strings.LastIndexByte(string(b), ')')+1:]))
	var v [4]float64
	for k := range v {
		n, _ := strconv.Atoi(f[11+k])
		v[k] = float64(n) / 100 // USER_HZ
	}
	return v[0] + v[1], v[2] + v[3]
}

// envDuration is the duration in $name, or def.
func envDuration(t *testing.T, name string, def time.Duration) time.Duration {
	s := os.Getenv(name)
	if s == "" {
		return def
	}
	d, err := time.ParseDuration(s)
	if err != nil || d <= 0 {
		t.Fatalf("%s: %q is not a positive duration", name, s)
	}
	return d
}

// envInt is the positive integer in $name, or def.
func envInt(t *testing.T, name string, def int) int {
	s := os.Getenv(name)
	if s == "" {
		return def
	}
	n, err := strconv.Atoi(s)
	if err != nil || n <= 0 {
		t.Fatalf("%s: %q is not a positive integer", name, s)
	}
	return n
}
