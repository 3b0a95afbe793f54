package transfer

import (
	"crypto/x509"
	"fmt"
	"slices"
	"strings"
)

// Node identity (Config.RequireNodeIdentity). Every certificate that
// `nomad tls cert create -client` makes names client.<region>.nomad, so
// by default a peer's certificate proves only that it is some agent of the
// cluster, and its address says which node it is (Decide). An operator
// who issues one certificate per node, each also naming its node:
//
//	nomad tls cert create -client -region <region> -additional-dnsname <node name>.<region>.nomad
//
// can ask for more: a request is then allowed only if its certificate
// also names the node of the replacement (NodeDNSName), so a process on
// another node, or one that has taken B's address, holding some other
// node's certificate, is refused.

// NodeDNSName is the name a node's certificate carries for node identity:
// <node name>.<region>.nomad, the node name in lower case (DNS names are
// compared without case).
func NodeDNSName(node, region string) string {
	return strings.ToLower(node) + "." + region + ".nomad"
}

// nodeNames are the node names cert carries for region: its DNS names of
// the form <node>.<region>.nomad, other than the agents' own
// (client.<region>.nomad, server.<region>.nomad). A node's name may hold
// dots (a host's full name): host.example.com.<region>.nomad.
func nodeNames(cert *x509.Certificate, region string) []string {
	if cert == nil {
		return nil
	}
	var out []string
	suffix := "." + region + ".nomad"
	for _, n := range cert.DNSNames {
		n = strings.ToLower(n)
		if strings.HasSuffix(n, suffix) && !slices.Contains(peerNames(region), n) {
			out = append(out, n)
		}
	}
	return out
}

// checkNodeIdentity says why cert does not prove it is node's, or nil.
func checkNodeIdentity(cert *x509.Certificate, node, region string) error {
	want := NodeDNSName(node, region)
	names := nodeNames(cert, region)
	if slices.Contains(names, want) {
		return nil
	}
	if len(names) == 0 {
		return fmt.Errorf("its certificate names no node, and require_node_identity wants %s", want)
	}
	return fmt.Errorf("its certificate names %s, not %s", strings.Join(names, ", "), want)
}
