package nomadtest

import (
	"testing"

	"github.com/hashicorp/nomad/api"
)

func TestAllocsWithStatusSkipsExecutorStartFailures(t *testing.T) {
	executorFailed := &api.AllocationListStub{ID: "a", ClientStatus: "failed", NextAllocation: "b",
		TaskStates: map[string]*api.TaskState{"t": {Events: []*api.TaskEvent{{Type: "Driver Failure",
			DisplayMessage: "failed to create executor: error creating rpc client for executor plugin: timeout while waiting for plugin to start"}}}}}
	pluginFailed := &api.AllocationListStub{ID: "a", ClientStatus: "failed", NextAllocation: "b",
		TaskStates: map[string]*api.TaskState{"t": {Events: []*api.TaskEvent{{Type: "Setup Failure", DisplayMessage: "failed to reserve device"}}}}}
	running := &api.AllocationListStub{ID: "b", ClientStatus: "running"}
	cases := []struct {
		name   string
		allocs []*api.AllocationListStub
		want   bool
	}{
		{"one running", []*api.AllocationListStub{running}, true},
		{"replaced after the executor did not start", []*api.AllocationListStub{executorFailed, running}, true},
		{"replaced after the plugin failed it: counted", []*api.AllocationListStub{pluginFailed, running}, false},
		{"none", nil, false},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			if got := AllocsWithStatus(1, "running")(tc.allocs); got != tc.want {
				t.Errorf("got %v, want %v", got, tc.want)
			}
			// Counted is what the predicate counted: when it held, the
			// one allocation is the first.
			if c := Counted(tc.allocs); tc.want && (len(c) != 1 || c[0] != running) {
				t.Errorf("Counted = %v, want just the running one", c)
			}
		})
	}
}
