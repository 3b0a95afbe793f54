package nomadapi

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"time"

	"github.com/hashicorp/nomad/api"
)

// AllocLoss is what the servers say of an allocation's loss, and of its
// group's settings that decide when a cut-off client stops it: what a
// replica's takeover is decided from (model.DecideTakeover, issue 30).
//
// It comes from GET /v1/allocation/<id>, which answers Nomad's own
// structs.Allocation with the job version the allocation runs
// (command/agent/alloc_endpoint.go allocGet, encoded by
// structs.JsonHandleWithExtensions, command/agent/http.go line 767).
// nomad/api's Allocation leaves out AllocStates, where the servers record
// when the allocation turned lost (nomad/structs/structs.go lines
// 10447-10448, AppendState at 10909), so this call decodes the answer
// itself.
type AllocLoss struct {
	ID, ClientStatus string
	// LostByServers: the servers stopped it as lost with its node (its
	// DesiredDescription is AllocLostDescription). Its node's client, back,
	// reports it complete or failed later, and the servers keep the
	// description: the loss still pairs it with an unlinked replacement
	// (model.LostPredecessor).
	LostByServers bool
	// CreateIndex is the servers' index at its creation.
	CreateIndex uint64
	// Namespace, JobID, TaskGroup and Name identify its place in its job:
	// a replacement placed without naming it (PreviousAllocation) has the
	// same (model.LostPredecessor).
	Namespace, JobID, TaskGroup, Name string
	// LostAt is the Time of the first AllocStates entry of Field 0
	// (AllocStateFieldClientStatus) and Value "lost", as WaitClientStop
	// reads it (structs.go lines 10780-10788); zero when there is none.
	// Nomad 1.6.2 keeps none for an allocation lost with its node down:
	// the plan that stops it is normalized (plan_apply.go
	// normalizeStoppedAlloc) and the state store rebuilds the allocation
	// without it (state_store.go DenormalizeAllocationDiffSlice).
	LostAt time.Time
	// ModifiedAt is the allocation's ModifyTime: when the servers last
	// changed it, by their clock. The stop that marks it lost sets it
	// (normalizeStoppedAlloc), so it is never earlier than the loss.
	ModifiedAt time.Time
	// WasUnknown: an AllocStates entry records the client status
	// "unknown" (the node disconnected under max_client_disconnect).
	WasUnknown bool
	// StopAfterClientDisconnect is the group's, 0 when unset.
	StopAfterClientDisconnect time.Duration
	// MaxClientDisconnect: the group sets max_client_disconnect (any
	// value: Nomad tests the pointer, SupportsDisconnectedClients,
	// structs.go lines 10828-10840).
	MaxClientDisconnect bool
	// KillTimeout is the longest kill_timeout of the group's tasks.
	KillTimeout time.Duration
	// ShutdownDelay is the group's shutdown_delay plus the longest of its
	// tasks' own.
	ShutdownDelay time.Duration
}

// AllocLostDescription is the desired description Nomad's scheduler gives
// an allocation it stops as lost with its node (scheduler/generic_sched.go
// allocLost, v1.6.2, through v1.11); the client's later updates keep it
// (nomad/state: a client's update copies its own status only).
const AllocLostDescription = "alloc is lost since its node is down"

// LostByServers reports whether an allocation's desired description says
// the servers stopped it as lost with its node (AllocLostDescription).
func LostByServers(desiredDescription string) bool {
	return desiredDescription == AllocLostDescription
}

// lossAnswer is the part of structs.Allocation's JSON that AllocLoss
// reads: field names as Go's, times in RFC 3339, durations in
// nanoseconds.
type lossAnswer struct {
	ID, ClientStatus, TaskGroup string
	Namespace, JobID, Name      string
	DesiredDescription          string
	CreateIndex                 uint64
	ModifyTime                  int64 // nanoseconds since the epoch
	AllocStates                 []struct {
		Field uint8
		Value string
		Time  time.Time
	}
	Job *struct {
		TaskGroups []struct {
			Name                      string
			StopAfterClientDisconnect *time.Duration
			MaxClientDisconnect       *time.Duration
			ShutdownDelay             *time.Duration
			Tasks                     []struct {
				KillTimeout   time.Duration
				ShutdownDelay time.Duration
			}
		}
	}
}

// errNoGroup: the answer carries no job, or no group of the allocation's
// name in it: nothing to decide a takeover from.
var errNoGroup = errors.New("the answer carries no job group of the allocation's")

// AllocationLoss is GET /v1/allocation/<id> read as AllocLoss; its errors
// are Allocation's.
func (c *Client) AllocationLoss(ctx context.Context, allocID string) (AllocLoss, error) {
	var raw lossAnswer
	err := c.do(ctx, KindAllocation, requestTimeout, func(q *api.QueryOptions) error {
		_, err := c.api.Raw().Query("/v1/allocation/"+allocID, &raw, q)
		return err
	})
	if err != nil {
		return AllocLoss{}, allocationErr(allocID, err)
	}
	loss, err := raw.loss()
	if err != nil {
		return AllocLoss{}, fmt.Errorf("reading allocation %s: %w", allocID, err)
	}
	return loss, nil
}

// DecodeLoss reads an allocation as GET /v1/allocation/<id> answers it
// (structs.Allocation in the agent's JSON, its job included) as AllocLoss:
// AllocationLoss's reading, for a caller that holds the servers' answer
// itself (the simulation's servers).
func DecodeLoss(body []byte) (AllocLoss, error) {
	var raw lossAnswer
	if err := json.Unmarshal(body, &raw); err != nil {
		return AllocLoss{}, fmt.Errorf("decoding an allocation: %w", err)
	}
	return raw.loss()
}

// loss maps the answer.
func (a *lossAnswer) loss() (AllocLoss, error) {
	out := AllocLoss{ID: a.ID, ClientStatus: a.ClientStatus, Namespace: a.Namespace, JobID: a.JobID, TaskGroup: a.TaskGroup, Name: a.Name,
		LostByServers: LostByServers(a.DesiredDescription), CreateIndex: a.CreateIndex}
	if a.ModifyTime > 0 {
		out.ModifiedAt = time.Unix(0, a.ModifyTime).UTC()
	}
	for _, s := range a.AllocStates {
		if s.Field != 0 {
			continue
		}
		switch s.Value {
		case api.AllocClientStatusLost:
			if out.LostAt.IsZero() {
				out.LostAt = s.Time
			}
		case api.AllocClientStatusUnknown:
			out.WasUnknown = true
		}
	}
	if a.Job == nil {
		return AllocLoss{}, errNoGroup
	}
	for _, tg := range a.Job.TaskGroups {
		if tg.Name != a.TaskGroup {
			continue
		}
		if tg.StopAfterClientDisconnect != nil {
			out.StopAfterClientDisconnect = *tg.StopAfterClientDisconnect
		}
		out.MaxClientDisconnect = tg.MaxClientDisconnect != nil
		var taskDelay time.Duration
		for _, t := range tg.Tasks {
			out.KillTimeout = max(out.KillTimeout, t.KillTimeout)
			taskDelay = max(taskDelay, t.ShutdownDelay)
		}
		out.ShutdownDelay = taskDelay
		if tg.ShutdownDelay != nil {
			out.ShutdownDelay += *tg.ShutdownDelay
		}
		return out, nil
	}
	return AllocLoss{}, fmt.Errorf("%w (%q)", errNoGroup, a.TaskGroup)
}
