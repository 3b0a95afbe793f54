package nomadtest

import (
	"bytes"
	"errors"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
)

const (
	// binaryEnv names a Nomad binary to use instead of building one.
	binaryEnv = "NOMAD_BINARY"
	// skipEnv, set to "1", skips every test that needs a real Nomad.
	skipEnv = "NDZ_SKIP_NOMAD"
	// binScript builds and caches Nomad; relative to the module root.
	binScript = "tools/nomad-bin.sh"
)

// Binary returns the path of the Nomad binary for tests: $NOMAD_BINARY if
// set, else the path printed by tools/nomad-bin.sh, found by walking up from
// the working directory to the module root. The script builds Nomad the first
// time (about 6 minutes on 2 cores) and waits on a lock if another build is
// running. Binary skips the test only when NDZ_SKIP_NOMAD=1; any other
// failure to get a binary fails the test.
func Binary(t testing.TB) string {
	t.Helper()
	if os.Getenv(skipEnv) == "1" {
		t.Skipf("%s=1: skipping test that needs a real Nomad agent", skipEnv)
	}
	if p := os.Getenv(binaryEnv); p != "" {
		if err := checkExecutable(p); err != nil {
			t.Fatalf("nomadtest: $%s: %v", binaryEnv, err)
		}
		return p
	}
	root, err := moduleRoot()
	if err != nil {
		t.Fatalf("nomadtest: finding %s: %v (set $%s to a nomad binary, or %s=1 to skip)", binScript, err, binaryEnv, skipEnv)
	}
	var stdout, stderr bytes.Buffer
	cmd := exec.Command("bash", filepath.Join(root, binScript))
	cmd.Dir = root
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	if err := cmd.Run(); err != nil {
		t.Fatalf("nomadtest: %s: %v\n%s", binScript, err, stderr.String())
	}
	p := strings.TrimSpace(stdout.String())
	if err := checkExecutable(p); err != nil {
		t.Fatalf("nomadtest: %s printed %q: %v\n%s", binScript, p, err, stderr.String())
	}
	return p
}

func checkExecutable(p string) error {
	fi, err := os.Stat(p)
	if err != nil {
		return err
	}
	if fi.IsDir() || fi.Mode().Perm()&0o111 == 0 {
		return errors.New("not an executable file")
	}
	return nil
}

// moduleRoot walks up from the working directory (a package dir under go
// test) to the first directory holding both go.mod and the build script.
func moduleRoot() (string, error) {
	dir, err := os.Getwd()
	if err != nil {
		return "", err
	}
	for {
		_, errMod := os.Stat(filepath.Join(dir, "go.mod"))
		_, errScript := os.Stat(filepath.Join(dir, binScript))
		if errMod == nil && errScript == nil {
			return dir, nil
		}
		parent := filepath.Dir(dir)
		if parent == dir {
			return "", errors.New("no module root with " + binScript + " above the working directory")
		}
		dir = parent
	}
}
