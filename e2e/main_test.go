//go:build e2e

package e2e

import (
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"testing"
)

// Where TestMain staged the binaries (see stage).
var (
	nomadBin  string // the nomad agent binary
	pluginDir string // the agent's plugin_dir, holding nomad-device-zfs
)

const pluginName = "nomad-device-zfs"

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
	code := m.Run()
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
		return "", errors.New("set NDZ_E2E_PLUGIN_DIR to a directory holding the " + pluginName + " binary")
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
