package cli

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"slices"
	"strings"
	"syscall"
	"time"

	"github.com/nomad-device-zfs/nomad-device-zfs/allocwatch"
	"github.com/nomad-device-zfs/nomad-device-zfs/internal/nomadapi"
	"github.com/nomad-device-zfs/nomad-device-zfs/model"
)

// apiFlags are the nomad CLI's connection flags. Each one set overrides the
// plugin's nomad block; unset ones fall back to the block, then to the
// NOMAD_* environment, then to http://127.0.0.1:4646 — so by default the CLI
// asks the agent the plugin asks, with the plugin's token.
type apiFlags struct {
	address, token, caCert, clientCert, clientKey, tlsServerName string
}

func (f *apiFlags) register(fs *flag.FlagSet) {
	fs.StringVar(&f.address, "address", "", "The Nomad agent's HTTP address; default: the plugin's nomad.address, then $NOMAD_ADDR.")
	fs.StringVar(&f.token, "token", "", "ACL token secret; default: the plugin's nomad.token or token_file, then $NOMAD_TOKEN.")
	fs.StringVar(&f.caCert, "ca-cert", "", "CA certificate file; default: nomad.ca_file, then $NOMAD_CACERT.")
	fs.StringVar(&f.clientCert, "client-cert", "", "Client certificate file; default: nomad.cert_file, then $NOMAD_CLIENT_CERT.")
	fs.StringVar(&f.clientKey, "client-key", "", "Client key file; default: nomad.key_file, then $NOMAD_CLIENT_KEY.")
	fs.StringVar(&f.tlsServerName, "tls-server-name", "", "Server name to verify; default: nomad.tls_server_name, then $NOMAD_TLS_SERVER_NAME.")
}

// apply layers the flags over the plugin's nomad block.
func (f *apiFlags) apply(c allocwatch.Config) allocwatch.Config {
	set := func(dst *string, v string) {
		if v != "" {
			*dst = v
		}
	}
	set(&c.Address, f.address)
	if f.token != "" {
		c.Token, c.TokenFile = f.token, ""
	}
	set(&c.CAFile, f.caCert)
	set(&c.CertFile, f.clientCert)
	set(&c.KeyFile, f.clientKey)
	set(&c.TLSServerName, f.tlsServerName)
	return c
}

// address is where c leads, after the environment and the default.
func address(c allocwatch.Config) string { return c.AgentAddress() }

// holder is a slot's holder as Nomad knows it.
type holder struct {
	ID string `json:"alloc_id"`
	// Found is false when Nomad definitely no longer knows the allocation
	// (garbage-collected). Meaningless when Err is set.
	Found         bool     `json:"found"`
	Namespace     string   `json:"namespace,omitempty"`
	JobID         string   `json:"job_id,omitempty"`
	TaskGroup     string   `json:"task_group,omitempty"`
	Tasks         []string `json:"tasks,omitempty"`
	ClientStatus  string   `json:"client_status,omitempty"`
	DesiredStatus string   `json:"desired_status,omitempty"`
	// Err says why Nomad could not be asked; Error is its text.
	Err   error  `json:"-"`
	Error string `json:"error,omitempty"`
	// alloc is Nomad's answer, for the model's rules.
	alloc model.Alloc
}

// nomadAPI answers questions about holders through the allocation
// watcher's one-shot queries (its errors are classified already).
type nomadAPI struct {
	w    *allocwatch.Watcher
	addr string
	// down, once set, is the reason every further question fails fast: a
	// status of many slots must not wait a timeout per slot.
	down error
}

// apiTimeout bounds one question to the API.
const apiTimeout = 10 * time.Second

func newNomadAPI(c allocwatch.Config) (*nomadAPI, error) {
	w, err := allocwatch.New(c, nil)
	if err != nil {
		return nil, err
	}
	return &nomadAPI{w: w, addr: address(c)}, nil
}

// holder looks allocation id up and names the tasks holding slot.
func (n *nomadAPI) holder(ctx context.Context, id, slot string) holder {
	h := holder{ID: id}
	if n.down != nil {
		h.Err, h.Error = n.down, n.down.Error()
		return h
	}
	ctx, cancel := context.WithTimeout(ctx, apiTimeout)
	defer cancel()
	a, found, err := n.w.Lookup(ctx, id)
	if err != nil {
		if !errors.Is(err, nomadapi.ErrPermissionDenied) {
			n.down = err
		}
		h.Err, h.Error = err, err.Error()
		return h
	}
	h.Found, h.alloc = found, a
	h.Namespace, h.JobID, h.TaskGroup = a.Namespace, a.JobID, a.TaskGroup
	h.ClientStatus, h.DesiredStatus = a.ClientStatus, a.DesiredStatus
	for _, d := range a.Devices {
		if slices.Contains(d.IDs, slot) && !slices.Contains(h.Tasks, d.Task) {
			h.Tasks = append(h.Tasks, d.Task)
		}
	}
	return h
}

// runningLocally asks the local client whether it still has allocation id.
func (n *nomadAPI) runningLocally(ctx context.Context, id string) (bool, error) {
	ctx, cancel := context.WithTimeout(ctx, apiTimeout)
	defer cancel()
	return n.w.RunningLocally(ctx, id)
}

// apiProblem phrases an API failure for a person.
func apiProblem(addr string, err error) string {
	switch {
	case errors.Is(err, nomadapi.ErrPermissionDenied):
		return fmt.Sprintf("the Nomad API at %s denies the token: %v", addr, err)
	case isConnRefused(err):
		return fmt.Sprintf("the Nomad API at %s is down (connection refused)", addr)
	}
	return fmt.Sprintf("the Nomad API at %s did not answer: %v", addr, err)
}

func isConnRefused(err error) bool {
	return errors.Is(err, syscall.ECONNREFUSED) || err != nil && strings.Contains(err.Error(), "connection refused")
}

// short abbreviates an ID as the nomad CLI does.
func short(id string) string {
	if len(id) > 8 {
		return id[:8]
	}
	return id
}
