package transfer_test

import (
	"errors"
	"net/netip"
	"strings"
	"testing"

	"github.com/nomad-device-zfs/nomad-device-zfs/transfer"
)

// TestTransferRequireNodeIdentity: with require_node_identity, a request
// from the replacement's node is allowed only if its certificate also
// names that node (b.global.nomad here, as `nomad tls cert create -client
// -additional-dnsname` makes it); the cluster's common client certificate,
// or another node's, from B's address is refused (issue 28: identity was
// the source address only). Without it, the address rule alone decides.
func TestTransferRequireNodeIdentity(t *testing.T) {
	cases := []struct {
		name     string
		require  bool
		certArgs []string
		refused  bool
		// nodeName is B's node's name, "b" when empty.
		nodeName string
	}{
		{name: "required, B's own certificate", require: true,
			certArgs: []string{"-client", "-additional-dnsname", "b.global.nomad"}},
		{name: "required, node names compared without case", require: true,
			certArgs: []string{"-client", "-additional-dnsname", "B.global.nomad"}},
		{name: "required, the cluster's common client certificate", require: true,
			certArgs: []string{"-client"}, refused: true},
		{name: "required, another node's certificate", require: true,
			certArgs: []string{"-client", "-additional-dnsname", "c.global.nomad"}, refused: true},
		{name: "not required, the common certificate", certArgs: []string{"-client"}},
		{name: "required, a node named with dots", require: true, nodeName: "b.example.com",
			certArgs: []string{"-client", "-additional-dnsname", "b.example.com.global.nomad"}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			h := newHarness(t)
			h.stop()
			h.requireIdentity = tc.require
			if tc.nodeName != "" {
				h.nomad.SetNode(transfer.Node{ID: nodeB, Name: tc.nodeName, Addresses: []netip.Addr{ipB}})
			}
			h.start()
			h.source.set(h.snapshot("t1", "first", 4<<10, ""), nil)
			_, err := h.client(ipB, tc.certArgs...).Fetch(t.Context(), reqAB, into)
			if tc.refused {
				if !errors.Is(err, transfer.ErrRefused) {
					t.Fatalf("Fetch: %v, want ErrRefused", err)
				}
				waitLog(t, h.logs, "b.global.nomad") // the refusal names the node it wanted
				return
			}
			if err != nil {
				t.Fatalf("Fetch: %v", err)
			}
		})
	}
}

// TestRequireNodeIdentityNeedsANodeInTheCertificate: the option is refused
// at configuration time when this side's certificate names no node, with
// the command that makes one.
func TestRequireNodeIdentityNeedsANodeInTheCertificate(t *testing.T) {
	h := newHarness(t)
	for _, tc := range []struct {
		name    string
		args    []string
		wantErr string
	}{
		{name: "common client certificate", args: []string{"-client"}, wantErr: "require_node_identity is set and the certificate names no node"},
		{name: "a node's certificate", args: []string{"-client", "-additional-dnsname", "node-7.global.nomad"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			cfg := h.pki.Config(t, "127.0.0.1:0", tc.args...)
			cfg.RequireNodeIdentity = true
			err := cfg.Validate()
			switch {
			case tc.wantErr == "" && err != nil:
				t.Fatalf("Validate: %v", err)
			case tc.wantErr != "" && (err == nil || !strings.Contains(err.Error(), tc.wantErr) || !strings.Contains(err.Error(), "cert_file")):
				t.Fatalf("Validate: %v, want an error naming cert_file: %s", err, tc.wantErr)
			}
		})
	}
}
