package nomadapi

import (
	"bytes"
	"encoding/json"
	"testing"

	"github.com/hashicorp/nomad/nomad/mock"
	"github.com/hashicorp/nomad/nomad/structs"
)

// BenchmarkDecodeNodeAllocs: one answer of GET /v1/node/<id>/allocations,
// 200 allocations as Nomad encodes them (nomad/mock's, each with its whole
// job and four task events), decoded the way the api package would
// (encoding/json into nodeAlloc) and the way NodeAllocations does. Run with
//
//	go test -run '^$' -bench DecodeNodeAllocs -benchmem ./internal/nomadapi
func BenchmarkDecodeNodeAllocs(b *testing.B) {
	const n = 200
	allocs := make([]*structs.Allocation, 0, n)
	for range n {
		a := mock.Alloc()
		a.TaskStates = map[string]*structs.TaskState{"web": {State: "dead", Events: []*structs.TaskEvent{
			{Type: "Received"}, {Type: "Task Setup"}, {Type: "Started"}, {Type: "Terminated"}}}}
		allocs = append(allocs, a)
	}
	body, err := json.Marshal(allocs)
	if err != nil {
		b.Fatal(err)
	}
	b.Logf("%d allocations, %d bytes", n, len(body))
	for _, d := range []struct {
		name   string
		decode func([]byte) ([]*nodeAlloc, error)
	}{
		{"encoding/json", func(body []byte) ([]*nodeAlloc, error) {
			var out []*nodeAlloc
			err := json.NewDecoder(bytes.NewReader(body)).Decode(&out)
			return out, err
		}},
		{"decodeNodeAllocs", func(body []byte) ([]*nodeAlloc, error) { return decodeNodeAllocs(bytes.NewReader(body)) }},
	} {
		b.Run(d.name, func(b *testing.B) {
			b.SetBytes(int64(len(body)))
			for b.Loop() {
				out, err := d.decode(body)
				if err != nil || len(out) != n {
					b.Fatalf("%d allocations, %v", len(out), err)
				}
			}
		})
	}
}
