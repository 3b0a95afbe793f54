package nomadapi

import (
	"bytes"
	"context"
	"net/http"
	"reflect"
	"testing"

	"github.com/hashicorp/go-msgpack/codec"
	"github.com/hashicorp/nomad/nomad/structs"
	psstructs "github.com/hashicorp/nomad/plugins/shared/structs"
)

// TestNodes reads the node list as a Nomad 1.6.2 agent answers
// GET /v1/nodes?resources=true: Nomad's own Node.Stub with the resources
// field selected, through the agent's own JSON handle.
func TestNodes(t *testing.T) {
	t.Parallel()
	withDevice := &structs.Node{ID: id(1), Datacenter: "dc1", NodeClass: "db", NodePool: "default", Status: "ready",
		SchedulingEligibility: "eligible", Attributes: map[string]string{"nomad.version": "1.6.2"},
		NodeResources: &structs.NodeResources{Devices: []*structs.NodeDeviceResource{{
			Vendor: "zfs", Type: "dataset", Name: "pg",
			Attributes: map[string]*psstructs.Attribute{
				"transfer_port": psstructs.NewIntAttribute(4647, ""), "quota": psstructs.NewIntAttribute(1024, psstructs.UnitMiB)},
		}}}}
	bare := &structs.Node{ID: id(2), Datacenter: "dc2", Status: "down", SchedulingEligibility: "ineligible"}
	var gotResources string
	mux := http.NewServeMux()
	mux.HandleFunc("GET /v1/nodes", func(w http.ResponseWriter, r *http.Request) {
		gotResources = r.URL.Query().Get("resources")
		fields := &structs.NodeStubFields{Resources: gotResources == "true"}
		stubs := []*structs.NodeListStub{withDevice.Stub(fields), bare.Stub(fields)}
		var buf bytes.Buffer
		if err := codec.NewEncoder(&buf, structs.JsonHandleWithExtensions).Encode(stubs); err != nil {
			t.Error(err)
		}
		_, _ = w.Write(buf.Bytes())
	})
	c, err := New(Config{Address: serve(t, mux, false)}, nil)
	if err != nil {
		t.Fatal(err)
	}
	got, err := c.Nodes(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	want := []NodeStub{
		{ID: id(1), Datacenter: "dc1", NodeClass: "db", NodePool: "default", Status: "ready", SchedulingEligibility: "eligible",
			Devices: []DeviceGroup{{Vendor: "zfs", Type: "dataset", Name: "pg", Attributes: []string{"quota", "transfer_port"}}}},
		{ID: id(2), Datacenter: "dc2", Status: "down", SchedulingEligibility: "ineligible"},
	}
	if gotResources != "true" {
		t.Errorf("the request asked resources=%q", gotResources)
	}
	if !reflect.DeepEqual(got, want) {
		t.Errorf("got  %+v\nwant %+v", got, want)
	}
}
