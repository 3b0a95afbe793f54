package nomadfake_test

// The fake held to a real Nomad agent: one table of requests, each sent as
// raw HTTP to a real agent and to a fake loaded with the same allocations and
// tokens, and the answers compared: status, content type, query meta headers,
// error text, and what the callers read of a body.

import (
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/hashicorp/nomad/api"

	"github.com/nomad-device-zfs/nomad-device-zfs/internal/nomadfake"
	"github.com/nomad-device-zfs/nomad-device-zfs/internal/nomadtest"
)

// agentTimeout bounds the wait for the real agent to place and run jobs.
const agentTimeout = 90 * time.Second

// IDs no agent knows.
const (
	unknownAlloc  = "11111111-2222-4333-8444-555555555555"
	unknownNode   = "66666666-7777-4888-8999-000000000000"
	unknownSecret = "deadbeef-0000-4000-8000-000000000000"
)

// conformanceTokens are the tokens asked with, by name: the
// least-privilege policy of docs/security.md, each of its three rights taken away, read-job in
// one namespace only, a secret the cluster does not know, and none.
var conformanceTokens = []struct {
	name string
	tok  *nomadfake.Token // nil: no token registered under the name
}{
	{"full", &nomadfake.Token{Node: true, Agent: true, ReadJob: []string{"*"}}},
	{"no-node", &nomadfake.Token{Agent: true, ReadJob: []string{"*"}}},
	{"no-job", &nomadfake.Token{Node: true, Agent: true}},
	{"no-agent", &nomadfake.Token{Node: true, ReadJob: []string{"*"}}},
	{"default-only", &nomadfake.Token{Node: true, Agent: true, ReadJob: []string{"default"}}},
	{"unknown", nil},
	{"anonymous", nil},
}

// conformanceRequests are the requests of the table; in a path, {node},
// {visible}, {secret} and {done} are the node's and the allocations' IDs,
// {index} the index the node's allocations are at.
var conformanceRequests = []struct {
	name, path string
	body       func(w *world, b []byte, index uint64) string // what callers read of a 200 answer
}{
	{"node allocations", "/v1/node/{node}/allocations", allocIDs},
	{"node allocations, blocking at the current index", "/v1/node/{node}/allocations?index={index}&wait=300ms", allocIDs},
	{"allocations of an unknown node", "/v1/node/" + unknownNode + "/allocations", allocIDs},
	{"node", "/v1/node/{node}", nodeOf},
	{"unknown node", "/v1/node/" + unknownNode, nodeOf},
	{"nodes", "/v1/nodes", nodeOf},
	{"agent self", "/v1/agent/self", agentNode},
	{"allocation", "/v1/allocation/{visible}", allocIDs},
	{"allocation in the hidden namespace", "/v1/allocation/{secret}", allocIDs},
	{"completed allocation", "/v1/allocation/{done}", allocIDs},
	{"unknown allocation", "/v1/allocation/" + unknownAlloc, allocIDs},
	{"allocations in every namespace", "/v1/allocations?namespace=*", allocIDs},
	{"stats", "/v1/client/allocation/{visible}/stats", statsKeys},
	{"stats in the hidden namespace", "/v1/client/allocation/{secret}/stats", statsKeys},
	{"stats of a completed allocation", "/v1/client/allocation/{done}/stats", statsKeys},
	{"stats of an unknown allocation", "/v1/client/allocation/" + unknownAlloc + "/stats", statsKeys},
	{"token self", "/v1/acl/token/self", tokenOf},
	{"namespaces", "/v1/namespaces", namespaceNames},
	{"leader", "/v1/status/leader", leader},
}

// TestConformanceACL: ACLs on, docs/security.md's policy and its variants.
func TestConformanceACL(t *testing.T) {
	t.Parallel()
	agent, fake := twoWorlds(t, true)
	for _, tc := range conformanceRequests {
		t.Run(tc.name, func(t *testing.T) {
			for _, tok := range conformanceTokens {
				want := agent.ask(t, tc.path, tok.name, tc.body)
				got := fake.ask(t, tc.path, tok.name, tc.body)
				t.Logf("%-12s real agent: %s", tok.name, want)
				if got != want {
					t.Errorf("%-12s fake: %s", tok.name, got)
				}
			}
		})
	}
}

// TestConformanceNoACL: ACLs disabled, any token or none.
func TestConformanceNoACL(t *testing.T) {
	t.Parallel()
	agent, fake := twoWorlds(t, false)
	for _, tc := range conformanceRequests {
		t.Run(tc.name, func(t *testing.T) {
			for _, tok := range []string{"unknown", "anonymous"} {
				want := agent.ask(t, tc.path, tok, tc.body)
				got := fake.ask(t, tc.path, tok, tc.body)
				t.Logf("%-12s real agent: %s", tok, want)
				if got != want {
					t.Errorf("%-12s fake: %s", tok, got)
				}
			}
		})
	}
}

// world is one agent, real or fake, with the same allocations, the same
// tokens and the same IDs as the other.
type world struct {
	addr    string
	node    string
	ids     map[string]string // {visible}, ... → allocation ID
	secrets map[string]string // token name → secret
	index   uint64            // the node's allocations' X-Nomad-Index
}

// twoWorlds starts a real agent, runs a job in "default" and one in
// "hidden" that keep running and one that completes, and loads a fake with
// what the real agent then holds.
func twoWorlds(t *testing.T, acl bool) (agent, fake *world) {
	t.Helper()
	if testing.Short() {
		t.Skip("starts a real Nomad agent; skipped with -short")
	}
	bin := nomadtest.Binary(t)
	v, err := nomadtest.AgentVersion(bin)
	if err != nil {
		t.Fatal(err)
	}
	a := nomadtest.Start(t, nomadtest.Config{Binary: bin, ACL: acl})
	mgmt := a.Client()
	if _, err := mgmt.Namespaces().Register(&api.Namespace{Name: "hidden"}, nil); err != nil {
		t.Fatal(err)
	}
	a.RunJob(t, job("visible", "default", 600))
	a.RunJob(t, job("secret", "hidden", 600))
	a.RunJob(t, job("done", "default", 0))
	allocs := settled(t, mgmt, a.NodeID())

	agent = &world{addr: a.Address(), node: a.NodeID(), ids: map[string]string{}, secrets: map[string]string{"unknown": unknownSecret}}
	f := nomadfake.New(t, a.NodeID())
	f.SetDialect(nomadfake.DialectOf(v))
	t.Logf("Nomad %s: the fake answers in dialect %d", v, nomadfake.DialectOf(v))
	fake = &world{addr: f.URL(), node: a.NodeID(), ids: agent.ids, secrets: agent.secrets}
	for _, al := range allocs {
		agent.ids["{"+al.JobID+"}"] = al.ID
		f.Upsert(al)
	}
	if acl {
		tokens := map[string]nomadfake.Token{}
		for _, tc := range conformanceTokens {
			if tc.tok == nil {
				continue
			}
			tok := *tc.tok
			tok.Name, tok.Policies = tc.name+"-token", []string{tc.name}
			secret := a.CreateToken(t, tc.name, tok.Policy())
			agent.secrets[tc.name] = secret
			tokens[secret] = tok
		}
		f.SetTokens(tokens)
	}
	agent.index = agent.nodeIndex(t)
	fake.index = fake.nodeIndex(t)
	return agent, fake
}

// job is a batch job in namespace ns that sleeps secs. Batch: a service
// job's deployment would mark its allocation healthy some seconds later, a
// write that moves the index while the table runs.
func job(name, ns string, secs int) string {
	return fmt.Sprintf(`job %q {
  namespace = %q
  type      = "batch"
  group "g" {
    task "t" {
      driver = "raw_exec"
      config {
        command = "/bin/sleep"
        args    = ["%d"]
      }
    }
  }
}`, name, ns, secs)
}

// settled waits until the node runs visible and secret and has completed
// done, and returns the three allocations, oldest first.
func settled(t *testing.T, mgmt *api.Client, node string) []*api.Allocation {
	t.Helper()
	want := map[string]string{"visible": "running", "secret": "running", "done": "complete"}
	var last []string
	for deadline := time.Now().Add(agentTimeout); time.Now().Before(deadline); time.Sleep(250 * time.Millisecond) {
		allocs, _, err := mgmt.Nodes().Allocations(node, nil)
		if err != nil {
			t.Fatal(err)
		}
		last = last[:0]
		for _, al := range allocs {
			if want[al.JobID] == al.ClientStatus {
				last = append(last, al.JobID)
			}
		}
		if len(allocs) == len(want) && len(last) == len(want) {
			slices.SortFunc(allocs, func(x, y *api.Allocation) int { return int(x.CreateIndex) - int(y.CreateIndex) })
			return allocs
		}
	}
	t.Fatalf("the jobs did not settle within %s: %v of %v", agentTimeout, last, want)
	return nil
}

// nodeIndex is the X-Nomad-Index of the node's allocations.
func (w *world) nodeIndex(t *testing.T) uint64 {
	t.Helper()
	resp := w.get(t, "/v1/node/"+w.node+"/allocations", "full")
	resp.Body.Close()
	var index uint64
	if _, err := fmt.Sscan(resp.Header.Get("X-Nomad-Index"), &index); err != nil {
		t.Fatalf("%s: node allocations without index: %v", w.addr, err)
	}
	return index
}

func (w *world) get(t *testing.T, path, token string) *http.Response {
	t.Helper()
	pairs := []string{"{node}", w.node, "{index}", fmt.Sprint(w.index)}
	for k, v := range w.ids {
		pairs = append(pairs, k, v)
	}
	path = strings.NewReplacer(pairs...).Replace(path)
	req, err := http.NewRequest(http.MethodGet, w.addr+path, nil)
	if err != nil {
		t.Fatal(err)
	}
	if s := w.secrets[token]; s != "" {
		req.Header.Set("X-Nomad-Token", s)
	}
	c := &http.Client{Timeout: 30 * time.Second}
	resp, err := c.Do(req)
	if err != nil {
		t.Fatalf("GET %s%s: %v", w.addr, path, err)
	}
	return resp
}

// ask sends the request and describes the answer in terms both worlds
// share: the status, the media type, the meta headers, and the error text
// or what body makes of a 200 answer.
func (w *world) ask(t *testing.T, path, token string, body func(*world, []byte, uint64) string) string {
	t.Helper()
	resp := w.get(t, path, token)
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	if err != nil {
		t.Fatal(err)
	}
	meta := "no meta"
	if resp.Header.Get("X-Nomad-Index") != "" {
		meta = fmt.Sprintf("meta known leader %s, last contact %s", resp.Header.Get("X-Nomad-KnownLeader"),
			map[bool]string{true: "set", false: "unset"}[resp.Header.Get("X-Nomad-LastContact") != ""])
	}
	ctype, _, _ := strings.Cut(resp.Header.Get("Content-Type"), ";")
	out := fmt.Sprintf("%d %s, %s: ", resp.StatusCode, ctype, meta)
	if resp.StatusCode != http.StatusOK {
		return out + fmt.Sprintf("%q", w.names(string(b)))
	}
	var index uint64
	fmt.Sscan(resp.Header.Get("X-Nomad-Index"), &index)
	return out + body(w, b, index)
}

// names writes the allocation IDs in s as their placeholders.
func (w *world) names(s string) string {
	for k, v := range w.ids {
		s = strings.ReplaceAll(s, v, k)
	}
	return strings.ReplaceAll(s, w.node, "{node}")
}

// What the callers read of each 200 answer.

// allocIDs are the allocations in an answer (a list or one), and where
// its index stands: at the node's allocations' index, or at the one
// allocation's ModifyIndex.
func allocIDs(w *world, b []byte, index uint64) string {
	var v any
	if err := json.Unmarshal(b, &v); err != nil {
		return "undecodable: " + err.Error()
	}
	list, ok := v.([]any)
	if !ok {
		list = []any{v}
	}
	var names []string
	var modify float64
	for _, e := range list {
		m, _ := e.(map[string]any)
		id, _ := m["ID"].(string)
		names = append(names, w.names(id))
		modify, _ = m["ModifyIndex"].(float64)
	}
	slices.Sort(names)
	where := fmt.Sprintf("index %+d from the node's", int64(index)-int64(w.index))
	if _, one := v.(map[string]any); one && uint64(modify) == index {
		where = "index its ModifyIndex"
	}
	return fmt.Sprintf("%v, %s", names, where)
}

// nodeOf is the node or nodes an answer names, with their status.
func nodeOf(w *world, b []byte, _ uint64) string {
	var v any
	if err := json.Unmarshal(b, &v); err != nil {
		return "undecodable: " + err.Error()
	}
	list, ok := v.([]any)
	if !ok {
		list = []any{v}
	}
	var out []string
	for _, e := range list {
		m, _ := e.(map[string]any)
		id, _ := m["ID"].(string)
		status, _ := m["Status"].(string)
		out = append(out, w.names(id)+" "+status)
	}
	return fmt.Sprint(out)
}

// agentNode is /v1/agent/self's stats.client.node_id.
func agentNode(w *world, b []byte, _ uint64) string {
	var self api.AgentSelf
	if err := json.Unmarshal(b, &self); err != nil {
		return "undecodable: " + err.Error()
	}
	return "client node " + w.names(self.Stats["client"]["node_id"])
}

// statsKeys are the top-level keys of an allocation's stats.
func statsKeys(_ *world, b []byte, _ uint64) string {
	var m map[string]json.RawMessage
	if err := json.Unmarshal(b, &m); err != nil {
		return "undecodable: " + err.Error()
	}
	return fmt.Sprint(slices.Sorted(func(yield func(string) bool) {
		for k := range m {
			if !yield(k) {
				return
			}
		}
	}))
}

// tokenOf is what doctor prints of /v1/acl/token/self.
func tokenOf(_ *world, b []byte, _ uint64) string {
	var tok api.ACLToken
	if err := json.Unmarshal(b, &tok); err != nil {
		return "undecodable: " + err.Error()
	}
	accessor := "an accessor"
	if tok.AccessorID == "anonymous" {
		accessor = "accessor anonymous"
	}
	return fmt.Sprintf("%s: %q, %s, policies %v", accessor, tok.Name, tok.Type, tok.Policies)
}

// namespaceNames are the namespaces listed.
func namespaceNames(_ *world, b []byte, _ uint64) string {
	var nss []*api.Namespace
	if err := json.Unmarshal(b, &nss); err != nil {
		return "undecodable: " + err.Error()
	}
	var names []string
	for _, ns := range nss {
		names = append(names, ns.Name)
	}
	return fmt.Sprint(names)
}

// leader is whether /v1/status/leader names a host:port.
func leader(_ *world, b []byte, _ uint64) string {
	var addr string
	if err := json.Unmarshal(b, &addr); err != nil {
		return "undecodable: " + err.Error()
	}
	if _, port, ok := strings.Cut(addr, ":"); !ok || port == "" {
		return fmt.Sprintf("no leader address: %q", addr)
	}
	return "a leader address"
}
