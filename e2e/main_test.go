//go:build e2e

package e2e

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"
)

// Where TestMain staged the binaries (see stage).
var (
	nomadBin  string // the nomad agent binary
	pluginDir string // the agent's plugin_dir, holding nomad-device-zfs
	ctlBin    string // the operator CLI, outside pluginDir
)

const pluginName = "nomad-device-zfs"

// ctlName is the operator CLI, staged outside pluginDir: Nomad 1.6 launches
// every file in plugin_dir and does not start while one is no plugin.
const ctlName = "nomad-device-zfs-ctl"

func TestMain(m *testing.M) {
	flag.Parse()
	if testing.Short() {
		fmt.Println("e2e: -short: skipping the end-to-end tests")
		os.Exit(0)
	}
	stageDir, err := stage()
	if err != nil {
		fmt.Fprintf(os.Stderr, "e2e: %v\n"+
			"e2e: these tests run as root inside the VM of e2e/vm with real OpenZFS; run them with scripts/e2e.sh (make e2e)\n", err)
		os.Exit(2)
	}
	busy0, total0 := guestCPU()
	minAvail := watchMemory()
	ctx, cancel := context.WithCancel(context.Background())
	fmt.Println("e2e: guest speed: " + pace.start(ctx))
	paced := make(chan struct{})
	go func() { defer close(paced); pace.Run(ctx) }()
	code := m.Run()
	stopDocker()
	cancel()
	<-paced
	fmt.Println("e2e: guest speed: " + pace.summary())
	busy1, total1 := guestCPU()
	self, children := cpuTimes(os.Getpid())
	fmt.Printf("e2e: guest CPU busy %.0f s of %.0f s (all vCPUs); the test binary %.1f s, "+
		"its reaped children (agents, zfs) %.1f s; guest memory available at least %d MiB\n",
		busy1-busy0, total1-total0, self, children, minAvail()>>20)
	os.RemoveAll(stageDir)
	os.Exit(code)
}

// stage checks the environment and copies the nomad and plugin binaries from
// the 9p share into the guest's /tmp (tmpfs). Every exec of a binary on the
// share reads it again over 9p: a nomad CLI call took about 6 s from there
// and 0.3 s from tmpfs. /tmp is outside the exec driver's chroot_env, so the
// copies do not slow down the exec tasks either.
func stage() (string, error) {
	if os.Geteuid() != 0 {
		return "", errors.New("must run as root")
	}
	if _, err := os.Stat("/dev/zfs"); err != nil {
		return "", fmt.Errorf("no ZFS kernel module: %v", err)
	}
	for _, c := range []string{"zfs", "zpool"} {
		if _, err := exec.LookPath(c); err != nil {
			return "", err
		}
	}
	nomad := os.Getenv("NDZ_E2E_NOMAD")
	if nomad == "" {
		nomad = os.Getenv("NOMAD_BINARY")
	}
	if nomad == "" {
		return "", errors.New("set NDZ_E2E_NOMAD (or NOMAD_BINARY) to the nomad binary")
	}
	srcPlugins := os.Getenv("NDZ_E2E_PLUGIN_DIR")
	if srcPlugins == "" {
		return "", errors.New("set NDZ_E2E_PLUGIN_DIR to a directory holding the " + pluginName + " and " + ctlName + " binaries")
	}
	dir, err := os.MkdirTemp("", "ndz-e2e-bin-")
	if err != nil {
		return "", err
	}
	nomadBin = filepath.Join(dir, "nomad")
	pluginDir = filepath.Join(dir, "plugins")
	if err := os.Mkdir(pluginDir, 0o755); err != nil {
		return "", err
	}
	if err := copyExecutable(nomad, nomadBin); err != nil {
		return "", err
	}
	if err := copyExecutable(filepath.Join(srcPlugins, pluginName), filepath.Join(pluginDir, pluginName)); err != nil {
		return "", err
	}
	ctlBin = filepath.Join(dir, ctlName)
	if err := copyExecutable(filepath.Join(srcPlugins, ctlName), ctlBin); err != nil {
		return "", err
	}
	return dir, nil
}

func copyExecutable(src, dst string) error {
	in, err := os.Open(src)
	if err != nil {
		return err
	}
	defer in.Close()
	out, err := os.OpenFile(dst, os.O_WRONLY|os.O_CREATE|os.O_EXCL, 0o755)
	if err != nil {
		return err
	}
	if _, err := io.Copy(out, in); err != nil {
		out.Close()
		return fmt.Errorf("copying %s: %w", src, err)
	}
	return out.Close()
}

// guestCPU returns the guest's busy and total CPU seconds, all CPUs, from
// /proc/stat (busy: all but idle and iowait).
func guestCPU() (busy, total float64) {
	b, err := os.ReadFile("/proc/stat")
	if err != nil {
		return 0, 0
	}
	line, _, _ := strings.Cut(string(b), "\n")
	f := strings.Fields(line)
	for i, v := range f[1:] {
		n, _ := strconv.ParseFloat(v, 64)
		total += n / 100
		if i != 3 && i != 4 {
			busy += n / 100
		}
	}
	return busy, total
}

// watchMemory samples the guest's MemAvailable every second until the
// returned function is called, which reports the lowest, in bytes.
func watchMemory() func() int64 {
	var mu sync.Mutex
	low := int64(-1)
	done := make(chan struct{})
	sample := func() {
		b, err := os.ReadFile("/proc/meminfo")
		if err != nil {
			return
		}
		for _, l := range strings.Split(string(b), "\n") {
			if f := strings.Fields(l); len(f) >= 2 && f[0] == "MemAvailable:" {
				kb, _ := strconv.ParseInt(f[1], 10, 64)
				mu.Lock()
				if low < 0 || kb<<10 < low {
					low = kb << 10
				}
				mu.Unlock()
			}
		}
	}
	go func() {
		t := time.NewTicker(time.Second)
		defer t.Stop()
		for {
			sample()
			select {
			case <-done:
				return
			case <-t.C:
			}
		}
	}()
	return func() int64 {
		close(done)
		sample()
		mu.Lock()
		defer mu.Unlock()
		return low
	}
}
