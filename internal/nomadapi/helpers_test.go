package nomadapi

import (
	"fmt"

	"github.com/hashicorp/nomad/api"
)

// id returns a valid Nomad-style ID numbered n.
func id(n int) string { return fmt.Sprintf("00000000-0000-4000-8000-%012d", n) }

// apiAlloc is allocation n of job "web" in client status status, desired
// "run", edited by opts.
func apiAlloc(n int, status string, opts ...func(*api.Allocation)) *api.Allocation {
	a := &api.Allocation{ID: id(n), Namespace: "default", JobID: "web", Job: &api.Job{Type: new("service")},
		TaskGroup: "g", ClientStatus: status, DesiredStatus: api.AllocDesiredStatusRun}
	for _, o := range opts {
		o(a)
	}
	return a
}
