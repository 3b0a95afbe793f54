package cli

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"os"
	"path/filepath"
	"sort"

	"github.com/hashicorp/nomad/api"
	"github.com/hashicorp/nomad/jobspec2"
	"github.com/hashicorp/nomad/nomad/structs"

	"github.com/nomad-device-zfs/nomad-device-zfs/scheduler"
)

const planHelp = `
Answer, from the live cluster, which nodes and slots the job's zfs/dataset
device asks would get if it were submitted now, and when they cannot all be
placed, why: each candidate node's slots with what keeps them (unhealthy and
why, held by which allocation of which job, being released) and each device
constraint the node's device does not meet.

The verdict is Nomad's own: the job file is parsed as 'nomad job plan' parses
it (jobspec2), and the nodes (with their fingerprinted devices) and their
allocations, read through the HTTP API, are loaded into Nomad's state store
and evaluated by Nomad's own scheduler for the job's type, the code the
servers run. It runs here rather than through the servers' Job.Plan endpoint
because Job.Plan needs a token that may submit jobs and does not say which
node and which device instances a placement gets; this needs only the
plugin's read-only token (node:read and read-job in every namespace; the
allocations of a namespace the token cannot read are invisible, and their
slots look free). Nothing is submitted.

Exit status: 0 when every allocation can be placed now, 2 when some cannot,
1 on an error.`

// Exit status of plan when a placement fails.
const exitNotPlaceable = 2

// runPlanCommand runs the operator's plan command (a Nomad job plan for a
// job's zfs/dataset devices), not a model.Plan of zfs commands.
func runPlanCommand(ctx context.Context, e *env, args []string) int {
	fs := newFlags(e, "plan", "<job file>", planHelp)
	var cf commonFlags
	cf.register(fs)
	var vars, varFiles stringsFlag
	fs.Var(&vars, "var", "A job variable, key=value, as for 'nomad job plan'; repeatable.")
	fs.Var(&varFiles, "var-file", "A job variables file, as for 'nomad job plan'; repeatable.")
	var af apiFlags
	af.register(fs)
	if code, done := parse(fs, args); done {
		return code
	}
	if fs.NArg() != 1 {
		fmt.Fprintf(e.stderr, "plan takes one job file, got %q\n", fs.Args())
		return 1
	}
	job, err := parseJobFile(fs.Arg(0), vars, varFiles)
	if err != nil {
		fmt.Fprintf(e.stderr, "✗ %v\n", err)
		return 1
	}
	_, st, err := loadSettings(cf.configs)
	if err != nil {
		fmt.Fprintf(e.stderr, "✗ %v\n", err)
		return 1
	}
	t, err := pluginAPI(af.apply(st.Nomad))
	if err != nil {
		fmt.Fprintf(e.stderr, "✗ %v\n", err)
		return 1
	}
	live, notes, err := readLive(ctx, t, job)
	switch {
	case isConnRefused(err):
		fmt.Fprintf(e.stderr, "✗ %s\n", apiProblem(t.addr, err))
		return 1
	case err != nil:
		fmt.Fprintf(e.stderr, "✗ the Nomad API at %s: %v\n", t.addr, err)
		return 1
	}
	result, err := scheduler.PlanLive(*live, job, nil)
	if err != nil {
		fmt.Fprintf(e.stderr, "✗ %v\n", err)
		return 1
	}
	rep := buildPlanReport(job, live, result)
	rep.NomadAPI, rep.Notes = t.addr, notes
	if cf.json {
		if err := printJSON(e.stdout, rep); err != nil {
			return 1
		}
	} else {
		rep.print(e.stdout)
	}
	if !rep.Placeable {
		return exitNotPlaceable
	}
	return 0
}

// parseJobFile parses a job file as `nomad job plan` does (HCL2, variables)
// and converts it to the servers' type, canonicalized and validated.
func parseJobFile(path string, vars, varFiles []string) (*structs.Job, error) {
	body, err := os.ReadFile(path)
	if err != nil {
		return nil, fmt.Errorf("job file: %w", err)
	}
	aj, err := jobspec2.ParseWithConfig(&jobspec2.ParseConfig{
		Path: path, BaseDir: filepath.Dir(path), Body: body, AllowFS: true,
		ArgVars: vars, VarFiles: varFiles, Envs: os.Environ(), Strict: true,
	})
	if err != nil {
		return nil, fmt.Errorf("job file %s: %w", path, err)
	}
	return structsJob(aj)
}

// structsJob converts an api.Job to a structs.Job. Nomad's own converter,
// command/agent.ApiJobToStructJob, lives in the agent package, which brings
// the whole agent (server, client, drivers, cloud auto-join) into this
// binary; the api types mirror the structs field by field instead, so a
// JSON round trip carries everything placement reads (constraints,
// affinities, spreads, resources with devices, networks, volumes, update
// and reschedule policies). Defaults come from both Canonicalize methods,
// as on the agent and the servers.
func structsJob(aj *api.Job) (*structs.Job, error) {
	aj.Canonicalize()
	b, err := json.Marshal(aj)
	if err != nil {
		return nil, err
	}
	var j structs.Job
	if err := json.Unmarshal(b, &j); err != nil {
		return nil, fmt.Errorf("job %s: %w", *aj.ID, err)
	}
	if j.NodePool == "" {
		// The servers' admission hook puts a job without a pool in its
		// namespace's default pool, "default" unless the namespace says.
		j.NodePool = structs.NodePoolDefault
	}
	j.Canonicalize()
	if err := j.Validate(); err != nil {
		return nil, fmt.Errorf("job %s is not valid: %w", j.ID, err)
	}
	return &j, nil
}

// readLive reads what the servers would schedule against: every node with
// its devices, each node's allocations, the job's current version and
// latest deployment, and the scheduler configuration. notes say what could not be read and was
// assumed instead.
func readLive(ctx context.Context, t *apiTarget, job *structs.Job) (*scheduler.Live, []string, error) {
	var stubs []*api.NodeListStub
	if status, _, err := t.get(ctx, "/v1/nodes", nil, &stubs); err != nil {
		return nil, nil, readError("listing nodes", status, err)
	}
	sort.Slice(stubs, func(i, j int) bool { return stubs[i].ID < stubs[j].ID })
	live := &scheduler.Live{}
	for _, s := range stubs {
		var n structs.Node
		if status, _, err := t.get(ctx, "/v1/node/"+s.ID, nil, &n); err != nil {
			return nil, nil, readError("reading node "+s.ID, status, err)
		}
		var allocs []*structs.Allocation
		if status, _, err := t.get(ctx, "/v1/node/"+s.ID+"/allocations", nil, &allocs); err != nil {
			return nil, nil, readError("reading the allocations of node "+s.ID, status, err)
		}
		live.Nodes = append(live.Nodes, &n)
		live.Allocs = append(live.Allocs, allocs...)
	}
	var notes []string
	var cur structs.Job
	status, _, err := t.get(ctx, "/v1/job/"+job.ID, &api.QueryOptions{Namespace: job.Namespace}, &cur)
	switch {
	case err == nil:
		live.Current = &cur
	case status == http.StatusNotFound:
	default:
		return nil, nil, readError("reading job "+job.ID, status, err)
	}
	if live.Current != nil {
		var d *structs.Deployment
		if status, _, err := t.get(ctx, "/v1/job/"+job.ID+"/deployment", &api.QueryOptions{Namespace: job.Namespace}, &d); err != nil {
			return nil, nil, readError("reading the deployment of job "+job.ID, status, err)
		}
		live.Deployment = d
	}
	var sc struct {
		SchedulerConfig *structs.SchedulerConfiguration
	}
	switch status, _, err := t.get(ctx, "/v1/operator/scheduler/configuration", nil, &sc); {
	case err == nil && sc.SchedulerConfig != nil:
		live.Config = sc.SchedulerConfig
	case status == http.StatusForbidden:
		notes = append(notes, "the token may not read the scheduler configuration (operator:read): assumed Nomad's default, binpack without preemption for service and batch jobs")
	case err != nil:
		return nil, nil, fmt.Errorf("scheduler configuration: %w", err)
	default:
		return nil, nil, errors.New("scheduler configuration: empty answer")
	}
	return live, notes, nil
}

// readError names what could not be read and, for a denial, the policy
// line the token lacks.
func readError(what string, status int, err error) error {
	if status == http.StatusForbidden {
		return fmt.Errorf("%s: the token is denied; plan needs %s and %s: %w", what, nodeReadRule, readJobRule, err)
	}
	return fmt.Errorf("%s: %w", what, err)
}
