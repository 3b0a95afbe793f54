package allocwatch

import (
	"context"
	"errors"
	"sync"
	"time"

	"github.com/hashicorp/nomad/api"

	"github.com/nomad-device-zfs/nomad-device-zfs/internal/nomadapi"
)

// scriptSource is the fake above the seam: it answers the watcher's
// node allocation queries from a script, one step per query, and records
// what each query asked. When the script runs out it closes done and
// blocks like an idle blocking query until the context ends.
type scriptSource struct {
	clock *fakeClock

	mu         sync.Mutex
	steps      []step
	agentSteps []idStep // answers of AgentSelf, then the last one again
	nodeErrs   []error  // answers of Node, then nil
	queries    []query
	done       chan struct{}
	doneClosed bool
}

var _ source = (*scriptSource)(nil)

// step is one answer to a node allocation query.
type step struct {
	advance time.Duration // the clock moves this much before the answer
	allocs  []*api.Allocation
	index   uint64
	err     error
}

type idStep struct {
	id  string
	err error
}

// query is what one node allocation query asked.
type query struct {
	nodeID    string
	waitIndex uint64
	wait      time.Duration
}

func newScriptSource(clock *fakeClock, steps ...step) *scriptSource {
	return &scriptSource{clock: clock, steps: steps, done: make(chan struct{})}
}

func (s *scriptSource) NodeAllocations(ctx context.Context, nodeID string, waitIndex uint64, wait time.Duration) ([]*api.Allocation, uint64, error) {
	s.mu.Lock()
	s.queries = append(s.queries, query{nodeID, waitIndex, wait})
	if len(s.steps) == 0 {
		if !s.doneClosed {
			close(s.done)
			s.doneClosed = true
		}
		s.mu.Unlock()
		<-ctx.Done()
		return nil, 0, ctx.Err()
	}
	st := s.steps[0]
	s.steps = s.steps[1:]
	s.mu.Unlock()
	s.clock.Advance(st.advance)
	return st.allocs, st.index, st.err
}

func (s *scriptSource) Node(context.Context, string) (*api.Node, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if len(s.nodeErrs) == 0 {
		return &api.Node{}, nil
	}
	err := s.nodeErrs[0]
	s.nodeErrs = s.nodeErrs[1:]
	return nil, err
}

// AgentSelf answers with the next agent step's node ID; without steps, an
// agent that runs no client.
func (s *scriptSource) AgentSelf(context.Context) (*api.AgentSelf, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if len(s.agentSteps) == 0 {
		return &api.AgentSelf{}, nil
	}
	st := s.agentSteps[0]
	if len(s.agentSteps) > 1 {
		s.agentSteps = s.agentSteps[1:]
	}
	if st.err != nil {
		return nil, st.err
	}
	return &api.AgentSelf{Stats: map[string]map[string]string{"client": {"node_id": st.id}}}, nil
}

func (s *scriptSource) Allocation(context.Context, string) (*api.Allocation, error) {
	return nil, nomadapi.ErrAllocNotFound
}

func (s *scriptSource) AllocationStats(context.Context, string) error {
	return nomadapi.ErrUnknownAlloc
}

func (s *scriptSource) AllocationLoss(context.Context, string) (nomadapi.AllocLoss, error) {
	return nomadapi.AllocLoss{}, nomadapi.ErrAllocNotFound
}

func (s *scriptSource) Nodes(context.Context) ([]nomadapi.NodeStub, error) {
	return nil, errors.New("the script lists no nodes")
}

// Requests: a script counts no requests.
func (s *scriptSource) Requests() map[string]uint64 { return map[string]uint64{} }

func (s *scriptSource) recorded() []query {
	s.mu.Lock()
	defer s.mu.Unlock()
	return append([]query(nil), s.queries...)
}
