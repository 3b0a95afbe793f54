package plugin

import (
	"fmt"
	"io"
	"net"
	"net/http"
	"strings"
	"testing"
	"time"

	hclog "github.com/hashicorp/go-hclog"
)

// TestMetricsAddress: the metrics block's address is checked without
// listening, and a bad one is refused naming the key and the value.
func TestMetricsAddress(t *testing.T) {
	cases := []struct {
		addr string
		bad  string // in the error; "" when accepted
	}{
		{"127.0.0.1:9646", ""},
		{":9646", ""},
		{"localhost:0", ""},
		{"[::1]:9646", ""},
		{"[fe80::1%eth0]:9646", ""},
		{"node-1.example.com:9646", ""},
		{"9646", "not host:port"},
		{"127.0.0.1", "not host:port"},
		{"127.0.0.1:http", `port "http"`},
		{"127.0.0.1:70000", `port "70000"`},
		{"127.0.0.1:09646", `port "09646"`},
		{"127.0.0.1:-1", `port "-1"`},
		{"a b:9646", `host "a b"`},
		{"http://127.0.0.1:9646", "not host:port"},
		{"-x:9646", `host "-x"`},
		{"", "not host:port"},
	}
	for _, tc := range cases {
		t.Run(tc.addr, func(t *testing.T) {
			p := New(hclog.NewNullLogger())
			p.newRunner = nil // SetConfig must not need one
			err := setConfigFromAgentHCL(t, p, fmt.Sprintf(`config {
  parent = "tank/nomad"
  metrics { address = %q }
  class "a" {}
}`, tc.addr))
			switch {
			case tc.bad == "" && err != nil:
				t.Fatalf("refused: %v", err)
			case tc.bad == "" && p.settings.MetricsAddress != tc.addr:
				t.Fatalf("address %q, want %q", p.settings.MetricsAddress, tc.addr)
			case tc.bad != "" && err == nil:
				t.Fatalf("accepted")
			case tc.bad != "" && (!strings.Contains(err.Error(), fmt.Sprintf("metrics.address = %q", tc.addr)) || !strings.Contains(err.Error(), tc.bad)):
				t.Fatalf("error %q names neither metrics.address = %q nor %q", err, tc.addr, tc.bad)
			}
		})
	}
	t.Run("the block without its address", func(t *testing.T) {
		err := setConfigFromAgentHCL(t, New(hclog.NewNullLogger()), `config {
  parent = "tank/nomad"
  metrics {}
  class "a" {}
}`)
		if err == nil || !strings.Contains(err.Error(), `"address"`) {
			t.Fatalf("got %v, want an error naming address", err)
		}
	})
	t.Run("no block: no endpoint", func(t *testing.T) {
		p := New(hclog.NewNullLogger())
		must(t, setConfigFromAgentHCL(t, p, `config {
  parent = "tank/nomad"
  class "a" {}
}`))
		if p.settings.MetricsAddress != "" {
			t.Fatalf("an endpoint at %q with no metrics block", p.settings.MetricsAddress)
		}
	})
}

// TestMetricsEndpointStartsWithTheSlots: SetConfig listens on nothing
// (Nomad calls it on throw-away processes); the endpoint listens once the
// plugin runs its slots, serves their state, counts a Reserve, and stops
// with the plugin.
func TestMetricsEndpointStartsWithTheSlots(t *testing.T) {
	addr := freeAddr(t)
	dev, impl, _ := grpcPlugin(t, strings.Replace(testAgentHCL, "    parent = \"tank/nomad\"\n",
		fmt.Sprintf("    parent = \"tank/nomad\"\n    metrics {\n      address = %q\n    }\n", addr), 1))
	if ln, err := net.Listen("tcp", addr); err != nil {
		t.Fatalf("SetConfig took the metrics address: %v", err)
	} else {
		ln.Close()
	}
	if _, err := http.Get("http://" + addr + "/metrics"); err == nil {
		t.Fatal("the endpoint answers before the plugin runs")
	}

	fp, err := dev.Fingerprint(t.Context())
	must(t, err)
	nextFingerprint(t, fp)
	_, err = dev.Reserve([]string{"scratch-1"})
	must(t, err)
	var body string
	deadline := time.Now().Add(10 * time.Second)
	for !strings.Contains(body, `nomad_device_zfs_reserve_duration_seconds_count{class="scratch",pool="tank",result="ok"} 1`) {
		if time.Now().After(deadline) {
			t.Fatalf("the endpoint did not show the slots and the Reserve:\n%s", body)
		}
		time.Sleep(50 * time.Millisecond)
		body = get(t, "http://"+addr+"/metrics")
	}
	for _, want := range []string{
		`nomad_device_zfs_slots{class="scratch",pool="tank",state="ready"} 2`,
		`nomad_device_zfs_pool_health{health="ONLINE",pool="tank"} 1`,
		`nomad_device_zfs_command_duration_seconds_count{command="zfs",pool="tank",result="ok",subcommand="list"}`,
	} {
		if !strings.Contains(body, want) {
			t.Errorf("no %s in:\n%s", want, body)
		}
	}

	impl.Shutdown()
	deadline = time.Now().Add(10 * time.Second)
	for {
		resp, err := http.Get("http://" + addr + "/metrics")
		if err != nil {
			break
		}
		resp.Body.Close()
		if time.Now().After(deadline) {
			t.Fatal("the endpoint still answers after Shutdown")
		}
		time.Sleep(50 * time.Millisecond)
	}
}

// freeAddr is a loopback address with a port nothing listens on now.
func freeAddr(t *testing.T) string {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	must(t, err)
	defer ln.Close()
	return ln.Addr().String()
}

func get(t *testing.T, url string) string {
	t.Helper()
	resp, err := http.Get(url)
	if err != nil {
		return ""
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	return string(b)
}
