package nomadtest

import (
	"testing"

	"github.com/hashicorp/nomad/api"
)

// CreateToken upserts an ACL policy named policyName with the rules
// policyHCL, creates a client token holding only that policy, and returns
// the token's secret. The agent must have been started with ACL.
//
//	tok := a.CreateToken(t, "watcher", `node { policy = "read" }
//	    namespace "*" { policy = "read" }`)
func (a *Agent) CreateToken(t testing.TB, policyName, policyHCL string) string {
	t.Helper()
	if !a.cfg.ACL {
		t.Fatalf("nomadtest: CreateToken needs an agent started with Config.ACL")
	}
	c := a.Client()
	policy := &api.ACLPolicy{Name: policyName, Rules: policyHCL}
	if _, err := c.ACLPolicies().Upsert(policy, nil); err != nil {
		a.fatalf(t, "upserting ACL policy %q: %v", policyName, err)
	}
	tok, _, err := c.ACLTokens().Create(&api.ACLToken{
		Name:     policyName + "-token",
		Type:     "client",
		Policies: []string{policyName},
	}, nil)
	if err != nil {
		a.fatalf(t, "creating token for policy %q: %v", policyName, err)
	}
	return tok.SecretID
}
