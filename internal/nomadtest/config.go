package nomadtest

import (
	"cmp"
	"fmt"
	"io"
	"net"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

// Config describes one test agent. Only Binary is required.
type Config struct {
	// Binary is the nomad executable, usually Binary(t).
	Binary string
	// DataDir is the agent data_dir. Default: a fresh t.TempDir(). Restart
	// keeps it, so client and raft state survive.
	DataDir string
	// PluginDir is the agent plugin_dir. Default: Nomad's, <DataDir>/plugins.
	PluginDir string
	// PluginName, when set, adds a plugin "<PluginName>" block; the binary of
	// that name in PluginDir is then loaded (Nomad skips unreferenced ones).
	PluginName string
	// PluginArgs become the plugin block's args, appended to the plugin argv.
	PluginArgs []string
	// PluginConfig is the HCL body of that block's config { }, for example
	// `pool = "tank"`.
	PluginConfig string
	// ACL enables ACLs. Start bootstraps them; Client then carries the
	// management token, also returned by ManagementToken.
	ACL bool
	// Env is added to the agent's environment (which plugins and raw_exec
	// tasks inherit), after os.Environ so it wins: e.g. "PATH=/fake/bin:...".
	Env []string
	// TLS, when set, serves HTTP and RPC over TLS with these files; the
	// harness's own clients then use https, verify the agent with the CA and
	// present the certificate (which must also be valid as a client's).
	TLS *TLS
	// Servers, when set, makes a client-only agent that registers with
	// these servers (another agent's RPCAddr) instead of running a server
	// of its own: a second node of that agent's cluster, for tests of
	// placement across nodes. The server's heartbeat_grace then applies.
	Servers []string
	// ServerOnly makes an agent without a client: the server of a
	// cluster whose nodes are all client-only agents (StartCluster).
	// Start then waits for the API and a leader only.
	ServerOnly bool
	// HeartbeatGrace and MinHeartbeatTTL are the server's heartbeat_grace
	// and min_heartbeat_ttl: a node that has not heartbeated for its TTL
	// (at least MinHeartbeatTTL, plus up to as much again of stagger)
	// and then the grace is marked down or disconnected. Defaults: 5m
	// (see renderConfig) and Nomad's own, 10s. A test that cuts a node off
	// on purpose lowers both.
	HeartbeatGrace, MinHeartbeatTTL time.Duration
	// ExtraHCL is appended to the generated agent config. Top-level blocks
	// such as client { } may repeat; Nomad merges them.
	ExtraHCL string
	// LogLevel is the agent log_level. Default $NDZ_E2E_LOG_LEVEL, else
	// "DEBUG" (TRACE adds each zfs command with its duration).
	LogLevel string
	// LogWriter also receives the agent's stdout and stderr. The log always
	// goes to a file too, for Logs, LogContains and the tail printed when the
	// test fails.
	LogWriter io.Writer
	// StartTimeout bounds each start: API up, leader, node ready. Default 2m,
	// since a client waits up to 50s for device plugins' first fingerprint.
	StartTimeout time.Duration
	// Slowness, when set, reports how many times slower than an idle
	// machine this one runs now; every wait of this package (StartTimeout,
	// WaitAllocs, WaitForNodeDevice...) stretches its timeout by the
	// largest value seen during the wait (see Deadline).
	Slowness func() float64

	// choosePorts picks each start's ports; freePorts when nil (a test
	// hands out a taken one).
	choosePorts func() (ports, error)
}

// TLS is an agent's tls block. The certificate serves HTTP and RPC and must
// name server.global.nomad, client.global.nomad and 127.0.0.1.
type TLS struct {
	CAFile, CertFile, KeyFile string
	// VerifyHTTPSClient requires every HTTP client to present a certificate
	// the CA signed (mTLS).
	VerifyHTTPSClient bool
}

// scheme is the agent's HTTP scheme.
func (c Config) scheme() string {
	if c.TLS != nil {
		return "https"
	}
	return "http"
}

// ports are the agent's loopback ports; Restart reuses them because raft
// remembers the server's rpc address.
type ports struct{ HTTP, RPC, Serf int }

func (c Config) withDefaults(t testing.TB) Config {
	t.Helper()
	if c.Binary == "" {
		c.Binary = Binary(t)
	}
	if c.DataDir == "" {
		c.DataDir = t.TempDir()
	}
	if abs, err := filepath.Abs(c.DataDir); err == nil {
		c.DataDir = abs
	}
	if c.LogLevel == "" {
		c.LogLevel = cmp.Or(os.Getenv("NDZ_E2E_LOG_LEVEL"), "DEBUG")
	}
	if c.StartTimeout == 0 {
		c.StartTimeout = 2 * time.Minute
	}
	return c
}

// freePorts asks the kernel for three free loopback ports, holding all three
// listeners at once so they differ. Nomad binds them moments later; a lost
// race shows up as "address already in use" and Start retries.
func freePorts() (ports, error) {
	var ls []net.Listener
	defer func() {
		for _, l := range ls {
			l.Close()
		}
	}()
	var p [3]int
	for i := range p {
		l, err := net.Listen("tcp", "127.0.0.1:0")
		if err != nil {
			return ports{}, fmt.Errorf("picking a free port: %w", err)
		}
		ls = append(ls, l)
		p[i] = l.Addr().(*net.TCPAddr).Port
	}
	return ports{HTTP: p[0], RPC: p[1], Serf: p[2]}, nil
}

// nodeName is unique among concurrently running agents because the http
// port is.
func nodeName(p ports) string { return fmt.Sprintf("nomadtest-%d", p.HTTP) }

// cgroupParent is the client's own cgroup parent, unique as nodeName is. No
// dash: systemd would read one as a level of slices.
func cgroupParent(p ports) string { return fmt.Sprintf("nomadtest_%d.slice", p.HTTP) }

// renderConfig returns the agent config file. It is a real (non -dev)
// config so state survives Restart. The fingerprint denylist keeps the cloud
// fingerprinters from probing metadata endpoints, which makes the agent fail
// to start on this kind of host.
func renderConfig(c Config, p ports) string {
	var b strings.Builder
	fmt.Fprintf(&b, "name                 = %q\n", nodeName(p))
	fmt.Fprintf(&b, "data_dir             = %q\n", c.DataDir)
	if c.PluginDir != "" {
		fmt.Fprintf(&b, "plugin_dir           = %q\n", c.PluginDir)
	}
	fmt.Fprintf(&b, "bind_addr            = \"127.0.0.1\"\n")
	fmt.Fprintf(&b, "log_level            = %q\n", c.LogLevel)
	fmt.Fprintf(&b, "disable_update_check = true\n\n")
	fmt.Fprintf(&b, "ports {\n  http = %d\n  rpc  = %d\n  serf = %d\n}\n\n", p.HTTP, p.RPC, p.Serf)
	// Nomad refuses to default its advertise addresses to loopback.
	b.WriteString("advertise {\n  http = \"127.0.0.1\"\n  rpc  = \"127.0.0.1\"\n  serf = \"127.0.0.1\"\n}\n\n")
	// heartbeat_grace: the client heartbeats its own server in the same
	// process, but on a busy machine a heartbeat can still come late (22 s
	// against a 12 s TTL, seen beside a second test VM): the server then
	// marks the node down and its allocations lost, and the test fails for
	// a reason of its machine. A test that lets a node miss heartbeats on
	// purpose (Agent.Freeze) sets HeartbeatGrace; a stopped agent's node
	// is otherwise covered by Nomad's failover TTL.
	if len(c.Servers) == 0 {
		grace := "5m"
		if c.HeartbeatGrace > 0 {
			grace = c.HeartbeatGrace.String()
		}
		fmt.Fprintf(&b, "server {\n  enabled          = true\n  bootstrap_expect = 1\n  heartbeat_grace  = %q\n", grace)
		if c.MinHeartbeatTTL > 0 {
			fmt.Fprintf(&b, "  min_heartbeat_ttl = %q\n", c.MinHeartbeatTTL.String())
		}
		b.WriteString("}\n\n")
	}
	if c.ServerOnly {
		b.WriteString("client {\n  enabled = false\n}\n")
	} else {
		b.WriteString("client {\n  enabled = true\n")
		// Each client its own cgroup parent: Nomad 1.6's cpuset manager
		// removes every empty task cgroup under its parent that is not one
		// of its own allocations', so with the default nomad.slice shared,
		// one test agent deleted another's task cgroup between its creation
		// and the task's start, and that task waited for it for good at
		// "Building Task Directory" (TaskRunner.runDriver; seen whenever
		// tests ran side by side in the VM).
		fmt.Fprintf(&b, "  cgroup_parent = %q\n", cgroupParent(p))
		if len(c.Servers) > 0 {
			fmt.Fprintf(&b, "  servers = [%s]\n", quoteList(c.Servers))
		}
		b.WriteString(`  options {
    "fingerprint.denylist"  = "env_aws,env_gce,env_azure,env_digitalocean"
    "driver.raw_exec.enable" = "1"
  }
}
`)
	}
	b.WriteString(`
plugin "raw_exec" {
  config {
    enabled = true
  }
}
`)
	if c.PluginName != "" && !c.ServerOnly {
		fmt.Fprintf(&b, "\nplugin %q {\n", c.PluginName)
		if len(c.PluginArgs) > 0 {
			fmt.Fprintf(&b, "  args = [%s]\n", quoteList(c.PluginArgs))
		}
		fmt.Fprintf(&b, "  config {\n%s\n  }\n}\n", indent(withAddr(c.PluginConfig, c.scheme(), p), "    "))
	}
	if c.ACL {
		b.WriteString("\nacl {\n  enabled = true\n}\n")
	}
	if t := c.TLS; t != nil {
		fmt.Fprintf(&b, "\ntls {\n  http = true\n  rpc = true\n  ca_file = %q\n  cert_file = %q\n  key_file = %q\n"+
			"  verify_server_hostname = true\n  verify_https_client = %t\n}\n", t.CAFile, t.CertFile, t.KeyFile, t.VerifyHTTPSClient)
	}
	if c.ExtraHCL != "" {
		b.WriteString("\n" + withAddr(c.ExtraHCL, c.scheme(), p) + "\n")
	}
	return b.String()
}

// HTTPAddrPlaceholder in PluginConfig or ExtraHCL is replaced by the agent's
// HTTP address, which is only known once its ports are picked: a plugin that
// talks to the agent's API (nomad { address = "..." }) needs it.
const HTTPAddrPlaceholder = "@NOMADTEST_HTTP_ADDR@"

func withAddr(s, scheme string, p ports) string {
	return strings.ReplaceAll(s, HTTPAddrPlaceholder, fmt.Sprintf("%s://127.0.0.1:%d", scheme, p.HTTP))
}

// quoteList renders strings as the elements of an HCL list.
func quoteList(ss []string) string {
	quoted := make([]string, len(ss))
	for i, s := range ss {
		quoted[i] = fmt.Sprintf("%q", s)
	}
	return strings.Join(quoted, ", ")
}

func indent(s, prefix string) string {
	lines := strings.Split(strings.TrimSpace(s), "\n")
	for i, l := range lines {
		if l != "" {
			lines[i] = prefix + l
		}
	}
	return strings.Join(lines, "\n")
}
