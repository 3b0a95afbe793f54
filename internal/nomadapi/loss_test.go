package nomadapi

import (
	"bytes"
	"context"
	"errors"
	"net/http"
	"testing"
	"time"

	"github.com/hashicorp/go-msgpack/codec"
	"github.com/hashicorp/nomad/nomad/structs"
)

// TestAllocationLoss reads allocations as a Nomad 1.6.2 agent answers
// them: Nomad's own structs.Allocation, encoded by the agent's own JSON
// handle (command/agent/http.go line 767).
func TestAllocationLoss(t *testing.T) {
	t.Parallel()
	lostAt := time.Date(2026, 11, 28, 4, 0, 0, 123456789, time.UTC)
	dur := func(d time.Duration) *time.Duration { return &d }
	// job has group "g" with two tasks; edit sets the group's settings.
	job := func(edit func(*structs.TaskGroup)) *structs.Job {
		tg := &structs.TaskGroup{Name: "g", Tasks: []*structs.Task{
			{Name: "db", KillTimeout: 20 * time.Second, ShutdownDelay: 3 * time.Second},
			{Name: "sidecar", KillTimeout: 5 * time.Second},
		}}
		if edit != nil {
			edit(tg)
		}
		return &structs.Job{ID: "pg", Name: "pg", Type: "service", TaskGroups: []*structs.TaskGroup{
			{Name: "other", StopAfterClientDisconnect: dur(time.Hour)}, tg}}
	}
	state := func(v string, at time.Time) *structs.AllocState {
		return &structs.AllocState{Field: structs.AllocStateFieldClientStatus, Value: v, Time: at}
	}
	tests := []struct {
		name  string
		alloc *structs.Allocation
		want  AllocLoss
		err   error
	}{
		{name: "lost, the group stopping its allocations after 1m",
			alloc: &structs.Allocation{ID: id(1), Namespace: "default", JobID: "pg", Name: "pg.g[0]", TaskGroup: "g", ClientStatus: "lost",
				AllocStates: []*structs.AllocState{state("lost", lostAt), state("lost", lostAt.Add(time.Minute))},
				Job: job(func(tg *structs.TaskGroup) {
					tg.StopAfterClientDisconnect, tg.ShutdownDelay = dur(time.Minute), dur(2*time.Second)
				})},
			want: AllocLoss{ID: id(1), ClientStatus: "lost", Namespace: "default", JobID: "pg", TaskGroup: "g", Name: "pg.g[0]", LostAt: lostAt, StopAfterClientDisconnect: time.Minute,
				KillTimeout: 20 * time.Second, ShutdownDelay: 5 * time.Second}},
		// Nomad 1.6.2 stores the stop that marks an allocation lost with
		// its node down as a normalized diff: no AllocStates, its
		// ModifyTime (plan_apply.go normalizeStoppedAlloc).
		{name: "lost with its node down, as Nomad 1.6.2 stores it",
			alloc: &structs.Allocation{ID: id(7), TaskGroup: "g", ClientStatus: "lost", ModifyTime: lostAt.UnixNano(),
				Job: job(func(tg *structs.TaskGroup) { tg.StopAfterClientDisconnect = dur(time.Minute) })},
			want: AllocLoss{ID: id(7), ClientStatus: "lost", TaskGroup: "g", ModifiedAt: lostAt, StopAfterClientDisconnect: time.Minute,
				KillTimeout: 20 * time.Second, ShutdownDelay: 3 * time.Second}},
		// Its node back, its client stopped it and reported it complete;
		// the servers keep their desired description (allocLost).
		{name: "stopped as lost by the servers, then reported complete by its node back",
			alloc: &structs.Allocation{ID: id(8), Namespace: "default", JobID: "pg", Name: "pg.g[0]", TaskGroup: "g", ClientStatus: "complete",
				DesiredStatus: "stop", DesiredDescription: "alloc is lost since its node is down", ModifyTime: lostAt.UnixNano(), CreateIndex: 41,
				Job: job(func(tg *structs.TaskGroup) { tg.StopAfterClientDisconnect = dur(time.Minute) })},
			want: AllocLoss{ID: id(8), ClientStatus: "complete", LostByServers: true, CreateIndex: 41, Namespace: "default", JobID: "pg", TaskGroup: "g",
				Name: "pg.g[0]", ModifiedAt: lostAt, StopAfterClientDisconnect: time.Minute, KillTimeout: 20 * time.Second,
				ShutdownDelay: 3 * time.Second}},
		{name: "stopped by a job update: not lost",
			alloc: &structs.Allocation{ID: id(9), TaskGroup: "g", ClientStatus: "complete", DesiredStatus: "stop",
				DesiredDescription: "alloc not needed due to job update", Job: job(nil)},
			want: AllocLoss{ID: id(9), ClientStatus: "complete", TaskGroup: "g", KillTimeout: 20 * time.Second, ShutdownDelay: 3 * time.Second}},
		{name: "unknown then lost, under max_client_disconnect",
			alloc: &structs.Allocation{ID: id(2), TaskGroup: "g", ClientStatus: "lost",
				AllocStates: []*structs.AllocState{state("unknown", lostAt.Add(-time.Hour)), state("lost", lostAt)},
				Job:         job(func(tg *structs.TaskGroup) { tg.MaxClientDisconnect = dur(time.Hour) })},
			want: AllocLoss{ID: id(2), ClientStatus: "lost", TaskGroup: "g", LostAt: lostAt, WasUnknown: true, MaxClientDisconnect: true,
				KillTimeout: 20 * time.Second, ShutdownDelay: 3 * time.Second}},
		{name: "max_client_disconnect = 0 is set",
			alloc: &structs.Allocation{ID: id(3), TaskGroup: "g", ClientStatus: "running",
				Job: job(func(tg *structs.TaskGroup) { tg.MaxClientDisconnect = dur(0) })},
			want: AllocLoss{ID: id(3), ClientStatus: "running", TaskGroup: "g", MaxClientDisconnect: true, KillTimeout: 20 * time.Second,
				ShutdownDelay: 3 * time.Second}},
		{name: "running, never lost",
			alloc: &structs.Allocation{ID: id(4), TaskGroup: "g", ClientStatus: "running", Job: job(nil)},
			want:  AllocLoss{ID: id(4), ClientStatus: "running", TaskGroup: "g", KillTimeout: 20 * time.Second, ShutdownDelay: 3 * time.Second}},
		{name: "no job in the answer", alloc: &structs.Allocation{ID: id(5), TaskGroup: "g", ClientStatus: "lost"}, err: errNoGroup},
		{name: "no such group in the job", alloc: &structs.Allocation{ID: id(6), TaskGroup: "gone", ClientStatus: "lost", Job: job(nil)},
			err: errNoGroup},
	}
	allocs := map[string]*structs.Allocation{}
	for _, tc := range tests {
		allocs[tc.alloc.ID] = tc.alloc
	}
	mux := http.NewServeMux()
	mux.HandleFunc("GET /v1/allocation/{id}", func(w http.ResponseWriter, r *http.Request) {
		a, ok := allocs[r.PathValue("id")]
		if !ok {
			http.Error(w, "alloc not found", http.StatusNotFound)
			return
		}
		var buf bytes.Buffer
		if err := codec.NewEncoder(&buf, structs.JsonHandleWithExtensions).Encode(a); err != nil {
			t.Error(err)
		}
		_, _ = w.Write(buf.Bytes())
	})
	c, err := New(Config{Address: serve(t, mux, false)}, nil)
	if err != nil {
		t.Fatal(err)
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			got, err := c.AllocationLoss(context.Background(), tc.alloc.ID)
			var buf bytes.Buffer
			if err := codec.NewEncoder(&buf, structs.JsonHandleWithExtensions).Encode(tc.alloc); err != nil {
				t.Fatal(err)
			}
			decoded, derr := DecodeLoss(buf.Bytes())
			if tc.err != nil {
				if !errors.Is(err, tc.err) || !errors.Is(derr, tc.err) {
					t.Fatalf("err %v (DecodeLoss %v), want %v", err, derr, tc.err)
				}
				return
			}
			if derr != nil || decoded != got {
				t.Errorf("DecodeLoss = %+v, %v; AllocationLoss read %+v", decoded, derr, got)
			}
			if err != nil {
				t.Fatal(err)
			}
			if !got.LostAt.Equal(tc.want.LostAt) {
				t.Errorf("LostAt %s, want %s", got.LostAt, tc.want.LostAt)
			}
			if !got.ModifiedAt.Equal(tc.want.ModifiedAt) {
				t.Errorf("ModifiedAt %s, want %s", got.ModifiedAt, tc.want.ModifiedAt)
			}
			got.LostAt, tc.want.LostAt = time.Time{}, time.Time{}
			got.ModifiedAt, tc.want.ModifiedAt = time.Time{}, time.Time{}
			if got != tc.want {
				t.Errorf("got  %+v\nwant %+v", got, tc.want)
			}
		})
	}
	t.Run("an allocation the servers do not know", func(t *testing.T) {
		if _, err := c.AllocationLoss(context.Background(), id(99)); !errors.Is(err, ErrAllocNotFound) {
			t.Errorf("err %v, want ErrAllocNotFound", err)
		}
	})
}
