package cli

import (
	"context"
	"debug/buildinfo"
	"errors"
	"fmt"
	"maps"
	"os"
	"path"
	"path/filepath"
	"slices"
	"strings"
	"time"

	"github.com/hashicorp/nomad/nomad/structs/config"

	"github.com/nomad-device-zfs/nomad-device-zfs/devicemanager"
	"github.com/nomad-device-zfs/nomad-device-zfs/hooks"
	"github.com/nomad-device-zfs/nomad-device-zfs/model"
	"github.com/nomad-device-zfs/nomad-device-zfs/plugin"
	"github.com/nomad-device-zfs/nomad-device-zfs/zfs"
)

const doctorHelp = `
Check what the plugin depends on, the way the Nomad agent would meet it:
the agent's configuration files (-config, like 'nomad agent -config'), the
plugin binary in plugin_dir and its block, the plugin's configuration (with
the agent's own error text), zfs and zpool, every parent dataset and its
pool, the class datasets, and the Nomad API at the address and with the token the
plugin uses, capability by capability. Then it starts the plugin binary as
the agent does and prints the device groups Nomad would see.

One line per check: ✓ passed, ✗ a problem, ! worth knowing. The exit status
is 1 when there is a problem. Doctor changes nothing: the plugin it starts
runs zfs and zpool through a read-only shim, so a slot it would create shows
as "not created yet".`

type doctorReport struct {
	OK       bool         `json:"ok"`
	Problems int          `json:"problems"`
	Checks   []checkJSON  `json:"checks"`
	Devices  []deviceJSON `json:"devices,omitempty"`
}

type checkJSON struct {
	Section string `json:"section"`
	// Status is ok, fail or warn.
	Status  string `json:"status"`
	Message string `json:"message"`
}

type deviceJSON struct {
	Name       string            `json:"name"`
	Attributes map[string]string `json:"attributes"`
	Instances  []instanceJSON    `json:"instances"`
}

type instanceJSON struct {
	ID      string `json:"id"`
	Healthy bool   `json:"healthy"`
	Reason  string `json:"reason,omitempty"`
}

// fingerprintTimeout bounds the wait for the hosted plugin's first
// fingerprint (Nomad's client waits up to 50 s for it).
const fingerprintTimeout = 50 * time.Second

func runDoctor(ctx context.Context, e *env, args []string) int {
	fs := newFlags(e, "doctor", "", doctorHelp)
	var cf commonFlags
	cf.register(fs)
	if code, done := parseNoArgs(e, fs, args); done {
		return code
	}
	d := &doctor{e: e, json: cf.json, rep: &doctorReport{Checks: []checkJSON{}}}
	d.run(ctx, cf.configs)
	d.rep.OK = d.rep.Problems == 0
	if d.json {
		if err := printJSON(e.stdout, d.rep); err != nil {
			return 1
		}
	} else if d.rep.Problems == 0 {
		fmt.Fprintln(e.stdout, "\nNo problems found.")
	} else {
		fmt.Fprintf(e.stdout, "\n%d problem(s) found.\n", d.rep.Problems)
	}
	if d.rep.OK {
		return 0
	}
	return 1
}

// doctor runs the checks and prints each as it completes.
type doctor struct {
	e       *env
	json    bool
	rep     *doctorReport
	section string
}

func (d *doctor) begin(section string) {
	d.section = section
	if !d.json {
		if len(d.rep.Checks) > 0 || d.rep.Devices != nil {
			fmt.Fprintln(d.e.stdout)
		}
		fmt.Fprintln(d.e.stdout, section)
	}
}

func (d *doctor) add(status, mark, format string, a ...any) {
	msg := fmt.Sprintf(format, a...)
	d.rep.Checks = append(d.rep.Checks, checkJSON{Section: d.section, Status: status, Message: msg})
	if status == "fail" {
		d.rep.Problems++
	}
	if !d.json {
		fmt.Fprintf(d.e.stdout, "  %s %s\n", mark, msg)
	}
}

func (d *doctor) ok(format string, a ...any)   { d.add("ok", "✓", format, a...) }
func (d *doctor) fail(format string, a ...any) { d.add("fail", "✗", format, a...) }
func (d *doctor) warn(format string, a ...any) { d.add("warn", "!", format, a...) }

func (d *doctor) run(ctx context.Context, configs []string) {
	d.begin("Configuration")
	ac, err := loadAgentConfig(configs)
	if err != nil {
		d.fail("%v", err)
		d.begin("ZFS")
		d.zfsVersion(ctx, zfs.DefaultTimeout)
		return
	}
	d.ok("agent configuration: %s", ac.files())
	pluginDir := ac.pluginDir()
	block := ac.block()
	binOK := d.checkBinary(ac, pluginDir, block)

	var st *settings
	var cfgErr error
	if block != nil {
		st, cfgErr = decodeBlock(block)
	}
	var host *devicemanager.Host
	switch {
	case cfgErr != nil:
		// SetConfig's text, which the agent prints inside its own error.
		d.fail("configuration invalid; the agent would refuse to start: %s", oneLine(cfgErr.Error()))
	case binOK:
		h, cleanup, err := d.launch(pluginDir, block)
		defer cleanup()
		if err != nil {
			d.fail("the plugin does not start the way the agent starts it: %s", oneLine(err.Error()))
		} else {
			host = h
			defer host.Close()
		}
	}
	if st != nil {
		d.ok("configuration valid: parent %q, %s", st.Slots.Parent, describeClasses(&st.Slots))
	}

	d.begin("ZFS")
	timeout := zfs.DefaultTimeout
	if st != nil {
		timeout = st.ZFSTimeout
	}
	d.zfsVersion(ctx, timeout)
	if st != nil {
		d.checkDatasets(ctx, st, timeout)
		d.checkAPI(ctx, st.Nomad)
	}
	if host != nil {
		d.devices(ctx, host)
	}
}

// cmdPath is the main package of this project's binary, as recorded in
// every binary's build information: it tells our plugin binary under
// another file name.
const cmdPath = "github.com/nomad-device-zfs/nomad-device-zfs/cmd/nomad-device-zfs"

// ctlPath is the operator CLI's main package: its binary is no plugin.
const ctlPath = cmdPath + "-ctl"

// mainPackage is the main package recorded in binary path's build
// information, or "".
func mainPackage(path string) string {
	bi, err := buildinfo.ReadFile(path)
	if err != nil {
		return ""
	}
	return bi.Path
}

// checkBinary checks the plugin binary against the block, as the agent's
// loader pairs them: by file name. It reports whether the agent would
// launch <plugin_dir>/nomad-device-zfs with the block.
func (d *doctor) checkBinary(ac *agentConfig, pluginDir string, block *config.PluginConfig) bool {
	if pluginDir == "" {
		d.fail("neither plugin_dir nor data_dir is set in %s: the agent would not know where the plugin is", ac.files())
		return false
	}
	want := filepath.Join(pluginDir, plugin.Name)
	// A 1.6 agent would not start at all, and the loader doctor runs is
	// 1.6.2's: the plugin is not started until the CLI is moved.
	ctls := ctlBinaries(pluginDir, want)
	for _, ctl := range ctls {
		d.fail("the operator CLI %s is in plugin_dir: Nomad 1.6 launches every file there and does not start while one is no plugin "+
			"(Nomad 1.7 and later skip it); move it onto the PATH (mv %s /usr/local/bin/)", ctl, ctl)
	}
	others := pluginBinaries(pluginDir)
	fi, statErr := os.Stat(want)
	exists := statErr == nil && !fi.IsDir()
	switch {
	case block != nil && exists && fi.Mode()&0o111 == 0:
		d.fail("plugin binary %s is not executable: the agent skips it (chmod 755 %s)", want, want)
	case block != nil && exists && mainPackage(want) == ctlPath:
		d.fail("%s is the operator CLI (%s), not the plugin: the agent could not start it; install the %s binary there",
			want, plugin.CtlName, plugin.Name)
	case block != nil && exists:
		d.ok("plugin binary %s matches its block plugin %q", want, plugin.Name)
		return len(ctls) == 0
	case block != nil && len(others) > 0:
		d.fail("plugin binary is named %s, but the block is plugin %q: the agent loads a binary only under its block's name (mv %s %s)",
			others[0], plugin.Name, others[0], want)
	case block != nil:
		d.fail("no plugin binary %s (plugin_dir %s): copy the binary there under that name", want, pluginDir)
	case len(others) > 0 && devicemanager.FindPlugin(ac.Plugins, filepath.Base(others[0])) != nil:
		name := filepath.Base(others[0])
		d.fail("plugin block %q loads %s, which is nomad-device-zfs: name both the block and the binary %q", name, others[0], plugin.Name)
	case exists || len(others) > 0:
		bin := want
		if !exists {
			bin = others[0]
		}
		d.fail("no plugin %q block in %s: the agent loads %s only when a plugin block names it", plugin.Name, ac.files(), bin)
	default:
		d.fail("no plugin %q block in %s, and no plugin binary in %s", plugin.Name, ac.files(), pluginDir)
	}
	return false
}

// pluginBinaries lists the files in dir, other than nomad-device-zfs, that
// are this project's binary under another name.
func pluginBinaries(dir string) []string {
	entries, err := os.ReadDir(dir)
	if err != nil {
		return nil
	}
	var out []string
	for _, e := range entries {
		if e.IsDir() || e.Name() == plugin.Name {
			continue
		}
		if p := filepath.Join(dir, e.Name()); mainPackage(p) == cmdPath {
			out = append(out, p)
		}
	}
	return out
}

// ctlBinaries lists the operator CLI's binaries in dir but at want (the
// plugin's own name: checkBinary says what that one is).
func ctlBinaries(dir, want string) []string {
	entries, err := os.ReadDir(dir)
	if err != nil {
		return nil
	}
	var out []string
	for _, e := range entries {
		p := filepath.Join(dir, e.Name())
		if !e.IsDir() && p != want && mainPackage(p) == ctlPath {
			out = append(out, p)
		}
	}
	return out
}

// launch starts the plugin binary as the agent does, its zfs and zpool
// through the read-only shim, and without its metrics block: the port is
// the agent's plugin's.
// Only the plugin's own block is passed: the loader then starts no other
// plugin binary that plugin_dir may hold.
func (d *doctor) launch(pluginDir string, block *config.PluginConfig) (*devicemanager.Host, func(), error) {
	if _, ok := block.Config["metrics"]; ok {
		cp := *block
		cp.Config = maps.Clone(block.Config)
		delete(cp.Config, "metrics")
		block = &cp
	}
	restore, cleanup, err := readOnlyZFS()
	if err != nil {
		return nil, func() {}, fmt.Errorf("cannot set up the read-only zfs: %w", err)
	}
	defer restore()
	h, err := devicemanager.Launch(&devicemanager.Config{PluginDir: pluginDir, Plugins: []*config.PluginConfig{block}, Name: plugin.Name})
	if err != nil {
		cleanup()
		return nil, func() {}, err
	}
	return h, cleanup, nil
}

func (d *doctor) zfsVersion(ctx context.Context, timeout time.Duration) {
	v, err := d.e.zfs(timeout).Version(ctx)
	switch {
	case errors.Is(err, zfs.ErrNotFound):
		d.fail("zfs is not installed: no zfs on PATH (%s)", os.Getenv("PATH"))
	case err != nil:
		d.fail("zfs version failed: %v", err)
	default:
		d.ok("%s", v)
	}
}

// checkDatasets scans every parent as the plugin does and reports the
// problems the plugin would report as unhealthy instances: each parent's
// pool and the parent itself, then the classes below the parents that have
// no problem.
func (d *doctor) checkDatasets(ctx context.Context, st *settings, timeout time.Duration) {
	v, err := hooks.Inspect(ctx, &st.Slots, d.e.zfs(timeout))
	switch {
	case errors.Is(err, zfs.ErrNotFound):
		d.fail("zpool is not installed: no zpool on PATH (%s)", os.Getenv("PATH"))
		return
	case err != nil:
		d.fail("cannot scan %s: %v", strings.Join(st.Slots.Parents(), ", "), err)
		return
	}
	var pools []string
	for _, p := range v.Parents {
		if p.Problem != "" {
			d.fail("%s", p.Problem)
			continue
		}
		if !slices.Contains(pools, p.Pool.Name) {
			pools = append(pools, p.Pool.Name)
			d.ok("pool %q %s, %s free", p.Pool.Name, p.Pool.Health, size(p.Pool.Free))
		}
		d.ok("parent %q exists and is mounted", p.Dataset)
		for _, m := range p.Moved {
			d.warn("%s is the plugin's dataset of class %q, which is below %s now: the plugin leaves it alone, with its slots "+
				"and the data kept below it; destroy it once no task uses them (zfs destroy -r %s)", m, path.Base(m), st.Slots.ClassParent(path.Base(m)), m)
		}
	}
	for ci := range v.Classes {
		cv := &v.Classes[ci]
		if v.ParentProblem(cv) != "" {
			continue // reported with its parent
		}
		if cv.Problem != "" {
			d.fail("%s", cv.Problem)
			continue
		}
		created := 0
		for _, s := range cv.Slots {
			switch {
			case s.Foreign:
				d.fail("%s", s.Reason)
			case s.Trespassed():
				d.fail("slot %s: %s", s.ID, s.Reason)
			}
			if s.Exists {
				created++
			}
		}
		for _, r := range cv.Retained {
			if p := r.Problem(&st.Slots); p != "" {
				d.fail("retained data %s is kept past its retention: %s", r.Dataset, p)
			}
		}
		if cv.Exists {
			d.ok("class %q: %s is the plugin's, %s; %d of %d slots created%s", cv.Class.Name, cv.Dataset, mountState(&cv.Info), created,
				cv.Class.Slots, replicaCount(cv.Replicas))
		} else {
			d.ok("class %q: %s not created yet (the plugin creates it)", cv.Class.Name, cv.Dataset)
		}
	}
}

// replicaCount says how many replicas of other nodes' slots a class's
// dataset holds, for the class's line; "" for none.
func replicaCount(rs []model.Replica) string {
	switch len(rs) {
	case 0:
		return ""
	case 1:
		return "; 1 replica of another node's slot"
	}
	return fmt.Sprintf("; %d replicas of other nodes' slots", len(rs))
}

// oneLine folds a multi-line error (a multierror's list) into one line.
func oneLine(s string) string {
	return strings.Join(strings.Fields(s), " ")
}

func describeClasses(cfg *model.Config) string {
	parts := make([]string, 0, len(cfg.Classes))
	for _, c := range cfg.Classes {
		where := ""
		if p := cfg.ClassParent(c.Name); p != cfg.Parent {
			where = ", parent " + p
		}
		parts = append(parts, fmt.Sprintf("%s (%d slots, release %s%s)", c.Name, c.Slots, c.Release.Policy, where))
	}
	return fmt.Sprintf("%d class(es): %s", len(cfg.Classes), strings.Join(parts, ", "))
}

// mountState names a dataset's mount state for people.
func mountState(d *zfs.Dataset) string {
	if d.Mounted {
		return "mounted at " + d.Mountpoint
	}
	return "not mounted"
}
