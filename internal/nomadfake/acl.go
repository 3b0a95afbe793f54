package nomadfake

import (
	"crypto/sha256"
	"encoding/hex"
	"net/http"
	"slices"
	"strings"

	"github.com/hashicorp/nomad/api"
)

// Token is an ACL token as the fake knows it: its name and policies (what
// /v1/acl/token/self shows) and the rights its policies grant. Only the
// rights the plugin and the CLI need are modelled; Policy writes them as
// the rules a real agent is given, so the conformance test hands a real
// agent and the fake the same token.
type Token struct {
	Name     string
	Policies []string
	// Node is node { policy = "read" }.
	Node bool
	// Agent is agent { policy = "read" }.
	Agent bool
	// ReadJob are the namespaces with the read-job capability; "*" is
	// namespace "*" (every namespace).
	ReadJob []string
}

// Policy is the token's rights as ACL policy rules.
func (t Token) Policy() string {
	var b strings.Builder
	if t.Node {
		b.WriteString("node { policy = \"read\" }\n")
	}
	if t.Agent {
		b.WriteString("agent { policy = \"read\" }\n")
	}
	for _, ns := range t.ReadJob {
		b.WriteString("namespace \"" + ns + "\" { capabilities = [\"read-job\"] }\n")
	}
	return b.String()
}

// readJob reports whether the token may read jobs and allocations in ns.
func (t Token) readJob(ns string) bool {
	return slices.Contains(t.ReadJob, "*") || slices.Contains(t.ReadJob, ns)
}

// anyReadJob is acl.AllowNsOp("*", read-job): read-job somewhere.
func (t Token) anyReadJob() bool { return len(t.ReadJob) > 0 }

// caller is who sent a request, as the agent resolves its X-Nomad-Token.
type caller struct {
	Token
	// known is false for a secret the servers do not know: every
	// endpoint then answers 403 (nomad/auth.Authenticate).
	known bool
	// anonymous: no secret at all, under ACLs.
	anonymous bool
	// aclOff: ACLs are disabled and every request is allowed.
	aclOff bool
	// accessor is the token's public ID, derived from its secret.
	accessor string
}

// everything is the caller when ACLs are disabled.
var everything = Token{Node: true, Agent: true, ReadJob: []string{"*"}}

// SetTokens turns ACLs on with these tokens, by secret ID; nil turns them
// off. The secret "" is the anonymous token: without an entry for it,
// requests without a token may do nothing, as on a fresh cluster.
func (s *Server) SetTokens(tokens map[string]Token) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.tokens = tokens
}

func (s *Server) resolveLocked(secret string) caller {
	if s.tokens == nil {
		return caller{Token: everything, known: true, aclOff: true}
	}
	tok, ok := s.tokens[secret]
	if secret == "" {
		if !ok {
			tok = Token{Name: "Anonymous Token", Policies: []string{"anonymous"}}
		}
		return caller{Token: tok, known: true, anonymous: true}
	}
	sum := sha256.Sum256([]byte(secret))
	h := hex.EncodeToString(sum[:16])
	accessor := h[:8] + "-" + h[8:12] + "-" + h[12:16] + "-" + h[16:20] + "-" + h[20:32]
	return caller{Token: tok, known: ok, accessor: accessor}
}

// tokenSelf is GET /v1/acl/token/self (ACL.WhoAmI). Seen on real agents
// (conformance_test.go): the token's name, type and policies. Where they
// differ (Dialect): 1.11.3 answers accessor "anonymous" without a secret,
// 403 for a secret the servers do not know, and with ACLs disabled 200
// and structs.ACLsDisabledToken (accessor "acls-disabled"); 1.6.2 answers
// 500 without a secret, 404 (with query meta) for an unknown one, and 400
// "ACL support disabled".
func (s *Server) tokenSelf(w http.ResponseWriter, _ *http.Request, who caller) {
	old := s.dialectNow() == Nomad16
	switch {
	case old && who.aclOff:
		s.fail(w, http.StatusBadRequest, errACLDisabled)
		return
	case old && who.anonymous:
		s.fail(w, http.StatusInternalServerError, errNoSecret)
		return
	case old && !who.known:
		setMeta(w, s.index())
		s.fail(w, http.StatusNotFound, errTokenNotFound)
		return
	case !who.known:
		s.fail(w, http.StatusForbidden, errPermissionDenied)
		return
	}
	tok := api.ACLToken{AccessorID: who.accessor, Name: who.Name, Type: "client", Policies: who.Policies}
	switch {
	case who.aclOff:
		tok = api.ACLToken{AccessorID: "acls-disabled", Name: "ACLs disabled token", Type: "client"}
	case who.anonymous:
		tok.AccessorID = "anonymous"
	}
	setMeta(w, s.index())
	reply(w, tok)
}

// namespaces is GET /v1/namespaces (Namespace.ListNamespaces): the
// namespaces the token has any capability in, and only those; an empty
// list, not an error, for a token with none.
func (s *Server) namespaces(w http.ResponseWriter, _ *http.Request, who caller) {
	if !who.known {
		s.fail(w, http.StatusForbidden, errPermissionDenied)
		return
	}
	s.mu.Lock()
	names := slices.Sorted(func(yield func(string) bool) {
		for ns := range s.c.namespaces {
			if !yield(ns) {
				return
			}
		}
	})
	index := s.c.index
	s.mu.Unlock()
	out := []*api.Namespace{}
	for _, ns := range names {
		if who.readJob(ns) {
			out = append(out, &api.Namespace{Name: ns})
		}
	}
	setMeta(w, index)
	reply(w, out)
}
