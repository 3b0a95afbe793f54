package cli

import (
	"os/exec"
	"path/filepath"
	"runtime"
	"strings"
	"testing"

	hclog "github.com/hashicorp/go-hclog"
	"github.com/hashicorp/nomad/helper/pluginutils/loader"
	"github.com/hashicorp/nomad/plugins/base"

	"github.com/nomad-device-zfs/nomad-device-zfs/devicemanager"
	"github.com/nomad-device-zfs/nomad-device-zfs/plugin"
)

// TestStampedVersion builds the binary the way `make build` and `make dist`
// stamp it (tools/version.sh into plugin.Version) and checks that both the
// version command and PluginInfo report that version, and that Nomad's own
// plugin loader accepts it: the loader refuses a plugin whose version is
// not a semantic version, so a bad stamp (a bare commit hash) would keep
// every agent from loading the plugin.
func TestStampedVersion(t *testing.T) {
	if testing.Short() {
		t.Skip("builds and runs the plugin binary")
	}
	_, file, _, _ := runtime.Caller(0)
	root := filepath.Dir(filepath.Dir(file))
	out, err := exec.Command(filepath.Join(root, "tools", "version.sh")).Output()
	must(t, err)
	version := strings.TrimSpace(string(out))
	if !strings.HasPrefix(version, "v") {
		t.Fatalf("tools/version.sh printed %q, want v<semver>", version)
	}

	dir := t.TempDir()
	bin := filepath.Join(dir, plugin.Name)
	build := exec.Command("go", "build", "-trimpath",
		"-ldflags", "-X github.com/nomad-device-zfs/nomad-device-zfs/plugin.Version="+version,
		"-o", bin, "./cmd/nomad-device-zfs")
	build.Dir = root
	if b, err := build.CombinedOutput(); err != nil {
		t.Fatalf("building with version %s: %v\n%s", version, err, b)
	}

	t.Run("version command", func(t *testing.T) {
		got, err := exec.Command(bin, "version").Output()
		must(t, err)
		if want := plugin.Name + " " + version + "\n"; string(got) != want {
			t.Fatalf("version printed %q, want %q", got, want)
		}
	})

	t.Run("PluginInfo through Nomad's plugin loader", func(t *testing.T) {
		af, err := devicemanager.ParseAgentConfig(`plugin "nomad-device-zfs" {
  config {
    parent = "tank/nomad"
    class "scratch" {
      slots = 1
    }
  }
}`)
		must(t, err)
		l, err := loader.NewPluginLoader(&loader.PluginLoaderConfig{
			Logger:            hclog.NewNullLogger(),
			PluginDir:         dir,
			Configs:           af.Plugins,
			SupportedVersions: loader.AgentSupportedApiVersions,
		})
		if err != nil {
			t.Fatalf("Nomad's plugin loader refused the binary stamped %s: %v", version, err)
		}
		var found []string
		for _, info := range l.Catalog()[base.PluginTypeDevice] {
			found = append(found, info.Name+" "+info.PluginVersion)
		}
		if len(found) != 1 || found[0] != plugin.Name+" "+version {
			t.Fatalf("device plugins in the catalog: %q, want [%q]", found, plugin.Name+" "+version)
		}
	})
}
