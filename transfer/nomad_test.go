package transfer_test

import (
	"context"
	"errors"
	"fmt"
	"net/netip"
	"slices"
	"testing"
	"time"

	"github.com/hashicorp/nomad/api"

	"github.com/nomad-device-zfs/nomad-device-zfs/internal/nomadapi"
	"github.com/nomad-device-zfs/nomad-device-zfs/internal/nomadtest"
	"github.com/nomad-device-zfs/nomad-device-zfs/transfer"
)

// serviceJob is a raw_exec service that sleeps; a new version replaces its
// allocation (a destructive update), as Nomad replaces one on another node.
func serviceJob(version int) string {
	return fmt.Sprintf(`
job "pg" {
  group "db" {
    task "t" {
      driver = "raw_exec"
      config {
        command = "/bin/sleep"
        args    = ["3600"]
      }
      env { VERSION = "%d" }
      kill_timeout = "1s"
    }
  }
}
`, version)
}

// TestAPINomad runs the lookups and the rules over them against a real
// agent, with a token of the least privilege docs/security.md documents
// (node:read, read-job): a destructive update gives the replacement B of
// A, as Nomad records it.
func TestAPINomad(t *testing.T) {
	if testing.Short() {
		t.Skip("starts a real Nomad agent; skipped with -short")
	}
	t.Parallel()
	a := nomadtest.Start(t, nomadtest.Config{Binary: nomadtest.Binary(t), ACL: true})
	token := a.CreateToken(t, "transfer", `node { policy = "read" }
namespace "default" { capabilities = ["read-job"] }`)
	noJob := a.CreateToken(t, "nodes-only", `node { policy = "read" }`)
	noNode := a.CreateToken(t, "jobs-only", `namespace "default" { capabilities = ["read-job"] }`)

	a.RunJob(t, serviceJob(1))
	first := a.WaitAllocs(t, "pg", nomadtest.AllocsWithStatus(1, api.AllocClientStatusRunning), 90*time.Second)
	allocA := first[0].ID
	a.RunJob(t, serviceJob(2))
	var allocB string
	deadline := time.Now().Add(90 * time.Second)
	for allocB == "" {
		for _, s := range a.WaitAllocs(t, "pg", func(l []*api.AllocationListStub) bool { return len(l) == 2 }, 90*time.Second) {
			if s.ID != allocA {
				allocB = s.ID
			}
		}
		if time.Now().After(deadline) {
			t.Fatal("no replacement")
		}
	}

	n, err := transfer.NewAPINomad(nomadapi.Config{Address: a.Address(), Token: token})
	if err != nil {
		t.Fatal(err)
	}
	ctx := t.Context()
	b, err := n.Allocation(ctx, allocB)
	if err != nil {
		t.Fatal(err)
	}
	if b.PreviousAllocation != allocA || b.NodeID != a.NodeID() || b.JobID != "pg" || b.TaskGroup != "db" || b.Namespace != "default" {
		t.Fatalf("replacement %+v, want the previous allocation %s on node %s", b, allocA, a.NodeID())
	}
	node, err := n.Node(ctx, a.NodeID())
	if err != nil {
		t.Fatal(err)
	}
	if !slices.Contains(node.Addresses, netip.MustParseAddr("127.0.0.1")) || node.TransferPort != 0 {
		t.Fatalf("node %+v: want 127.0.0.1 among its addresses and no transfer port (no plugin publishes one)", node)
	}

	// The rule over the real answers: this node's own replacement, asked
	// from its address, is allowed; from another address, refused.
	auth := &transfer.NomadAuthorizer{Nomad: n, Self: func(context.Context) (string, error) { return a.NodeID(), nil }}
	req := transfer.Request{Alloc: allocA, Replacement: allocB, Slot: "data-1"}
	if err := auth.Authorize(ctx, req, transfer.Peer{Addr: netip.MustParseAddr("127.0.0.1")}); err != nil {
		t.Fatalf("the replacement's node was refused: %v", err)
	}
	if err := auth.Authorize(ctx, req, transfer.Peer{Addr: netip.MustParseAddr("127.0.0.3")}); !errors.Is(err, transfer.ErrRefused) {
		t.Fatalf("another address: %v, want ErrRefused", err)
	}
	swapped := transfer.Request{Alloc: allocB, Replacement: allocA, Slot: "data-1"}
	if err := auth.Authorize(ctx, swapped, transfer.Peer{Addr: netip.MustParseAddr("127.0.0.1")}); !errors.Is(err, transfer.ErrRefused) {
		t.Fatalf("A as B's replacement: %v, want ErrRefused", err)
	}

	t.Run("unknown", func(t *testing.T) {
		if _, err := n.Allocation(ctx, "00000000-0000-0000-0000-000000000000"); !errors.Is(err, transfer.ErrUnknown) {
			t.Errorf("unknown allocation: %v", err)
		}
		if _, err := n.Node(ctx, "00000000-0000-0000-0000-000000000000"); !errors.Is(err, transfer.ErrUnknown) {
			t.Errorf("unknown node: %v", err)
		}
	})
	t.Run("without read-job the allocation is not unknown", func(t *testing.T) {
		n, err := transfer.NewAPINomad(nomadapi.Config{Address: a.Address(), Token: noJob})
		if err != nil {
			t.Fatal(err)
		}
		if _, err := n.Allocation(ctx, allocB); err == nil || errors.Is(err, transfer.ErrUnknown) {
			t.Fatalf("got %v: a missing permission must not read as an unknown allocation", err)
		}
	})
	t.Run("without node:read", func(t *testing.T) {
		n, err := transfer.NewAPINomad(nomadapi.Config{Address: a.Address(), Token: noNode})
		if err != nil {
			t.Fatal(err)
		}
		if _, err := n.Node(ctx, a.NodeID()); err == nil || errors.Is(err, transfer.ErrUnknown) {
			t.Fatalf("got %v: a missing permission must not read as an unknown node", err)
		}
	})
}
