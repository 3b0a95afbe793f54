package nomadtest_test

import (
	"context"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/hashicorp/go-hclog"
	"github.com/hashicorp/nomad/plugins/base"
	"github.com/hashicorp/nomad/plugins/device"
	"github.com/hashicorp/nomad/plugins/shared/hclspec"
)

// The test binary doubles as a device plugin: installed in a plugin dir and
// launched by the agent with fakePluginEnv=1, TestMain serves fakeDevice
// instead of running tests.
const (
	fakePluginName = "nomadtest-fake-device"
	fakePluginEnv  = "NOMADTEST_FAKE_DEVICE_PLUGIN"
	fakeVendor     = "nomadtest"
	fakeType       = "fake"
	fakeModel      = "dev"
	// fakeIDsEnv is the env var Reserve hands to tasks.
	fakeIDsEnv = "NOMADTEST_FAKE_DEVICE_IDS"
)

var fakeSpec = hclspec.NewObject(map[string]*hclspec.Spec{
	// count is the number of instances, "dev-0" to "dev-<count-1>".
	"count": hclspec.NewDefault(hclspec.NewAttr("count", "number", false), hclspec.NewLiteral("2")),
	// unhealthy is how many of them, from dev-0 up, are reported unhealthy.
	"unhealthy": hclspec.NewDefault(hclspec.NewAttr("unhealthy", "number", false), hclspec.NewLiteral("0")),
})

type fakeConfig struct {
	Count     int `codec:"count"`
	Unhealthy int `codec:"unhealthy"`
}

// fakeDevice reports one fixed group once and reserves by env var.
type fakeDevice struct {
	mu  sync.Mutex
	cfg fakeConfig
}

var _ device.DevicePlugin = (*fakeDevice)(nil)

func serveFakeDevice() {
	logger := hclog.New(&hclog.LoggerOptions{Name: fakePluginName, JSONFormat: true, Level: hclog.Trace, Output: os.Stderr})
	device.Serve(&fakeDevice{}, logger)
}

func (d *fakeDevice) PluginInfo() (*base.PluginInfoResponse, error) {
	return &base.PluginInfoResponse{
		Type:              base.PluginTypeDevice,
		PluginApiVersions: []string{device.ApiVersion010},
		PluginVersion:     "v0.1.0",
		Name:              fakePluginName,
	}, nil
}

func (d *fakeDevice) ConfigSchema() (*hclspec.Spec, error) { return fakeSpec, nil }

func (d *fakeDevice) SetConfig(c *base.Config) error {
	var cfg fakeConfig
	if err := base.MsgPackDecode(c.PluginConfig, &cfg); err != nil {
		return err
	}
	if cfg.Count < 0 || cfg.Unhealthy < 0 || cfg.Unhealthy > cfg.Count {
		return fmt.Errorf("bad config %+v", cfg)
	}
	d.mu.Lock()
	d.cfg = cfg
	d.mu.Unlock()
	return nil
}

func (d *fakeDevice) Fingerprint(ctx context.Context) (<-chan *device.FingerprintResponse, error) {
	d.mu.Lock()
	cfg := d.cfg
	d.mu.Unlock()
	g := &device.DeviceGroup{Vendor: fakeVendor, Type: fakeType, Name: fakeModel}
	for i := range cfg.Count {
		g.Devices = append(g.Devices, &device.Device{
			ID:         fmt.Sprintf("dev-%d", i),
			Healthy:    i >= cfg.Unhealthy,
			HealthDesc: map[bool]string{true: "", false: "configured unhealthy"}[i >= cfg.Unhealthy],
		})
	}
	ch := make(chan *device.FingerprintResponse, 1)
	ch <- device.NewFingerprint(g)
	return ch, nil // never closed: a closed stream disables the plugin
}

func (d *fakeDevice) Reserve(ids []string) (*device.ContainerReservation, error) {
	return &device.ContainerReservation{Envs: map[string]string{fakeIDsEnv: strings.Join(ids, ",")}}, nil
}

func (d *fakeDevice) Stats(ctx context.Context, _ time.Duration) (<-chan *device.StatsResponse, error) {
	return make(chan *device.StatsResponse), nil
}

// installFakePlugin copies the test binary into a fresh plugin dir under the
// name the agent config must reference, and returns the dir.
func installFakePlugin(t *testing.T) string {
	t.Helper()
	self, err := os.Executable()
	if err != nil {
		t.Fatal(err)
	}
	dir := t.TempDir()
	src, err := os.Open(self)
	if err != nil {
		t.Fatal(err)
	}
	defer src.Close()
	dst, err := os.OpenFile(filepath.Join(dir, fakePluginName), os.O_WRONLY|os.O_CREATE|os.O_EXCL, 0o755)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := io.Copy(dst, src); err != nil {
		t.Fatal(err)
	}
	if err := dst.Close(); err != nil {
		t.Fatal(err)
	}
	return dir
}
