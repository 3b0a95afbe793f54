// Package examples holds the example agent configurations and jobs the
// README points to, embedded so that the tests run these very files: the
// end-to-end docker tests run job-docker.nomad.hcl on a real Docker engine.
package examples

import "embed"

// Files are the *.hcl files of this directory.
//
//go:embed *.hcl
var Files embed.FS
