package nomadtest

import (
	"strings"
	"testing"

	version "github.com/hashicorp/go-version"
)

func TestParseAgentVersion(t *testing.T) {
	cases := []struct {
		name, out, want string
		err             bool
	}{
		{name: "1.6.2", out: "Nomad v1.6.2\nBuildDate 2023-09-13T16:47:25Z\nRevision 73e372ad9403\n", want: "1.6.2"},
		{name: "prerelease", out: "Nomad v1.11.0-beta.1\n", want: "1.11.0-beta.1"},
		{name: "enterprise suffix", out: "Nomad v1.10.5+ent\n", want: "1.10.5+ent"},
		{name: "not nomad", out: "consul v1.16.0\n", err: true},
		{name: "empty", out: "", err: true},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			v, err := parseAgentVersion([]byte(tc.out))
			if tc.err {
				if err == nil {
					t.Fatalf("parsed %v, want an error", v)
				}
				return
			}
			if err != nil || v.Original() != tc.want {
				t.Fatalf("got %v, %v; want %s", v, err, tc.want)
			}
		})
	}
}

// TestAgentVersionOfTheTestsAgent asks the real binary the tests run.
func TestAgentVersionOfTheTestsAgent(t *testing.T) {
	bin := Binary(t)
	v, err := AgentVersion(bin)
	if err != nil {
		t.Fatal(err)
	}
	if v.Segments()[0] != 1 {
		t.Fatalf("%s is Nomad %s, want 1.x", bin, v)
	}
	t.Logf("%s: Nomad %s (disconnect block: %v)", bin, v, !v.LessThan(DisconnectBlock))
}

func TestGroupDisconnect(t *testing.T) {
	v := func(s string) *version.Version { return version.Must(version.NewVersion(s)) }
	cases := []struct {
		name, agent, lostAfter, reconcile string
		want, err                         string
	}{
		{name: "1.6 default", agent: "1.6.2", lostAfter: "1h", want: `max_client_disconnect = "1h"`},
		{name: "1.6 best_score", agent: "1.6.2", lostAfter: "20s", reconcile: "best_score", want: `max_client_disconnect = "20s"`},
		{name: "1.6 keep_original", agent: "1.6.2", lostAfter: "1h", reconcile: "keep_original", err: "needs Nomad 1.8.0"},
		{name: "1.8 block", agent: "1.8.0", lostAfter: "1h", reconcile: "keep_replacement",
			want: "disconnect {\n      lost_after = \"1h\"\n      reconcile  = \"keep_replacement\"\n    }"},
		{name: "1.11 default", agent: "1.11.3", lostAfter: "20s", want: "disconnect {\n      lost_after = \"20s\"\n    }"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			got, err := GroupDisconnect(v(tc.agent), tc.lostAfter, tc.reconcile)
			if tc.err != "" {
				if err == nil || !strings.Contains(err.Error(), tc.err) {
					t.Fatalf("got %q, %v; want an error with %q", got, err, tc.err)
				}
				return
			}
			if err != nil || got != tc.want {
				t.Fatalf("got %q, %v; want %q", got, err, tc.want)
			}
		})
	}
}
