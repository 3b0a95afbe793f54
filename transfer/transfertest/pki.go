package transfertest

import (
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"sync/atomic"
	"testing"

	"github.com/nomad-device-zfs/nomad-device-zfs/transfer"
)

// PKI is a certificate authority made with `nomad tls ca create` in a
// directory of its own, and the certificates it signs.
type PKI struct {
	// Nomad is the nomad binary that makes the certificates.
	Nomad string
	// Dir holds the CA and the certificates.
	Dir string
	// CAFile is the CA certificate (nomad-agent-ca.pem).
	CAFile string
	n      atomic.Int32
}

// NewPKI makes a CA with nomad (nomadtest.Binary or the e2e's staged
// binary) in a temporary directory.
func NewPKI(t testing.TB, nomad string) *PKI {
	t.Helper()
	p := &PKI{Nomad: nomad, Dir: t.TempDir()}
	p.run(t, "tls", "ca", "create")
	p.CAFile = filepath.Join(p.Dir, "nomad-agent-ca.pem")
	if _, err := os.Stat(p.CAFile); err != nil {
		t.Fatalf("nomad tls ca create made no %s: %v", p.CAFile, err)
	}
	return p
}

// savedRE is how `nomad tls cert create` names what it wrote.
var savedRE = regexp.MustCompile(`(?m)(?:Certificate|key) saved to (\S+)$`)

// Cert runs `nomad tls cert create args...` (e.g. "-client", or "-client",
// "-region", "east") and returns the certificate and key, renamed so that
// the next certificate of the same role does not overwrite them.
func (p *PKI) Cert(t testing.TB, args ...string) (certFile, keyFile string) {
	t.Helper()
	out := p.run(t, append([]string{"tls", "cert", "create"}, args...)...)
	n := p.n.Add(1)
	for _, m := range savedRE.FindAllStringSubmatch(out, -1) {
		from := filepath.Join(p.Dir, m[1])
		to := filepath.Join(p.Dir, fmt.Sprintf("%d-%s", n, m[1]))
		if err := os.Rename(from, to); err != nil {
			t.Fatal(err)
		}
		if strings.HasSuffix(m[1], "-key.pem") {
			keyFile = to
		} else {
			certFile = to
		}
	}
	if certFile == "" || keyFile == "" {
		t.Fatalf("nomad tls cert create %s: no certificate and key in its output:\n%s", strings.Join(args, " "), out)
	}
	return certFile, keyFile
}

// Config is a transfer configuration listening on address with a new
// certificate made by Cert(args...) ("-client" when none is given), for
// region "global" unless args name another with -region.
func (p *PKI) Config(t testing.TB, address string, args ...string) transfer.Config {
	t.Helper()
	if len(args) == 0 {
		args = []string{"-client"}
	}
	region := "global"
	for i, a := range args {
		if a == "-region" && i+1 < len(args) {
			region = args[i+1]
		}
	}
	cert, key := p.Cert(t, args...)
	return transfer.Config{Address: address, CAFile: p.CAFile, CertFile: cert, KeyFile: key, Region: region}
}

func (p *PKI) run(t testing.TB, args ...string) string {
	t.Helper()
	cmd := exec.Command(p.Nomad, args...)
	cmd.Dir = p.Dir
	out, err := cmd.CombinedOutput()
	if err != nil {
		t.Fatalf("nomad %s: %v\n%s", strings.Join(args, " "), err, out)
	}
	return string(out)
}
