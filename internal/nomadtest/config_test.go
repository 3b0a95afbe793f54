package nomadtest

import (
	"strings"
	"testing"
	"time"
)

func TestRenderConfig(t *testing.T) {
	p := ports{HTTP: 4001, RPC: 4002, Serf: 4003}
	tests := []struct {
		name    string
		cfg     Config
		want    []string
		notWant []string
	}{
		{
			name: "minimal",
			cfg:  Config{DataDir: "/tmp/d"},
			want: []string{
				`name                 = "nomadtest-4001"`,
				`data_dir             = "/tmp/d"`,
				"http = 4001", "rpc  = 4002", "serf = 4003",
				`"fingerprint.denylist"  = "env_aws,env_gce,env_azure,env_digitalocean"`,
				"bootstrap_expect = 1",
				`heartbeat_grace  = "5m"`,
				// its own: Nomad 1.6 deletes task cgroups under its parent
				// that are not its own allocations'
				`cgroup_parent = "nomadtest_4001.slice"`,
			},
			notWant: []string{"plugin_dir", "acl {", `plugin "nomad`},
		},
		{
			name: "plugin acl extra",
			cfg: Config{
				DataDir:      "/tmp/d",
				PluginDir:    "/tmp/p",
				PluginName:   "nomad-device-zfs",
				PluginArgs:   []string{"-v", `a"b`},
				PluginConfig: "pool = \"tank\"\nwatch {\n  enabled = true\n}",
				ACL:          true,
				ExtraHCL:     `client { meta { x = "y" } }`,
			},
			want: []string{
				`plugin_dir           = "/tmp/p"`,
				"plugin \"nomad-device-zfs\" {\n  args = [\"-v\", \"a\\\"b\"]\n  config {\n    pool = \"tank\"\n    watch {\n      enabled = true\n    }\n  }\n}",
				"acl {\n  enabled = true\n}",
				`client { meta { x = "y" } }`,
			},
		},
		{
			name: "client only",
			cfg:  Config{DataDir: "/tmp/d", Servers: []string{"127.0.0.1:5002"}},
			want: []string{
				"client {\n  enabled = true\n  cgroup_parent = \"nomadtest_4001.slice\"\n  servers = [\"127.0.0.1:5002\"]\n  options {",
				`"driver.raw_exec.enable" = "1"`,
			},
			notWant: []string{"server {", "bootstrap_expect"},
		},
		{
			name: "server only with short heartbeats",
			cfg: Config{DataDir: "/tmp/d", ServerOnly: true, PluginName: "nomad-device-zfs",
				HeartbeatGrace: 3 * time.Second, MinHeartbeatTTL: 2 * time.Second},
			want: []string{
				"bootstrap_expect = 1",
				`heartbeat_grace  = "3s"`,
				`min_heartbeat_ttl = "2s"`,
				"client {\n  enabled = false\n}",
			},
			notWant: []string{"enabled = true\n  servers", "cgroup_parent", "fingerprint.denylist", `plugin "nomad-device-zfs"`, `"5m"`},
		},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			got := renderConfig(tc.cfg, p)
			for _, w := range tc.want {
				if !strings.Contains(got, w) {
					t.Errorf("config lacks %q:\n%s", w, got)
				}
			}
			for _, w := range tc.notWant {
				if strings.Contains(got, w) {
					t.Errorf("config has %q:\n%s", w, got)
				}
			}
		})
	}
}
