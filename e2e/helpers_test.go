//go:build e2e

package e2e

import (
	"bytes"
	"context"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"sort"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/hashicorp/nomad/api"

	"github.com/nomad-device-zfs/nomad-device-zfs/internal/nomadtest"
	"github.com/nomad-device-zfs/nomad-device-zfs/zfs"
	"github.com/nomad-device-zfs/nomad-device-zfs/zfs/zfsexec"
)

// The plugin's user properties, as docs/how-it-works.md documents them.
const (
	propOwner  = "nomad-device-zfs:owner"
	propState  = "nomad-device-zfs:state"
	propHolder = "nomad-device-zfs:holder"
)

// Timeouts on an idle guest; every wait stretches them by the guest's
// measured slowness (pace_test.go). The VM emulates its CPUs (TCG), so
// everything is slower than on a host: an agent starts in 4-13 s (about
// 30 s when its client's first registration hits the keyring race, see
// nomadtest), an exec job runs in about 7 s, a zfs command takes 80-180 ms.
const (
	deviceTimeout = 90 * time.Second  // a device change to reach the node record (5-10 s) after a scan
	jobTimeout    = 120 * time.Second // a job from registration to its allocation's terminal state
)

// zc is the project's zfs client on the real binaries. Each command may
// take a minute of an idle guest's time, stretched by the guest's measured
// slowness (pacedRunner): a destroy beside other VMs on the same cores
// took longer than a fixed minute.
var zc = zfs.NewClient(pacedRunner{})

// pacedRunner runs zfs as zfsexec.Runner does, with a timeout of a minute
// stretched by the guest's slowness at the command's start (paced).
type pacedRunner struct{}

func (pacedRunner) runner() *zfsexec.Runner { return &zfsexec.Runner{Timeout: paced(time.Minute)} }

func (p pacedRunner) Run(ctx context.Context, cmd string, args ...string) ([]byte, error) {
	return p.runner().Run(ctx, cmd, args...)
}

func (p pacedRunner) Stream(ctx context.Context, cmd string, args []string, stdin io.Reader, stdout io.Writer) error {
	return p.runner().Stream(ctx, cmd, args, stdin, stdout)
}

// run runs a command (zfs, zpool, ...) and returns its stdout; a failure
// fails the test with the command's output.
func run(t testing.TB, name string, args ...string) string {
	t.Helper()
	out, err := runErr(name, args...)
	if err != nil {
		t.Fatalf("%s %s: %v", name, strings.Join(args, " "), err)
	}
	return out
}

// runUnbusy is run for an operator's zfs command on a mounted dataset that
// may be "busy" for a while through no fault of the plugin: a container or
// a task executor started meanwhile by a test beside it keeps a copy of
// the host's mounts in its mount namespace until it exits. It retries
// for releaseTimeout, stretched like every wait.
func runUnbusy(t testing.TB, name string, args ...string) string {
	t.Helper()
	var out string
	waitFor(t, releaseTimeout, name+" "+strings.Join(args, " "), func() (bool, string) {
		var err error
		out, err = runErr(name, args...)
		if err != nil && !strings.Contains(err.Error(), "is busy") {
			t.Fatalf("%s %s: %v", name, strings.Join(args, " "), err)
		}
		return err == nil, fmt.Sprint(err)
	})
	return out
}

func runErr(name string, args ...string) (string, error) {
	cmd := exec.Command(name, args...)
	cmd.Env = append(os.Environ(), "LC_ALL=C")
	var stdout, stderr bytes.Buffer
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	if err := cmd.Run(); err != nil {
		return stdout.String(), fmt.Errorf("%w: %s", err, strings.TrimSpace(stderr.String()))
	}
	return stdout.String(), nil
}

// testPool is a pool on sparse file vdevs in a temporary directory, mounted
// at /<name>, with the operator's parent dataset <name>/nomad.
type testPool struct {
	Name   string
	Dir    string   // holds the vdev files: `zpool import -d Dir Name`
	Vdevs  []string // their paths
	Parent string   // <Name>/nomad
}

// newPool creates a pool of one vdev, or a two-way mirror, and its parent
// dataset, and destroys the pool at cleanup (after the agent has stopped:
// cleanups run last-in first-out).
func newPool(t *testing.T, name string, mirror bool) *testPool {
	t.Helper()
	p := &testPool{Name: name, Dir: t.TempDir()}
	n := 1
	if mirror {
		n = 2
	}
	for i := 0; i < n; i++ {
		path := filepath.Join(p.Dir, fmt.Sprintf("vdev%d.img", i))
		f, err := os.Create(path)
		if err == nil {
			err = f.Truncate(512 << 20) // sparse
			f.Close()
		}
		if err != nil {
			t.Fatal(err)
		}
		p.Vdevs = append(p.Vdevs, path)
	}
	createPool(t, p, mirror)
	return p
}

// createPool creates pool p.Name on p.Vdevs (a mirror of them, or one
// vdev each) and its parent dataset, and destroys the pool at cleanup.
func createPool(t *testing.T, p *testPool, mirror bool) {
	t.Helper()
	name := p.Name
	p.Parent = name + "/nomad"
	args := []string{"create", "-f", "-o", "cachefile=none", "-m", "/" + name, name}
	if mirror {
		args = append(args, "mirror")
	}
	run(t, "zpool", append(args, p.Vdevs...)...)
	t.Cleanup(func() {
		if _, err := runErr("zpool", "list", name); err != nil {
			// Exported by the test and not imported again.
			if _, err := runErr("zpool", "import", "-d", p.Dir, name); err != nil {
				t.Logf("cleanup: importing pool %s to destroy it: %v", name, err)
				return
			}
		}
		// A release the stopped agent's plugin left running may keep the
		// pool busy for a moment.
		var err error
		for i := 0; i < 20; i++ {
			if _, err = runErr("zpool", "destroy", "-f", name); err == nil {
				return
			}
			time.Sleep(500 * time.Millisecond)
		}
		// A covered mount (see TestImportWithoutMountKeepsSlotsVisible)
		// cannot be unmounted by path: detach the pool's mounts, deepest
		// first, and try once more.
		t.Logf("cleanup: %v; detaching the pool's mounts", err)
		var mps []string
		for _, l := range strings.Split(mountsOf(name), "\n") {
			if f := strings.Fields(l); len(f) > 1 {
				mps = append(mps, f[1])
			}
		}
		sort.Slice(mps, func(i, j int) bool { return len(mps[i]) > len(mps[j]) })
		for _, mp := range mps {
			_ = syscall.Unmount(mp, syscall.MNT_DETACH)
		}
		if _, err := runErr("zpool", "destroy", "-f", name); err != nil {
			t.Logf("cleanup: %v", err)
		}
	})
	run(t, "zfs", "create", p.Parent)
}

// startAgent starts a Nomad agent whose client loads the plugin with the
// given class blocks below pool's parent, scanning every 2 s.
func startAgent(t *testing.T, p *testPool, classes string) *nomadtest.Agent {
	t.Helper()
	return startAgentScan(t, p, 2*time.Second, classes)
}

// startAgentScan is startAgent with another scan_interval. A scan is two
// zfs processes, about 0.25 s of CPU in the emulated guest: every 2 s that
// is an eighth of a vCPU per agent, with a dozen agents a large share of
// the VM's two. Tests that do not wait on scans (a release is triggered by
// the allocation watcher, not by a scan) use a longer interval.
func startAgentScan(t *testing.T, p *testPool, scan time.Duration, classes string) *nomadtest.Agent {
	t.Helper()
	return startAgentWith(t, p, scan, classes, "")
}

// startAgentWith is startAgentScan with more agent configuration (a
// plugin "docker" block...).
func startAgentWith(t *testing.T, p *testPool, scan time.Duration, classes, extraHCL string) *nomadtest.Agent {
	t.Helper()
	return startAgentConfig(t, agentConfig(p, scan, classes, extraHCL))
}

// agentConfig is the configuration of startAgentWith's agent.
func agentConfig(p *testPool, scan time.Duration, classes, extraHCL string) nomadtest.Config {
	return nomadtest.Config{
		Slowness:   pace.Slowness,
		Binary:     nomadBin,
		PluginDir:  pluginDir,
		PluginName: pluginName,
		// The allocation watcher talks to this agent's API.
		// reserve_timeout: Reserve's own wait (for a release, a stopping
		// holder, the API; default 1m) must not be what fails on a slow
		// guest: the test's waits, which stretch with the guest's
		// slowness, decide. No test here waits for Reserve to give up.
		PluginConfig: fmt.Sprintf("parent = %q\nscan_interval = %q\nreserve_timeout = %q\nnomad {\n  address = %q\n}\n%s",
			p.Parent, scan.String(), (maxSlowness * time.Minute).String(), nomadtest.HTTPAddrPlaceholder, classes),
		// The guest has only lo and no default route: without this the
		// client's network fingerprint stops the agent ("No default
		// interface found"). The client collects host and allocation
		// stats every second by default, a quarter of an idle agent's CPU
		// here; no test reads them.
		ExtraHCL: "client {\n  network_interface = \"lo\"\n}\ntelemetry {\n  collection_interval = \"10s\"\n}\n" + extraHCL,
	}
}

// startAgentConfig starts an agent of agentConfig and logs its CPU time at
// cleanup (and keeps its log with NDZ_E2E_LOG_DIR).
func startAgentConfig(t *testing.T, cfg nomadtest.Config) *nomadtest.Agent {
	t.Helper()
	a := nomadtest.Start(t, cfg)
	// Registered after Start's cleanup, so it runs first, while the agent
	// still runs: the guest's two emulated vCPUs are the suite's budget.
	t.Cleanup(func() { t.Logf("agent CPU: %s", agentCPU(t, a)) })
	if dir := os.Getenv("NDZ_E2E_LOG_DIR"); dir != "" {
		t.Cleanup(func() {
			name := strings.ReplaceAll(t.Name(), "/", "_") + ".agent.log"
			if len(cfg.Servers) > 0 {
				name = strings.ReplaceAll(t.Name(), "/", "_") + ".client.agent.log"
			}
			if err := os.WriteFile(filepath.Join(dir, name), []byte(a.Logs()), 0o644); err != nil {
				t.Logf("keeping the agent log: %v", err)
			}
		})
	}
	return a
}

// datasets lists root and everything below it with the plugin's state
// properties, by name.
func datasets(t testing.TB, root string) map[string]zfs.Dataset {
	t.Helper()
	sets, err := zc.List(context.Background(), root, []string{propOwner, propState, propHolder})
	if err != nil {
		t.Fatalf("zfs list %s: %v", root, err)
	}
	m := make(map[string]zfs.Dataset, len(sets))
	for _, d := range sets {
		m[d.Name] = d
	}
	return m
}

// dataset returns one dataset's row.
func dataset(t testing.TB, name string) zfs.Dataset {
	t.Helper()
	d, ok := datasets(t, name)[name]
	if !ok {
		t.Fatalf("zfs list %s: not listed", name)
	}
	return d
}

// syncPool waits until everything written so far is on disk, so that used
// and referenced include it.
func syncPool(t testing.TB, pool string) {
	t.Helper()
	run(t, "zpool", "sync", pool)
}

// checkSlots checks that the class has exactly the slots <class>-1..n as
// owned, mounted filesystems marked ready or held, and returns them by ID.
// (Retained datasets, retained-<alloc>, are not slots.)
func checkSlots(t testing.TB, p *testPool, class string, n int) map[string]zfs.Dataset {
	t.Helper()
	classDS := p.Parent + "/" + class
	all := datasets(t, p.Parent)
	slots := map[string]zfs.Dataset{}
	for name, d := range all {
		if zfs.Parent(name) == classDS && !d.IsSnapshot() && strings.HasPrefix(name, classDS+"/"+class+"-") {
			slots[strings.TrimPrefix(name, classDS+"/")] = d
		}
	}
	if len(slots) != n {
		t.Fatalf("%d slots below %s, want %d: %v", len(slots), classDS, n, keys(slots))
	}
	for i := 1; i <= n; i++ {
		id := fmt.Sprintf("%s-%d", class, i)
		d, ok := slots[id]
		if !ok {
			t.Fatalf("no slot %s below %s: %v", id, classDS, keys(slots))
		}
		if d.User.Get(propOwner) != d.Name {
			t.Errorf("%s: %s = %q, want its own name", d.Name, propOwner, d.User.Get(propOwner))
		}
		if s := d.User.Get(propState); s != "ready" && s != "held" {
			t.Errorf("%s: %s = %q", d.Name, propState, s)
		}
		if !d.Mounted || d.Mountpoint != "/"+d.Name {
			t.Errorf("%s: mounted=%v at %q, want mounted at /%s", d.Name, d.Mounted, d.Mountpoint, d.Name)
		}
	}
	return slots
}

func keys[V any](m map[string]V) []string {
	ks := make([]string, 0, len(m))
	for k := range m {
		ks = append(ks, k)
	}
	sort.Strings(ks)
	return ks
}

// batchJob is a one-task batch job that asks for one device of class and
// runs script with /bin/sh. extra is added to the group (restart policy...).
// The script must not contain "${" (HCL interpolation).
func batchJob(id, driver, class, script, extra string) string {
	return fmt.Sprintf(`job %q {
  type = "batch"
  group "g" {
%s
    task "t" {
      driver = %q
      config {
        command = "/bin/sh"
        args    = ["-c", %q]
      }
      resources {
        device "zfs/dataset/%s" {}
      }
    }
  }
}`, id, extra, driver, script, class)
}

// held wraps a task's script: it runs body, prints "body exit <status>",
// then keeps the allocation (and so its slot and data) until the test
// calls finish, and exits with body's status. The slot's data can then be
// checked while its holder runs: once an allocation ends, the plugin
// releases its slot (by default it destroys the data).
func held(body string) string {
	return "( " + body + " ); rc=$?; echo \"body exit $rc\"; " +
		`while [ ! -e "$NOMAD_TASK_DIR/finish" ]; do sleep 0.2; done; exit $rc`
}

// finish lets a task started with held end: it creates the file the task
// waits for in its local dir.
func finish(t testing.TB, a *nomadtest.Agent, allocID string) {
	t.Helper()
	path := filepath.Join(a.DataDir(), "alloc", allocID, "t", "local", "finish")
	if err := os.WriteFile(path, nil, 0o644); err != nil {
		t.Fatalf("letting allocation %s finish: %v", allocID, err)
	}
}

// startHeld registers a job whose task runs held(body) and waits until the
// body has run; it returns the running allocation and the task's stdout.
func startHeld(t *testing.T, a *nomadtest.Agent, jobHCL string) (*api.Allocation, string) {
	t.Helper()
	job := a.RunJob(t, jobHCL)
	return waitHeld(t, a, *job.ID)
}

// waitHeld waits until the job's single allocation runs and its held body
// has finished.
func waitHeld(t *testing.T, a *nomadtest.Agent, job string) (*api.Allocation, string) {
	t.Helper()
	stubs := nomadtest.Counted(a.WaitAllocs(t, job, nomadtest.AllocsWithStatus(1, api.AllocClientStatusRunning), jobTimeout))
	var out string
	waitFor(t, jobTimeout, "job "+job+" to run its body", func() (bool, string) {
		var err error
		out, err = allocLog(a, stubs[0].ID, "stdout")
		if err != nil {
			return false, err.Error()
		}
		return strings.Contains(out, "body exit "), "stdout: " + out
	})
	return allocInfo(t, a, stubs[0].ID), out
}

// allocLog reads task "t"'s stdout or stderr; unlike AllocLogs, a log
// that does not exist yet is an error, not a failure.
func allocLog(a *nomadtest.Agent, allocID, stream string) (string, error) {
	c := a.Client()
	alloc, _, err := c.Allocations().Info(allocID, nil)
	if err != nil {
		return "", err
	}
	r, err := c.AllocFS().Cat(alloc, "alloc/logs/t."+stream+".0", nil)
	if err != nil {
		return "", err
	}
	defer r.Close()
	b, err := io.ReadAll(r)
	return string(b), err
}

// waitHolder waits until the slot dataset records allocID as its holder,
// in state held: the allocation watcher's view of the running allocation.
func waitHolder(t testing.TB, ds, allocID string) {
	t.Helper()
	waitFor(t, 30*time.Second, ds+" held by "+allocID, func() (bool, string) {
		d := dataset(t, ds)
		return d.User.Get(propState) == "held" && d.User.Get(propHolder) == allocID,
			fmt.Sprintf("state %q holder %q", d.User.Get(propState), d.User.Get(propHolder))
	})
}

// noRetry makes a failed task fail its allocation at once, without restarts
// or a reschedule.
const noRetry = `    restart {
      attempts = 0
      mode     = "fail"
    }
    reschedule {
      attempts  = 0
      unlimited = false
    }`

// runBatch registers a one-allocation job, waits until the allocation has
// ended, checks that it ended with status (api.AllocClientStatusComplete,
// ...Failed), and returns it.
func runBatch(t *testing.T, a *nomadtest.Agent, jobHCL, status string) *api.Allocation {
	t.Helper()
	job := a.RunJob(t, jobHCL)
	return waitEnded(t, a, *job.ID, status)
}

// waitEnded waits until the single allocation of job has ended and checks
// that it ended with status.
func waitEnded(t *testing.T, a *nomadtest.Agent, job, status string) *api.Allocation {
	t.Helper()
	stubs := a.WaitAllocs(t, job, func(allocs []*api.AllocationListStub) bool {
		if len(allocs) != 1 {
			return false
		}
		switch allocs[0].ClientStatus {
		case api.AllocClientStatusComplete, api.AllocClientStatusFailed, api.AllocClientStatusLost:
			return true
		}
		return false
	}, jobTimeout)
	alloc := allocInfo(t, a, stubs[0].ID)
	if alloc.ClientStatus != status {
		t.Fatalf("allocation %s of job %s: status %s (%s), want %s\n%s", alloc.ID, job,
			alloc.ClientStatus, alloc.ClientDescription, status, taskEvents(alloc))
	}
	return alloc
}

// waitComplete waits until the single allocation of job has completed.
func waitComplete(t *testing.T, a *nomadtest.Agent, job string) *api.Allocation {
	t.Helper()
	return waitEnded(t, a, job, api.AllocClientStatusComplete)
}

// taskEvents renders the allocation's task events for failure messages.
func taskEvents(alloc *api.Allocation) string {
	var b strings.Builder
	for name, ts := range alloc.TaskStates {
		fmt.Fprintf(&b, "task %s: %s failed=%v restarts=%d\n", name, ts.State, ts.Failed, ts.Restarts)
		for _, ev := range ts.Events {
			fmt.Fprintf(&b, "  %s: %s %s (exit %d)\n", ev.Type, ev.DisplayMessage, ev.Details["driver_error"], ev.ExitCode)
		}
	}
	return b.String()
}

func allocInfo(t testing.TB, a *nomadtest.Agent, id string) *api.Allocation {
	t.Helper()
	alloc, _, err := a.Client().Allocations().Info(id, nil)
	if err != nil {
		t.Fatalf("reading allocation %s: %v", id, err)
	}
	return alloc
}

// deviceID returns the one zfs device instance allocated to task "t".
func deviceID(t testing.TB, alloc *api.Allocation) string {
	t.Helper()
	tr := alloc.AllocatedResources.Tasks["t"]
	if tr == nil || len(tr.Devices) != 1 || len(tr.Devices[0].DeviceIDs) != 1 {
		t.Fatalf("allocation %s: want one device instance, have %+v", alloc.ID, tr)
	}
	d := tr.Devices[0]
	if d.Vendor != "zfs" || d.Type != "dataset" {
		t.Fatalf("allocation %s: device %s/%s/%s", alloc.ID, d.Vendor, d.Type, d.Name)
	}
	return d.DeviceIDs[0]
}

// readFile reads a file on the guest (the host side of a dataset).
func readFile(t testing.TB, path string) string {
	t.Helper()
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	return string(b)
}

func readFileErr(path string) (string, error) {
	b, err := os.ReadFile(path)
	return string(b), err
}

// pluginPIDs returns the plugin processes of agent a: argv[0] names the
// plugin binary (/proc/<pid>/comm would cut the name to 15 characters), the
// working directory is the agent's data dir, which they inherit, and the
// parent is not a plugin process: a zfs command the plugin is starting
// looks like the plugin until it has called exec.
func pluginPIDs(t testing.TB, a *nomadtest.Agent) []int {
	t.Helper()
	entries, err := os.ReadDir("/proc")
	if err != nil {
		t.Fatal(err)
	}
	var pids []int
	for _, e := range entries {
		pid, err := strconv.Atoi(e.Name())
		if err != nil {
			continue
		}
		cwd, _ := os.Readlink(filepath.Join("/proc", e.Name(), "cwd"))
		if isPlugin(pid) && cwd == a.DataDir() && !zombie(pid) && !isPlugin(ppid(pid)) {
			pids = append(pids, pid)
		}
	}
	sort.Ints(pids)
	return pids
}

// isPlugin reports whether argv[0] of pid names the plugin binary.
func isPlugin(pid int) bool {
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/cmdline", pid))
	if err != nil {
		return false
	}
	argv0, _, _ := strings.Cut(string(b), "\x00")
	return filepath.Base(argv0) == pluginName
}

// ppid returns the parent of pid, 0 if unknown.
func ppid(pid int) int {
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
	if err != nil {
		return 0
	}
	// "pid (comm) state ppid ...": comm may hold spaces and parentheses.
	i := bytes.LastIndexByte(b, ')')
	if i < 0 {
		return 0
	}
	f := strings.Fields(string(b[i+1:]))
	if len(f) < 2 {
		return 0
	}
	n, _ := strconv.Atoi(f[1])
	return n
}

func zombie(pid int) bool {
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
	if err != nil {
		return true
	}
	i := bytes.LastIndexByte(b, ')')
	return i >= 0 && i+2 < len(b) && b[i+2] == 'Z'
}

// waitFor polls cond every pollInterval until it holds or timeout, as on
// an idle guest, passes (stretched by the guest's slowness); on timeout it
// fails the test with what cond last said.
func waitFor(t testing.TB, timeout time.Duration, what string, cond func() (bool, string)) {
	t.Helper()
	deadline := nomadtest.NewDeadline(timeout, pace.Slowness)
	for {
		ok, state := cond()
		if ok {
			return
		}
		if deadline.Passed() {
			t.Fatalf("timed out after %s waiting for %s: %s", deadline, what, state)
		}
		time.Sleep(pollInterval)
	}
}

// pollInterval paces waitFor. Most conditions run a zfs command, about
// 0.1-0.2 s of CPU in the emulated guest: polling four times a second,
// a dozen tests waiting at once took a large share of the VM's two vCPUs
// and slowed everything they waited for.
const pollInterval = time.Second

// killProcess sends SIGKILL to pid.
func killProcess(t testing.TB, pid int) {
	t.Helper()
	if err := syscall.Kill(pid, syscall.SIGKILL); err != nil {
		t.Fatalf("kill -9 %d: %v", pid, err)
	}
}

// checkInstances checks every instance of g: healthy or not, and for an
// unhealthy one that its description contains want.
func checkInstances(t testing.TB, g *api.NodeDeviceResource, healthy bool, want string) {
	t.Helper()
	for _, inst := range g.Instances {
		if inst.Healthy != healthy {
			t.Errorf("instance %s: healthy=%v, want %v (%q)", inst.ID, inst.Healthy, healthy, inst.HealthDescription)
		}
		if !healthy && !strings.Contains(inst.HealthDescription, want) {
			t.Errorf("instance %s: health description %q does not contain %q", inst.ID, inst.HealthDescription, want)
		}
	}
}

// agentCPU reports the CPU time the agent's process tree has used: the
// nomad process and its reaped children (exited tasks, executors,
// throw-away plugin processes), and the running plugin with its reaped
// children (zfs and zpool).
func agentCPU(t testing.TB, a *nomadtest.Agent) string {
	nomad := a.PID()
	if nomad == 0 {
		return "agent not running"
	}
	self, children := cpuTimes(nomad)
	s := fmt.Sprintf("nomad %.1fs + children %.1fs", self, children)
	for _, pid := range pluginPIDs(t, a) {
		ps, pc := cpuTimes(pid)
		s += fmt.Sprintf(", plugin %.1fs + zfs %.1fs", ps, pc)
	}
	return s
}

// cpuTimes returns a process's own CPU seconds and its reaped children's.
func cpuTimes(pid int) (self, children float64) {
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
	if err != nil {
		return 0, 0
	}
	i := bytes.LastIndexByte(b, ')')
	f := strings.Fields(string(b[i+1:]))
	if len(f) < 15 {
		return 0, 0
	}
	var v [4]float64
	for k := range v {
		n, _ := strconv.Atoi(f[11+k])
		v[k] = float64(n) / 100 // USER_HZ
	}
	return v[0] + v[1], v[2] + v[3]
}
