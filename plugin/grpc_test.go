package plugin

import (
	"context"
	"os"
	"path/filepath"
	"testing"
	"time"

	hclog "github.com/hashicorp/go-hclog"
	goplugin "github.com/hashicorp/go-plugin"
	"github.com/hashicorp/nomad/plugins/base"
	"github.com/hashicorp/nomad/plugins/device"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	"github.com/nomad-device-zfs/nomad-device-zfs/devicemanager"
	"github.com/nomad-device-zfs/nomad-device-zfs/zfs"
	"github.com/nomad-device-zfs/nomad-device-zfs/zfs/zfstest"
)

// grpcPlugin serves a Plugin over go-plugin's in-process gRPC connection,
// the same protocol Nomad speaks with the binary, with zfs below the seam
// faked. It returns the client side as Nomad sees it.
func grpcPlugin(t *testing.T, agentHCL string) (device.DevicePlugin, *Plugin, *zfstest.Fake) {
	t.Helper()
	f := zfstest.New(zfstest.Options{MountRoot: t.TempDir()})
	must(t, f.AddPool("tank", 1<<30))
	must(t, zfs.NewClient(f).Create(t.Context(), "tank/nomad", nil))

	impl := New(hclog.NewNullLogger())
	impl.newRunner = func(*Settings) zfs.Runner { return f }
	impl.noWatcher = true // no Nomad API here; the lifecycle is tested in hooks and on a real agent
	t.Cleanup(impl.Shutdown)
	client, server := goplugin.TestPluginGRPCConn(t, true, map[string]goplugin.Plugin{
		base.PluginTypeBase:   &base.PluginBase{Impl: impl},
		base.PluginTypeDevice: &device.PluginDevice{Impl: impl},
	})
	// Stop the server first: client.Close asks it to stop too (a Shutdown RPC),
	// and the two Stops race inside go-plugin.
	t.Cleanup(func() { server.Stop(); _ = client.Close() })
	raw, err := client.Dispense(base.PluginTypeDevice)
	must(t, err)
	dev := raw.(device.DevicePlugin)

	info, err := dev.PluginInfo()
	must(t, err)
	if info.Name != "nomad-device-zfs" || info.Type != base.PluginTypeDevice {
		t.Fatalf("plugin info %+v", info)
	}
	spec, err := dev.ConfigSchema()
	must(t, err)
	af, err := devicemanager.ParseAgentConfig(agentHCL)
	must(t, err)
	cfg, err := devicemanager.EncodeConfig(spec, af.Plugin(Name).Config)
	must(t, err)
	must(t, dev.SetConfig(&base.Config{PluginConfig: cfg}))
	return dev, impl, f
}

const testAgentHCL = `plugin "nomad-device-zfs" {
  config {
    parent = "tank/nomad"
    class "scratch" {
      slots = 2
      properties { quota = "1G" }
      mount = "/data"
    }
  }
}`

func nextFingerprint(t *testing.T, ch <-chan *device.FingerprintResponse) *device.FingerprintResponse {
	t.Helper()
	select {
	case r, ok := <-ch:
		if !ok {
			t.Fatal("fingerprint stream closed: Nomad would disable the plugin")
		}
		if r.Error != nil {
			t.Fatalf("fingerprint error: Nomad would disable the plugin: %v", r.Error)
		}
		return r
	case <-time.After(10 * time.Second):
		t.Fatal("no fingerprint within 10s")
	}
	return nil
}

func healthyCount(r *device.FingerprintResponse) (healthy, total int) {
	for _, g := range r.Devices {
		for _, d := range g.Devices {
			total++
			if d.Healthy {
				healthy++
			}
		}
	}
	return healthy, total
}

func TestGRPCFingerprintReserveStats(t *testing.T) {
	dev, impl, f := grpcPlugin(t, testAgentHCL)
	ctx, cancel := context.WithCancel(t.Context())
	defer cancel()

	fp, err := dev.Fingerprint(ctx)
	must(t, err)
	r := nextFingerprint(t, fp)
	if h, n := healthyCount(r); h != 2 || n != 2 {
		t.Fatalf("first fingerprint: %d/%d healthy: %+v", h, n, r.Devices[0].Devices)
	}
	g := r.Devices[0]
	if g.Vendor != "zfs" || g.Type != "dataset" || g.Name != "scratch" || *g.Attributes["quota"].Int != 1024 {
		t.Fatalf("group %+v", g)
	}

	// Nothing changed: a rescan sends nothing.
	impl.mgr.Reconcile(ctx)
	select {
	case r := <-fp:
		t.Fatalf("fingerprint sent without a change: %+v", r)
	case <-time.After(300 * time.Millisecond):
	}

	// Reserve over gRPC: the mount and the environment.
	res, err := dev.Reserve([]string{"scratch-1"})
	must(t, err)
	host := f.Mountpoint("tank/nomad/scratch/scratch-1")
	if len(res.Mounts) != 1 || res.Mounts[0].HostPath != host || res.Mounts[0].TaskPath != "/data" {
		t.Fatalf("mounts %+v, want %s → /data", res.Mounts, host)
	}
	if res.Envs["ZFS_SCRATCH_HOST_PATH"] != host || res.Envs["ZFS_SCRATCH_DATASET"] != "tank/nomad/scratch/scratch-1" {
		t.Fatalf("envs %v", res.Envs)
	}
	must(t, os.WriteFile(filepath.Join(host, "f"), []byte("x"), 0o644))

	_, err = dev.Reserve([]string{"scratch-7"})
	if status.Code(err) != codes.InvalidArgument {
		t.Fatalf("unknown ID: got %v (code %v), want InvalidArgument", err, status.Code(err))
	}

	// Stats report the slot's usage.
	st, err := dev.Stats(ctx, 50*time.Millisecond)
	must(t, err)
	select {
	case s := <-st:
		if s == nil || len(s.Groups) != 1 || s.Groups[0].InstanceStats["scratch-1"] == nil {
			t.Fatalf("stats %+v", s)
		}
	case <-time.After(10 * time.Second):
		t.Fatal("no stats")
	}
	// Stats follow the published view: a new one is sent once a pass
	// publishes a newer view.
	impl.mgr.Reconcile(ctx)
	select {
	case s := <-st:
		if s == nil || s.Groups[0].InstanceStats["scratch-1"] == nil {
			t.Fatalf("stats after a pass %+v", s)
		}
	case <-time.After(10 * time.Second):
		t.Fatal("no stats after a pass published a newer view")
	}

	// A degraded pool: the same instances, unhealthy, with the reason — and
	// no error on the stream.
	must(t, f.SetPoolHealth("tank", "DEGRADED"))
	impl.mgr.Reconcile(ctx)
	r = nextFingerprint(t, fp)
	if h, n := healthyCount(r); h != 0 || n != 2 || r.Devices[0].Devices[0].HealthDesc != `pool "tank" is DEGRADED` {
		t.Fatalf("degraded: %d/%d healthy, %+v", h, n, r.Devices[0].Devices[0])
	}
	_, err = dev.Reserve([]string{"scratch-1"})
	if status.Code(err) != codes.Unavailable {
		t.Fatalf("reserve on degraded pool: %v", err)
	}

	// Back online: healthy again.
	must(t, f.SetPoolHealth("tank", "ONLINE"))
	impl.mgr.Reconcile(ctx)
	if h, _ := healthyCount(nextFingerprint(t, fp)); h != 2 {
		t.Fatalf("not healthy after the pool came back: %d", h)
	}
}

// TestGRPCFingerprintBeforeConfig: a plugin that was never configured
// returns an error from Fingerprint rather than inventing devices.
func TestGRPCFingerprintBeforeConfig(t *testing.T) {
	impl := New(hclog.NewNullLogger())
	t.Cleanup(impl.Shutdown)
	if _, err := impl.Fingerprint(t.Context()); err == nil {
		t.Fatal("fingerprint without config succeeded")
	}
}

func TestSetConfigIsSideEffectFree(t *testing.T) {
	f := zfstest.New(zfstest.Options{MountRoot: t.TempDir()})
	must(t, f.AddPool("tank", 1<<30))
	p := New(hclog.NewNullLogger())
	p.newRunner = func(*Settings) zfs.Runner { return f }
	if err := setConfigFromAgentHCL(t, p, `config {
    parent = "tank/nomad"
    class "scratch" { slots = 2 }
  }`); err != nil {
		t.Fatal(err)
	}
	if calls := f.Calls(); len(calls) != 0 {
		t.Fatalf("SetConfig ran zfs: %q", calls)
	}
}

func must(t *testing.T, err error) {
	t.Helper()
	if err != nil {
		t.Fatal(err)
	}
}
