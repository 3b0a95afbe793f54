package cli

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"os"
	"strings"

	"github.com/hashicorp/nomad/api"

	"github.com/nomad-device-zfs/nomad-device-zfs/allocwatch"
	"github.com/nomad-device-zfs/nomad-device-zfs/internal/nomadapi"
)

// The policy lines docs/security.md gives for each capability the plugin
// needs.
const (
	nodeReadRule  = `node { policy = "read" }`
	readJobRule   = `namespace "*" { capabilities = ["read-job"] }`
	agentReadRule = `agent { policy = "read" }`
)

// apiTarget is the API as the plugin reaches it: its nomad block over the
// environment, with where each value came from.
type apiTarget struct {
	client    *nomadapi.Client
	addr      string
	addrFrom  string
	tokenFrom string
}

// pluginAPI builds the client the plugin's watcher would use. The plugin
// inherits the agent's environment, not this shell's: a value taken from
// the environment is named as such.
func pluginAPI(nc allocwatch.Config) (*apiTarget, error) {
	if err := nc.Validate(); err != nil {
		return nil, fmt.Errorf("nomad block: %w", err)
	}
	c, err := nomadapi.New(nc.Config, nil)
	if err != nil {
		return nil, fmt.Errorf("nomad block: %w", err)
	}
	t := &apiTarget{client: c, addr: c.Address(), addrFrom: "default", tokenFrom: "no token"}
	switch {
	case nc.Address != "":
		t.addrFrom = "nomad.address"
	case os.Getenv("NOMAD_ADDR") != "":
		t.addrFrom = "$NOMAD_ADDR of this shell; the plugin has the agent's environment"
	}
	switch {
	case nc.Token != "":
		t.tokenFrom = "nomad.token"
	case nc.TokenFile != "":
		t.tokenFrom = "nomad.token_file " + nc.TokenFile
	case c.Token() != "":
		t.tokenFrom = "$NOMAD_TOKEN of this shell"
	}
	return t, nil
}

// get is one GET with a timeout; status and body are those of an error
// answer, 0 and "" for a transport error or success.
func (t *apiTarget) get(ctx context.Context, path string, q *api.QueryOptions, out any) (status int, body string, err error) {
	ctx, cancel := context.WithTimeout(ctx, apiTimeout)
	defer cancel()
	err = t.client.Query(ctx, path, q, out)
	status, body = nomadapi.HTTPStatus(err)
	return status, body, err
}

// checkAPI checks that the plugin's watcher can do its work: the agent
// answers, the token is known, and it holds node:read, read-job and (without
// client_id_file) agent:read. A failure that makes the later checks
// meaningless (API down, unknown token) is the section's only problem.
func (d *doctor) checkAPI(ctx context.Context, nc allocwatch.Config) {
	t, err := pluginAPI(nc)
	if err != nil {
		d.begin("Nomad API")
		d.fail("%v", err)
		return
	}
	d.begin(fmt.Sprintf("Nomad API (%s, from %s)", t.addr, t.addrFrom))

	var leader string
	if status, _, err := t.get(ctx, "/v1/status/leader", nil, &leader); status == 0 && err != nil {
		if isConnRefused(err) {
			d.fail("the Nomad API at %s is down: connection refused (is the agent running, and is nomad.address its HTTP address?)", t.addr)
		} else {
			d.fail("the Nomad API at %s does not answer: %v", t.addr, err)
		}
		return
	}
	d.ok("the agent answers at %s", t.addr)

	var self api.ACLToken
	status, body, err := t.get(ctx, "/v1/acl/token/self", nil, &self)
	switch {
	case err == nil && self.AccessorID == "acls-disabled",
		status == http.StatusBadRequest && strings.Contains(body, "ACL support disabled"):
		// ACL.WhoAmI without ACLs: 200 and structs.ACLsDisabledToken on
		// Nomad 1.10 and 1.11, 400 "ACL support disabled" on 1.6.
		d.ok("ACLs are disabled: every request is allowed")
		return
	case status == http.StatusForbidden,
		status == http.StatusNotFound && strings.Contains(body, "ACL token not found"):
		// 403 on 1.10 and 1.11, 404 "ACL token not found" on 1.6.
		d.fail("Nomad does not know the token (%s): /v1/acl/token/self answered %d; it was deleted, expired or belongs to another cluster", t.tokenFrom, status)
		return
	case status == http.StatusInternalServerError && strings.Contains(body, "missing secret id"):
		// 1.6 without a token (1.10 and 1.11 answer with the anonymous one).
		d.warn("no token (%s): the plugin's requests are anonymous", t.tokenFrom)
	case status != 0 && strings.Contains(body, "failed to parse"):
		d.fail("the token (%s) is not a Nomad ACL token secret: %s", t.tokenFrom, body)
		return
	case err != nil:
		d.warn("cannot read the token (%s): %v", t.tokenFrom, err)
	case self.AccessorID == "anonymous":
		d.warn("no token (%s): the plugin's requests are anonymous", t.tokenFrom)
	default:
		d.ok("token %q (%s, %s; policies %s)", self.Name, t.tokenFrom, self.Type, strings.Join(self.Policies, ", "))
	}

	nodeID, nodeFrom := "", ""
	if f := nc.ClientIDFile; f != "" {
		b, err := os.ReadFile(f)
		switch {
		case errors.Is(err, os.ErrNotExist):
			d.warn("nomad.client_id_file %s does not exist yet: the client writes it when it first registers, and the plugin waits for it", f)
		case err != nil:
			d.fail("nomad.client_id_file: %v", err)
		default:
			nodeID, nodeFrom = strings.TrimSpace(string(b)), f
		}
	}
	var agentSelf api.AgentSelf
	agentStatus, _, agentErr := t.get(ctx, "/v1/agent/self", nil, &agentSelf)
	if nodeID == "" && agentErr == nil {
		if id := agentSelf.Stats["client"]["node_id"]; id != "" {
			nodeID, nodeFrom = id, "/v1/agent/self"
		}
	}

	d.checkNodeRead(ctx, t, nodeID, nodeFrom)
	d.checkReadJob(ctx, t)
	switch {
	case nc.ClientIDFile != "":
		d.ok("agent:read not needed: nomad.client_id_file is set")
	case agentStatus == http.StatusForbidden:
		d.fail("the token lacks agent:read, which the plugin needs to find its node ID since nomad.client_id_file is not set: "+
			"GET /v1/agent/self answered 403 (add %s, or set client_id_file)", agentReadRule)
	case agentErr != nil:
		d.fail("GET /v1/agent/self failed: %v", agentErr)
	case agentSelf.Stats["client"]["node_id"] == "":
		d.fail("the agent at %s runs no client: the plugin must talk to its own node's agent", t.addr)
	default:
		d.ok("agent:read: node ID %s from /v1/agent/self", nodeID)
	}
}

func (d *doctor) checkNodeRead(ctx context.Context, t *apiTarget, nodeID, from string) {
	path := "/v1/nodes"
	var out any
	if nodeID != "" {
		path = "/v1/node/" + nodeID
	}
	status, body, err := t.get(ctx, path, &api.QueryOptions{PerPage: 1}, &out)
	switch {
	case err == nil && nodeID != "":
		d.ok("node:read: node %s (from %s) is registered", nodeID, from)
	case err == nil:
		d.ok("node:read: GET /v1/nodes answers")
	case status == http.StatusForbidden:
		d.fail("the token lacks node:read: GET %s answered 403, so the plugin cannot list this node's allocations (add %s)", path, nodeReadRule)
	case status == http.StatusNotFound && nodeID != "":
		d.fail("node %s (from %s) is not registered with the servers: %s", nodeID, from, body)
	default:
		d.fail("GET %s failed: %v", path, err)
	}
}

func (d *doctor) checkReadJob(ctx context.Context, t *apiTarget) {
	var allocs []*api.AllocationListStub
	status, _, err := t.get(ctx, "/v1/allocations", &api.QueryOptions{Namespace: "*", PerPage: 1}, &allocs)
	switch {
	case status == http.StatusForbidden:
		d.fail("the token lacks read-job: GET /v1/allocations?namespace=* answered 403, so the plugin cannot tell which allocation holds a slot "+
			"and never releases one (add %s)", readJobRule)
		return
	case err != nil:
		d.fail("GET /v1/allocations failed: %v", err)
		return
	}
	var nss []*api.Namespace
	if _, _, err := t.get(ctx, "/v1/namespaces", nil, &nss); err != nil || len(nss) == 0 {
		d.ok("read-job: allocations readable")
		return
	}
	names := make([]string, 0, len(nss))
	for _, ns := range nss {
		names = append(names, ns.Name)
	}
	d.ok("read-job: allocations readable in the namespaces the token sees: %s (jobs using the device must run in these)", strings.Join(names, ", "))
}
