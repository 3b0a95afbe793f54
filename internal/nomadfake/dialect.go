package nomadfake

import (
	"net/http"
	"sync/atomic"

	version "github.com/hashicorp/go-version"
)

// Dialect is which Nomad's answers the fake gives where agents differ.
// Both were held against a real agent by conformance_test.go: Nomad 1.6.2,
// the agent this project builds and tests on, and 1.11.3, which earlier
// releases of this project tested on. Everything else they answer alike.
type Dialect int

const (
	// Nomad16 answers as 1.6.2: an error has no Content-Type;
	// /v1/acl/token/self answers an unknown secret 404 "ACL token not
	// found" (with query meta), no secret 500 "acl token lookup failed:
	// missing secret id", and with ACLs disabled 400 "ACL support
	// disabled"; /v1/agent/self answers an unknown secret 403 "ACL token
	// not found".
	Nomad16 Dialect = iota
	// Nomad111 answers as 1.11.3: errors as text/plain; token/self answers
	// an unknown secret 403 "Permission denied", no secret with the
	// anonymous token, and with ACLs disabled the "ACLs disabled token";
	// agent/self an unknown secret 403 "Permission denied".
	Nomad111
)

// nomad17 is where the dialects part: Nomad16 below it. Only the two ends
// were seen; an agent in between gets 1.11.3's answers.
var nomad17 = version.Must(version.NewVersion("1.7.0"))

// DialectOf is the dialect of an agent of version v.
func DialectOf(v *version.Version) Dialect {
	if v.LessThan(nomad17) {
		return Nomad16
	}
	return Nomad111
}

// SetDialect makes the fake answer as d (Nomad16 until set).
func (s *Server) SetDialect(d Dialect) { s.dialect.Store(int32(d)) }

func (s *Server) dialectNow() Dialect { return Dialect(s.dialect.Load()) }

// dialectValue holds a Dialect; read without the Server's lock, which
// handlers may hold when they fail.
type dialectValue = atomic.Int32

// fail is the agent's error answer (http.go wrap): the status code and the
// error's text alone as the body, plain text in 1.11.3's dialect.
func (s *Server) fail(w http.ResponseWriter, code int, msg string) {
	if s.dialectNow() == Nomad111 {
		w.Header().Set("Content-Type", "text/plain; charset=utf-8")
	} else {
		w.Header()["Content-Type"] = nil // no header, and net/http sniffs none
	}
	w.WriteHeader(code)
	_, _ = w.Write([]byte(msg))
}
