package devicemanager_test

import (
	"context"
	"os"
	"strings"
	"testing"
	"time"

	"github.com/hashicorp/nomad/nomad/structs"

	"github.com/nomad-device-zfs/nomad-device-zfs/devicemanager"
	"github.com/nomad-device-zfs/nomad-device-zfs/internal/testrig"
	"github.com/nomad-device-zfs/nomad-device-zfs/zfs/zfstest"
)

func TestMain(m *testing.M) {
	zfstest.ImpersonateIfCalled()
	code := m.Run()
	testrig.Cleanup()
	os.Exit(code)
}

// hostFixture puts the real plugin binary into a plugin dir under
// binaryName and the fake zfs (this test binary) on the PATH the plugin
// inherits.
func hostFixture(t *testing.T, binaryName string) string {
	t.Helper()
	dir := testrig.PluginDir(t, binaryName)
	f, _ := testrig.FakeHost(t, 1<<30, true)
	testrig.UseExecutables(t, f)
	return dir
}

const agentHCL = `
plugin "nomad-device-zfs" {
  config {
    parent          = "tank/nomad"
    reserve_timeout = "1s"
    nomad {
      address = "http://127.0.0.1:1"   # no agent: Reserve must refuse, not guess
    }
    class "scratch" {
      slots = 2
      properties { quota = "1G" }
    }
  }
}`

func TestHostFakeZFS(t *testing.T) {
	if testing.Short() {
		t.Skip("builds and runs the plugin binary")
	}
	dir := hostFixture(t, "nomad-device-zfs")
	af, err := devicemanager.ParseAgentConfig(agentHCL)
	if err != nil {
		t.Fatal(err)
	}
	h, err := devicemanager.Launch(&devicemanager.Config{PluginDir: dir, Plugins: af.Plugins, Name: "nomad-device-zfs"})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(h.Close)

	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	devs, err := h.FirstFingerprint(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if len(devs) != 1 || devs[0].ID().String() != "zfs/dataset/scratch" || len(devs[0].Instances) != 2 {
		t.Fatalf("node devices %+v", devs)
	}
	// The first may show the slots still being created (a busy machine):
	// they turn healthy in a later fingerprint.
	devs = healthyFingerprint(ctx, t, h)
	if q := devs[0].Attributes["quota"]; q == nil || q.Int == nil || *q.Int != 1024 || q.Unit != "MiB" {
		t.Errorf("quota attribute %v", q)
	}

	// No Nomad API: the plugin cannot tell who asks, so it refuses.
	_, err = h.Device.Reserve([]string{"scratch-1"})
	if err == nil || !strings.Contains(err.Error(), "Nomad API") {
		t.Fatalf("Reserve without the Nomad API: %v", err)
	}
}

func TestHostRefusesLikeTheAgent(t *testing.T) {
	if testing.Short() {
		t.Skip("builds and runs the plugin binary")
	}
	cases := []struct {
		name, binary, hcl string
		want              []string
	}{
		{"bad config", "nomad-device-zfs", strings.Replace(agentHCL, "slots = 2", "slots = 0", 1), []string{"slots = 0"}},
		// Nomad 1.6.2's loader launches a binary whose file name no block
		// names with an empty configuration, which the plugin refuses (1.11.3
		// said it had no plugin of the block's name).
		{"binary name does not match its block", "zfs-plugin", agentHCL,
			[]string{`plugin "nomad-device-zfs" (device): failed to parse config`, `"parent" is required`}},
		{"no block", "nomad-device-zfs", `plugin "other" { config {} }`, []string{`no plugin "nomad-device-zfs" block`}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			dir := hostFixture(t, tc.binary)
			af, err := devicemanager.ParseAgentConfig(tc.hcl)
			if err != nil {
				t.Fatal(err)
			}
			h, err := devicemanager.Launch(&devicemanager.Config{PluginDir: dir, Plugins: af.Plugins, Name: "nomad-device-zfs"})
			if err == nil {
				h.Close()
				t.Fatal("launched")
			}
			for _, w := range tc.want {
				if !strings.Contains(err.Error(), w) {
					t.Errorf("error %q lacks %q", err, w)
				}
			}
		})
	}
}

// healthyFingerprint reads the plugin's fingerprints until every instance
// is healthy, and fails the test with the last unhealthy one at ctx's end.
func healthyFingerprint(ctx context.Context, t *testing.T, h *devicemanager.Host) []*structs.NodeDeviceResource {
	t.Helper()
	ch, err := h.Device.Fingerprint(ctx)
	if err != nil {
		t.Fatal(err)
	}
	var why []string
	for {
		select {
		case <-ctx.Done():
			t.Fatalf("no fingerprint with every slot healthy: %v", why)
		case resp, ok := <-ch:
			if !ok || resp.Error != nil {
				t.Fatalf("fingerprint stream: closed %v, error %v", !ok, resp)
			}
			devs, err := devicemanager.NodeDevices(resp.Devices)
			if err != nil {
				t.Fatal(err)
			}
			why = why[:0]
			for _, d := range devs {
				for _, inst := range d.Instances {
					if !inst.Healthy {
						why = append(why, inst.ID+": "+inst.HealthDescription)
					}
				}
			}
			if len(why) == 0 {
				return devs
			}
		}
	}
}
