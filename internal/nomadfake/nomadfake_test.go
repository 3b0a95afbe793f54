package nomadfake_test

// What the fake does that no request to an idle real agent shows: blocking
// queries woken by writes, the cluster's writes, and the injected faults.
// conformance_test.go holds its answers to a real agent.

import (
	"fmt"
	"io"
	"net/http"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/hashicorp/nomad/api"

	"github.com/nomad-device-zfs/nomad-device-zfs/internal/nomadfake"
)

// testTimeout bounds every wait for an answer.
const testTimeout = 10 * time.Second

const node = "8b1c2f3a-0000-4000-8000-0000000000aa"

func allocID(n int) string { return fmt.Sprintf("00000000-0000-4000-8000-%012d", n) }

// answer is one answer as the tests read it.
type answer struct {
	status int
	index  uint64 // 0: no X-Nomad-Index
	body   string
	err    error // transport error
}

// get asks the fake for path with token.
func get(f *nomadfake.Server, path, token string) answer {
	req, _ := http.NewRequest(http.MethodGet, f.URL()+path, nil)
	if token != "" {
		req.Header.Set("X-Nomad-Token", token)
	}
	resp, err := (&http.Client{Timeout: testTimeout}).Do(req)
	if err != nil {
		return answer{err: err}
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	index, _ := strconv.ParseUint(resp.Header.Get("X-Nomad-Index"), 10, 64)
	return answer{status: resp.StatusCode, index: index, body: strings.TrimSpace(string(b))}
}

// async asks in the background; the answer comes on the channel.
func async(f *nomadfake.Server, path, token string) <-chan answer {
	ch := make(chan answer, 1)
	go func() { ch <- get(f, path, token) }()
	return ch
}

func await(t *testing.T, ch <-chan answer) answer {
	t.Helper()
	select {
	case a := <-ch:
		return a
	case <-time.After(testTimeout):
		t.Fatalf("no answer within %s", testTimeout)
		return answer{}
	}
}

func allocsPath(index uint64, wait string) string {
	return fmt.Sprintf("/v1/node/%s/allocations?index=%d&wait=%s", node, index, wait)
}

func TestBlockingQuery(t *testing.T) {
	cases := []struct {
		name  string
		token string
		write func(f *nomadfake.Server) // made while the query blocks
		wait  string
		// moved: the answer comes at a higher index; names: what it lists.
		moved bool
		names []string
	}{
		{name: "nothing happens: the wait's end answers the same index", wait: "500ms", names: []string{allocID(1)}},
		{name: "a write to the node's allocations wakes it", wait: "1m", moved: true, names: []string{allocID(1), allocID(2)},
			write: func(f *nomadfake.Server) { f.Upsert(&api.Allocation{ID: allocID(2), ClientStatus: "pending"}) }},
		{name: "a write elsewhere does not", wait: "500ms", names: []string{allocID(1)},
			write: func(f *nomadfake.Server) { f.Touch() }},
		{name: "a status change wakes it", wait: "1m", moved: true, names: []string{allocID(1)},
			write: func(f *nomadfake.Server) { f.SetStatus(allocID(1), "complete") }},
		{name: "a collected allocation wakes it: an empty list", wait: "1m", moved: true,
			write: func(f *nomadfake.Server) { f.GC(allocID(1)) }},
		{name: "a write in a hidden namespace wakes it, the list unchanged", token: "narrow", wait: "1m", moved: true, names: []string{allocID(1)},
			write: func(f *nomadfake.Server) { f.Upsert(&api.Allocation{ID: allocID(3), Namespace: "hidden"}) }},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			f := nomadfake.New(t, node)
			f.SetTokens(map[string]nomadfake.Token{
				"":       {Node: true, ReadJob: []string{"*"}},
				"narrow": {Node: true, ReadJob: []string{"default"}},
			})
			f.Upsert(&api.Allocation{ID: allocID(1), ClientStatus: "running"})
			first := get(f, "/v1/node/"+node+"/allocations", tc.token)
			if first.status != http.StatusOK || first.index == 0 {
				t.Fatalf("first answer %+v", first)
			}
			ch := async(f, allocsPath(first.index, tc.wait), tc.token)
			// Let the query arrive and block before the write.
			for f.Requests(nomadfake.NodeAllocations) < 2 {
				time.Sleep(time.Millisecond)
			}
			if tc.write != nil {
				tc.write(f)
			}
			if !tc.moved {
				// Still blocked: the wait is not over yet, however slow
				// the machine.
				select {
				case got := <-ch:
					t.Fatalf("answered before the wait's end: %+v", got)
				case <-time.After(100 * time.Millisecond):
				}
			}
			got := await(t, ch)
			if got.status != http.StatusOK || (got.index > first.index) != tc.moved || got.index < first.index {
				t.Errorf("answer at index %d (status %d) after %d; moved: want %t", got.index, got.status, first.index, tc.moved)
			}
			for _, id := range tc.names {
				if !strings.Contains(got.body, id) {
					t.Errorf("answer lacks %s: %s", id, got.body)
				}
			}
			if n := strings.Count(got.body, `"ID":`); n != len(tc.names) {
				t.Errorf("answer lists %d allocations, want %d: %s", n, len(tc.names), got.body)
			}
			if w := f.WaitIndexes(); len(w) != 2 || w[0] != 0 || w[1] != first.index {
				t.Errorf("wait indexes %v, want [0 %d]", w, first.index)
			}
		})
	}
}

func TestFaults(t *testing.T) {
	stats := "/v1/client/allocation/" + allocID(1) + "/stats"
	cases := []struct {
		name  string
		fault nomadfake.Fault
		path  string
		// want: "reset", or the status and an error body or empty list.
		want      string
		wantIndex bool
		// spent: this request used the one fault up.
		spent bool
	}{
		{"no leader: the servers' endpoints fail", nomadfake.FaultNoLeader, "/v1/node/" + node, "500 No cluster leader", false, true},
		{"no leader: the agent answers for itself", nomadfake.FaultNoLeader, "/v1/agent/self", "200", false, false},
		{"no leader: its client answers for itself", nomadfake.FaultNoLeader, stats, "200", false, false},
		{"reset: every endpoint", nomadfake.FaultReset, "/v1/agent/self", "reset", false, true},
		{"no index", nomadfake.FaultNoIndex, "/v1/node/" + node + "/allocations", "200 []", false, true},
		{"none", nomadfake.FaultNone, "/v1/node/" + node + "/allocations", "200", true, true},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			f := nomadfake.New(t, node)
			f.Upsert(&api.Allocation{ID: allocID(1), ClientStatus: "running"})
			f.SetFault(tc.fault, 1)
			got := get(f, tc.path, "")
			desc := fmt.Sprint(got.status)
			switch {
			case got.err != nil:
				desc = "reset"
			case got.status != http.StatusOK || got.body == "[]":
				desc += " " + got.body
			}
			if desc != tc.want || (got.index != 0) != tc.wantIndex {
				t.Errorf("answer %q, index %d; want %q, index: %t", desc, got.index, tc.want, tc.wantIndex)
			}
			if again := get(f, "/v1/node/"+node, ""); (again.status == http.StatusOK) != tc.spent {
				t.Errorf("the next request: %+v; the fault used up: want %t", again, tc.spent)
			}
		})
	}
}

// TestFaultWakesABlockedQuery: a leader lost under a blocked query fails
// it at once, as the agent's RPC to the servers does.
func TestFaultWakesABlockedQuery(t *testing.T) {
	f := nomadfake.New(t, node)
	first := get(f, "/v1/node/"+node+"/allocations", "")
	ch := async(f, allocsPath(first.index, "1m"), "")
	for f.Requests(nomadfake.NodeAllocations) < 2 {
		time.Sleep(time.Millisecond)
	}
	f.SetFault(nomadfake.FaultNoLeader, -1)
	if got := await(t, ch); got.status != http.StatusInternalServerError || got.body != "No cluster leader" {
		t.Fatalf("blocked query after the fault: %+v", got)
	}
	if got := get(f, "/v1/node/"+node, ""); got.status != http.StatusInternalServerError {
		t.Fatalf("until cleared: %+v", got)
	}
	f.SetFault(nomadfake.FaultNone, 0)
	if got := get(f, "/v1/node/"+node, ""); got.status != http.StatusOK {
		t.Fatalf("after clearing: %+v", got)
	}
	if n := f.Requests(nomadfake.Node); n != 2 {
		t.Errorf("%d node requests counted, want 2", n)
	}
}

// TestClusterWrites: the answers after each write of the cluster.
func TestClusterWrites(t *testing.T) {
	stats := "/v1/client/allocation/" + allocID(1) + "/stats"
	cases := []struct {
		name  string
		write func(f *nomadfake.Server)
		path  string
		want  string // status and body's start
	}{
		{"the client dropped the allocation", func(f *nomadfake.Server) { f.SetLocal(allocID(1), false) },
			stats, `404 Unknown allocation "` + allocID(1) + `"`},
		{"the servers still know it", func(f *nomadfake.Server) { f.SetLocal(allocID(1), false) },
			"/v1/allocation/" + allocID(1), `200 {"ID":"` + allocID(1)},
		{"collected: the servers", func(f *nomadfake.Server) { f.GC(allocID(1)) }, "/v1/allocation/" + allocID(1), "404 alloc not found"},
		{"collected: the client", func(f *nomadfake.Server) { f.GC(allocID(1)) }, stats, `404 Unknown allocation "` + allocID(1) + `"`},
		{"node purged", func(f *nomadfake.Server) { f.SetRegistered(false) }, "/v1/node/" + node, "404 node not found"},
		{"node purged: its allocation list is still 200", func(f *nomadfake.Server) { f.SetRegistered(false) },
			"/v1/node/" + node + "/allocations", `200 [{"ID":"` + allocID(1)},
		{"a server-only agent", func(f *nomadfake.Server) { f.SetAgentNode("") }, "/v1/agent/self", `200 {"config":{},"member":{},"stats":{}}`},
		{"ACLs off, 1.6.2", func(f *nomadfake.Server) { f.SetTokens(nil) }, "/v1/acl/token/self", `400 ACL support disabled`},
		{"ACLs off, 1.11.3", func(f *nomadfake.Server) { f.SetTokens(nil); f.SetDialect(nomadfake.Nomad111) },
			"/v1/acl/token/self", `200 {"AccessorID":"acls-disabled"`},
		{"no token, 1.6.2", func(f *nomadfake.Server) { f.SetTokens(map[string]nomadfake.Token{}) },
			"/v1/acl/token/self", `500 acl token lookup failed: missing secret id`},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			f := nomadfake.New(t, node)
			f.Upsert(&api.Allocation{ID: allocID(1), ClientStatus: "complete"})
			tc.write(f)
			got := get(f, tc.path, "")
			if desc := fmt.Sprintf("%d %s", got.status, got.body); !strings.HasPrefix(desc, tc.want) {
				t.Errorf("answer %s, want %s…", desc, tc.want)
			}
		})
	}
}
