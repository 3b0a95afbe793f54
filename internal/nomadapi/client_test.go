package nomadapi

import (
	"bytes"
	"context"
	"errors"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"

	"github.com/hashicorp/go-hclog"
	"github.com/hashicorp/nomad/api"
)

// tokenAgent answers GET /v1/agent/self for token "fresh" and 403 for any
// other, counting the tokens it sees.
type tokenAgent struct {
	mu   sync.Mutex
	seen []string
}

func (a *tokenAgent) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	tok := r.Header.Get("X-Nomad-Token")
	a.mu.Lock()
	a.seen = append(a.seen, tok)
	a.mu.Unlock()
	if tok != "fresh" {
		http.Error(w, "Permission denied", http.StatusForbidden)
		return
	}
	w.Header().Set("Content-Type", "application/json")
	_, _ = w.Write([]byte(`{"stats": {"client": {"node_id": "` + id(9) + `"}}}`))
}

// TestTokenFileReread: on 401/403 the client re-reads its token file and
// retries once, only when the token changed.
func TestTokenFileReread(t *testing.T) {
	t.Parallel()
	cases := []struct {
		name      string
		token     string // Config.Token; "" uses the token file
		file      string // the file's first content
		rotate    string // the file's content before the request; "-" removes it
		wantSeen  []string
		wantErr   string // "" for success
		wantLog   bool   // "token file changed" logged
		wantToken string // Token() after the request
	}{
		{name: "token without a file is not retried", token: "stale",
			wantSeen: []string{"stale"}, wantErr: "permission denied", wantToken: "stale"},
		{name: "file unchanged is not retried", file: "stale", rotate: "stale",
			wantSeen: []string{"stale"}, wantErr: "permission denied", wantToken: "stale"},
		{name: "file rotated is retried once with the new token", file: "stale", rotate: "fresh\n",
			wantSeen: []string{"stale", "fresh"}, wantLog: true, wantToken: "fresh"},
		{name: "file rotated to another refused token", file: "stale", rotate: "other",
			wantSeen: []string{"stale", "other"}, wantErr: "permission denied", wantLog: true, wantToken: "other"},
		{name: "file gone: the error says so", file: "stale", rotate: "-",
			wantSeen: []string{"stale"}, wantErr: "re-reading the token file", wantToken: "stale"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			agent := &tokenAgent{}
			cfg := Config{Address: serve(t, agent, false), Token: tc.token}
			path := filepath.Join(t.TempDir(), "token")
			if tc.file != "" {
				if err := os.WriteFile(path, []byte(tc.file), 0o600); err != nil {
					t.Fatal(err)
				}
				cfg.TokenFile = path
			}
			var logs bytes.Buffer
			c, err := New(cfg, hclog.New(&hclog.LoggerOptions{Output: &logs}))
			if err != nil {
				t.Fatal(err)
			}
			switch tc.rotate {
			case "":
			case "-":
				if err := os.Remove(path); err != nil {
					t.Fatal(err)
				}
			default:
				if err := os.WriteFile(path, []byte(tc.rotate), 0o600); err != nil {
					t.Fatal(err)
				}
			}
			self, err := c.AgentSelf(context.Background())
			switch {
			case tc.wantErr == "" && err != nil:
				t.Fatalf("AgentSelf: %v", err)
			case tc.wantErr == "" && self.Stats["client"]["node_id"] != id(9):
				t.Errorf("AgentSelf = %+v", self)
			case tc.wantErr != "" && (err == nil || !strings.Contains(err.Error(), tc.wantErr)):
				t.Errorf("AgentSelf: %v, want an error with %q", err, tc.wantErr)
			case tc.wantErr != "" && !errors.Is(err, ErrPermissionDenied):
				t.Errorf("AgentSelf: %v, want ErrPermissionDenied", err)
			}
			if status, _ := HTTPStatus(err); tc.wantErr != "" && status != http.StatusForbidden {
				t.Errorf("HTTPStatus = %d, want 403", status)
			}
			agent.mu.Lock()
			defer agent.mu.Unlock()
			if strings.Join(agent.seen, ",") != strings.Join(tc.wantSeen, ",") {
				t.Errorf("the agent saw tokens %q, want %q", agent.seen, tc.wantSeen)
			}
			if n := c.Requests()[KindAgentSelf]; n != uint64(len(tc.wantSeen)) {
				t.Errorf("Requests()[%s] = %d, want %d", KindAgentSelf, n, len(tc.wantSeen))
			}
			if got := strings.Contains(logs.String(), "token file changed"); got != tc.wantLog {
				t.Errorf("logged the change: %v, want %v:\n%s", got, tc.wantLog, logs.String())
			}
			if got := c.Token(); got != tc.wantToken {
				t.Errorf("Token() = %q, want %q", got, tc.wantToken)
			}
		})
	}
}

// TestQuery: any other GET carries the client's token and the options'
// namespace, and a refusal reads through HTTPStatus.
func TestQuery(t *testing.T) {
	t.Parallel()
	var got http.Header
	var ns string
	mux := http.NewServeMux()
	mux.HandleFunc("GET /v1/allocations", func(w http.ResponseWriter, r *http.Request) {
		got, ns = r.Header.Clone(), r.URL.Query().Get("namespace")
		_, _ = w.Write([]byte(`[{"ID": "` + id(1) + `"}]`))
	})
	mux.HandleFunc("GET /v1/namespaces", func(w http.ResponseWriter, r *http.Request) {
		http.Error(w, "Permission denied", http.StatusForbidden)
	})
	c, err := New(Config{Address: serve(t, mux, false), Token: "s3cret"}, nil)
	if err != nil {
		t.Fatal(err)
	}
	var allocs []*api.AllocationListStub
	if err := c.Query(context.Background(), "/v1/allocations", &api.QueryOptions{Namespace: "*", PerPage: 1}, &allocs); err != nil {
		t.Fatal(err)
	}
	if len(allocs) != 1 || allocs[0].ID != id(1) || got.Get("X-Nomad-Token") != "s3cret" || ns != "*" {
		t.Errorf("answer %d allocations; the agent saw token %q, namespace %q", len(allocs), got.Get("X-Nomad-Token"), ns)
	}
	err = c.Query(context.Background(), "/v1/namespaces", nil, &[]*api.Namespace{})
	if status, body := HTTPStatus(err); status != http.StatusForbidden || body != "Permission denied" || !errors.Is(err, ErrPermissionDenied) {
		t.Errorf("refusal: %v reads as %d %q", err, status, body)
	}
}

func TestIsUUID(t *testing.T) {
	t.Parallel()
	cases := []struct {
		name string
		s    string
		want bool
	}{
		{name: "lower case", s: "1cc0a14a-c239-313f-9be4-9ee3e8cc0399", want: true},
		{name: "upper case", s: "1CC0A14A-C239-313F-9BE4-9EE3E8CC0399", want: true},
		{name: "empty", s: ""},
		{name: "a path", s: "../../v1/jobs"},
		{name: "a path of the right length", s: "1cc0a14a-c239-313f-9be4-9ee3e8cc/../"},
		{name: "dash out of place", s: "1cc0a14ac-239-313f-9be4-9ee3e8cc0399"},
		{name: "not hex", s: "1cc0a14a-c239-313f-9be4-9ee3e8cc039g"},
		{name: "sign", s: "+cc0a14a-c239-313f-9be4-9ee3e8cc0399"},
		{name: "multibyte", s: "1cc0a14a-c239-313f-9be4-9ee3e8cc03é"},
		{name: "one short", s: "1cc0a14a-c239-313f-9be4-9ee3e8cc039"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			if got := IsUUID(tc.s); got != tc.want {
				t.Errorf("IsUUID(%q) = %v, want %v", tc.s, got, tc.want)
			}
		})
	}
}
