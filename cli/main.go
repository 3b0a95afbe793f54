package cli

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"os/signal"
	"sort"
	"strings"
	"syscall"
	"time"

	"github.com/hashicorp/nomad/plugins/base"

	"github.com/nomad-device-zfs/nomad-device-zfs/plugin"
	"github.com/nomad-device-zfs/nomad-device-zfs/zfs"
	"github.com/nomad-device-zfs/nomad-device-zfs/zfs/zfsexec"
)

// Name is the operator CLI's binary, cmd/nomad-device-zfs-ctl.
const Name = plugin.CtlName

// Main is nomad-device-zfs-ctl's whole main: it returns the exit status.
//
//   - Run as zfs or zpool by a plugin that doctor hosts: the read-only shim.
//   - Run by Nomad as a plugin (the go-plugin magic cookie is in the
//     environment): refuse; the plugin is the nomad-device-zfs binary.
//   - Otherwise: the operator CLI.
func Main(args []string) int {
	if code, ok := runShim(args); ok {
		return code
	}
	if os.Getenv(base.Handshake.MagicCookieKey) != "" {
		fmt.Fprintf(os.Stderr, "%s is the operator CLI of %s, not the plugin: put the %s binary in plugin_dir\n",
			Name, plugin.Name, plugin.Name)
		return 1
	}
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	return Run(ctx, args[1:], os.Stdout, os.Stderr)
}

// env is what a command needs from the outside world; tests replace it.
type env struct {
	stdout, stderr io.Writer
	// runner runs zfs and zpool; nil means the real executables.
	runner zfs.Runner
	// now is the clock; nil means time.Now.
	now func() time.Time
	// poll paces release's wait for the plugin; 0 means a second.
	poll time.Duration
}

func (e *env) zfs(timeout time.Duration) *zfs.Client {
	if e.runner != nil {
		return zfs.NewClient(e.runner)
	}
	return zfs.NewClient(&zfsexec.Runner{Timeout: timeout})
}

func (e *env) clock() time.Time {
	if e.now != nil {
		return e.now()
	}
	return time.Now()
}

// command is one subcommand.
type command struct {
	synopsis string
	run      func(ctx context.Context, e *env, args []string) int
}

var commands = map[string]command{
	"doctor":  {"Check the plugin's configuration, ZFS and Nomad API access; show what Nomad would see", runDoctor},
	"status":  {"Show the slots by class, their holders, and retained data", runStatus},
	"release": {"Ask the running plugin to release a slot by its class's policy", runRelease},
	"gc":      {"Destroy retained data past its retention (and beyond retain_max)", runGC},
	"plan":    {"Show which nodes and slots a job's device asks would get now, or why not", runPlanCommand},
	"version": {"Print the version", runVersion},
}

// Run runs the CLI with args (without the program name) and returns the
// exit status.
func Run(ctx context.Context, args []string, stdout, stderr io.Writer) int {
	return (&env{stdout: stdout, stderr: stderr}).run(ctx, args)
}

func (e *env) run(ctx context.Context, args []string) int {
	if len(args) == 0 {
		usage(e.stderr)
		return 1
	}
	switch args[0] {
	case "-h", "-help", "--help", "help":
		usage(e.stdout)
		return 0
	}
	cmd, ok := commands[args[0]]
	if !ok {
		fmt.Fprintf(e.stderr, "unknown command %q\n\n", args[0])
		usage(e.stderr)
		return 1
	}
	return cmd.run(ctx, e, args[1:])
}

func usage(w io.Writer) {
	fmt.Fprintf(w, `Usage: %s <command> [options]

The operator CLI of the nomad-device-zfs device plugin (the binary Nomad runs
from its plugin_dir). Commands read the plugin's configuration from the Nomad
agent's configuration files (-config, default %s).

Commands:
`, Name, defaultConfigPath)
	names := make([]string, 0, len(commands))
	for n := range commands {
		names = append(names, n)
	}
	sort.Strings(names)
	for _, n := range names {
		fmt.Fprintf(w, "    %-9s %s\n", n, commands[n].synopsis)
	}
	fmt.Fprintf(w, "\nRun '%s <command> -h' for a command's options.\n", Name)
}

// newFlags returns a command's flag set; its usage names the command.
func newFlags(e *env, name, args, help string) *flag.FlagSet {
	fs := flag.NewFlagSet(name, flag.ContinueOnError)
	fs.SetOutput(e.stderr)
	fs.Usage = func() {
		fmt.Fprintf(fs.Output(), "Usage: %s %s [options] %s\n\n%s\n\nOptions:\n\n", Name, name, args, strings.TrimSpace(help))
		fs.PrintDefaults()
	}
	return fs
}

// parse parses args; done reports that the command must return code.
func parse(fs *flag.FlagSet, args []string) (code int, done bool) {
	err := fs.Parse(args)
	switch {
	case errors.Is(err, flag.ErrHelp):
		return 0, true
	case err != nil:
		return 1, true
	}
	return 0, false
}

// commonFlags are the flags of every command that reads the agent's
// configuration.
type commonFlags struct {
	configs stringsFlag
	json    bool
}

func (c *commonFlags) register(fs *flag.FlagSet) {
	fs.Var(&c.configs, "config", "Agent configuration file or directory; repeatable (default "+defaultConfigPath+").")
	fs.BoolVar(&c.json, "json", false, "Print JSON.")
}

// parseNoArgs parses args for a command that takes no arguments.
func parseNoArgs(e *env, fs *flag.FlagSet, args []string) (code int, done bool) {
	if code, done := parse(fs, args); done {
		return code, true
	}
	if fs.NArg() > 0 {
		fmt.Fprintf(e.stderr, "%s takes no arguments, got %q\n", fs.Name(), fs.Args())
		return 1, true
	}
	return 0, false
}

// stringsFlag is a repeatable string flag, like the agent's -config.
type stringsFlag []string

func (s *stringsFlag) String() string     { return strings.Join(*s, ",") }
func (s *stringsFlag) Set(v string) error { *s = append(*s, v); return nil }

func runVersion(_ context.Context, e *env, args []string) int {
	fs := newFlags(e, "version", "", "Print the plugin's version.")
	if code, done := parse(fs, args); done {
		return code
	}
	fmt.Fprintf(e.stdout, "%s %s\n", plugin.Name, plugin.Version)
	return 0
}
