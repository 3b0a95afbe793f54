// Package examples holds the example agent configurations and jobs the
// README and docs/ point to, embedded so that the tests run these very files: the
// end-to-end docker tests run job-docker.nomad.hcl on a real Docker engine,
// and the metrics tests hold the Grafana dashboard to the endpoint's output.
package examples

import "embed"

// Files are the *.hcl files of this directory.
//
//go:embed *.hcl
var Files embed.FS

// Dashboard is grafana-dashboard.json: a Grafana dashboard over the
// plugin's metrics endpoint (import it, pick the Prometheus data source).
//
//go:embed grafana-dashboard.json
var Dashboard []byte
