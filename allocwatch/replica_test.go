package allocwatch

import (
	"reflect"
	"testing"
	"time"

	"github.com/hashicorp/nomad/api"

	"github.com/nomad-device-zfs/nomad-device-zfs/internal/nomadapi"
	"github.com/nomad-device-zfs/nomad-device-zfs/internal/nomadfake"
	"github.com/nomad-device-zfs/nomad-device-zfs/model"
	"github.com/nomad-device-zfs/nomad-device-zfs/transfer"
)

func TestReplicaNodesConversion(t *testing.T) {
	if transferPortAttr != transfer.AttrPort {
		t.Fatalf("transferPortAttr %q, the transport publishes %q", transferPortAttr, transfer.AttrPort)
	}
	pg := nomadapi.DeviceGroup{Vendor: "zfs", Type: "dataset", Name: "pg", Attributes: []string{"quota", "transfer_port"}}
	nodes := []nomadapi.NodeStub{
		{ID: "n1", Datacenter: "dc1", NodeClass: "db", NodePool: "p1", Status: "ready", SchedulingEligibility: "eligible",
			Devices: []nomadapi.DeviceGroup{pg}},
		{ID: "n2", Datacenter: "dc2", Status: "ready", SchedulingEligibility: "ineligible", Devices: []nomadapi.DeviceGroup{pg}},
		{ID: "n3", Datacenter: "dc3", Status: "down", SchedulingEligibility: "eligible", Devices: []nomadapi.DeviceGroup{pg}},
		{ID: "n4", Datacenter: "dc4", Status: "ready", SchedulingEligibility: "eligible",
			Devices: []nomadapi.DeviceGroup{{Vendor: "zfs", Type: "dataset", Name: "pg", Attributes: []string{"quota"}}}},
		{ID: "n5", Datacenter: "dc5", Status: "ready", SchedulingEligibility: "eligible",
			Devices: []nomadapi.DeviceGroup{{Vendor: "zfs", Type: "dataset", Name: "scratch", Attributes: []string{"transfer_port"}}}},
		{ID: "n6", Datacenter: "dc6", Status: "ready", SchedulingEligibility: "eligible",
			Devices: []nomadapi.DeviceGroup{{Vendor: "nvidia", Type: "gpu", Name: "pg", Attributes: []string{"transfer_port"}}}},
	}
	tests := []struct {
		name, spread string
		want         []model.ReplicaNode
	}{
		{name: "by datacenter", spread: "node.datacenter", want: []model.ReplicaNode{
			{ID: "n1", Ready: true, Offers: true, Spread: "dc1"}, {ID: "n2", Offers: true, Spread: "dc2"},
			{ID: "n3", Offers: true, Spread: "dc3"}, {ID: "n4", Ready: true, Spread: "dc4"},
			{ID: "n5", Ready: true, Spread: "dc5"}, {ID: "n6", Ready: true, Spread: "dc6"}}},
		{name: "by class, unset on most", spread: "node.class", want: []model.ReplicaNode{
			{ID: "n1", Ready: true, Offers: true, Spread: "db"}, {ID: "n2", Offers: true}, {ID: "n3", Offers: true},
			{ID: "n4", Ready: true}, {ID: "n5", Ready: true}, {ID: "n6", Ready: true}}},
		{name: "no spread", want: []model.ReplicaNode{
			{ID: "n1", Ready: true, Offers: true}, {ID: "n2", Offers: true}, {ID: "n3", Offers: true},
			{ID: "n4", Ready: true}, {ID: "n5", Ready: true}, {ID: "n6", Ready: true}}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			if got := ReplicaNodes(nodes, "pg", tc.spread); !reflect.DeepEqual(got, tc.want) {
				t.Errorf("got  %+v\nwant %+v", got, tc.want)
			}
		})
	}
	if got := model.ReplicaNodes("a", "n3", 2, ReplicaNodes(nodes, "pg", "")); !reflect.DeepEqual(got, []string{"n1"}) {
		t.Errorf("the only node to keep a copy is n1, got %v", got)
	}
}

func TestLostAllocConversion(t *testing.T) {
	at := time.Date(2026, 11, 28, 4, 0, 0, 0, time.UTC)
	l := nomadapi.AllocLoss{ID: "a", ClientStatus: "lost", LostByServers: true, CreateIndex: 7, LostAt: at, WasUnknown: true, StopAfterClientDisconnect: time.Minute,
		MaxClientDisconnect: true, KillTimeout: 20 * time.Second, ShutdownDelay: 5 * time.Second}
	want := model.LostAlloc{ID: "a", ClientStatus: "lost", LostByServers: true, CreateIndex: 7, LostAt: at, WasUnknown: true, StopAfter: time.Minute,
		MaxClientDisconnect: true, KillTimeout: 20 * time.Second, ShutdownDelay: 5 * time.Second}
	if got := LostAlloc(l); got != want {
		t.Errorf("got %+v, want %+v", got, want)
	}
}

// TestHTTPClusterView: a replica node's view of the cluster through the
// watcher (hooks.Cluster): the node list, and a node's allocations
// converted as the node's own are, without blocking; a node ID that is
// not one is refused before a request.
func TestHTTPClusterView(t *testing.T) {
	f := nomadfake.New(t, id(9))
	f.Upsert(apiAlloc(1, "running", withDevice("db", "zfs", "dataset", "pg", "pg-1")))
	w := overHTTP(t, f, Config{NodeID: id(9)}, nil)
	ctx := t.Context()
	nodes, err := w.Nodes(ctx)
	if err != nil || len(nodes) != 1 || nodes[0].ID != id(9) || nodes[0].Status != "ready" {
		t.Fatalf("Nodes = %+v, %v", nodes, err)
	}
	start := time.Now()
	as, err := w.NodeAllocations(ctx, id(9))
	if err != nil || len(as) != 1 || as[0].ID != id(1) || !as[0].HoldsDevice("zfs", "dataset", "pg-1") || as[0].ClientStatus != "running" {
		t.Fatalf("NodeAllocations = %+v, %v", as, err)
	}
	if d := time.Since(start); d > 2*time.Second {
		t.Errorf("NodeAllocations took %v: it blocked", d)
	}
	if _, err := w.NodeAllocations(ctx, "node-1"); err == nil {
		t.Error("a node ID that is not a UUID was asked for")
	}
}

// TestHTTPLoss: what B's Reserve reads of its predecessor's loss through
// the watcher (hooks.Cluster.Loss): the servers' answer converted; an ID
// that is not one refused before a request; an allocation the servers do
// not know is an error, never a loss.
func TestHTTPLoss(t *testing.T) {
	f := nomadfake.New(t, id(9))
	a := apiAlloc(1, "lost", withDevice("db", "zfs", "dataset", "pg", "pg-1"))
	a.Job.TaskGroups = []*api.TaskGroup{{Name: new("g"), StopAfterClientDisconnect: new(time.Minute),
		Tasks: []*api.Task{{Name: "db", KillTimeout: new(20 * time.Second)}}}}
	a.Name = "web.g[0]"
	a.DesiredStatus, a.DesiredDescription = "stop", "alloc is lost since its node is down"
	f.Upsert(a)
	w := overHTTP(t, f, Config{NodeID: id(9)}, nil)
	ctx := t.Context()
	want := model.LostAlloc{ID: id(1), Namespace: "default", JobID: "web", TaskGroup: "g", Name: "web.g[0]", ClientStatus: "lost",
		LostByServers: true, StopAfter: time.Minute, KillTimeout: 20 * time.Second}
	l, err := w.Loss(ctx, id(1))
	if err == nil && l.CreateIndex == 0 {
		t.Errorf("Loss = %+v: no create index", l)
	}
	if l.CreateIndex = 0; err != nil || l != want {
		t.Errorf("Loss = %+v, %v; want %+v", l, err, want)
	}
	if _, err := w.Loss(ctx, id(2)); err == nil {
		t.Error("an allocation the servers do not know read as a loss")
	}
	if _, err := w.Loss(ctx, "a"); err == nil {
		t.Error("an allocation ID that is not a UUID was asked for")
	}
}
