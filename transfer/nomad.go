package transfer

import (
	"context"
	"errors"
	"fmt"
	"net"
	"net/http"
	"net/netip"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/hashicorp/nomad/api"

	"github.com/nomad-device-zfs/nomad-device-zfs/allocwatch"
)

// Nomad is what a transfer asks of the Nomad API: the sender to decide
// whether a request is allowed, the receiver to find the sender. Both ask
// their own local agent. APINomad answers with nomad/api; tests use fakes.
type Nomad interface {
	// Allocation is GET /v1/allocation/<id>. An allocation Nomad does not
	// know (never, or garbage-collected) is ErrUnknown.
	Allocation(ctx context.Context, id string) (Alloc, error)
	// Node is GET /v1/node/<id>; ErrUnknown if Nomad has no such node.
	Node(ctx context.Context, id string) (Node, error)
}

// ErrUnknown: Nomad does not know the allocation or node.
var ErrUnknown = errors.New("not known to Nomad")

// Alloc is what a transfer reads of an allocation.
type Alloc struct {
	ID, NodeID, Namespace, JobID, TaskGroup string
	// PreviousAllocation is the allocation this one replaces: the one
	// whose data it may have.
	PreviousAllocation string
	DesiredStatus      string // api.AllocDesiredStatusRun, ...
	ClientStatus       string // api.AllocClientStatusPending, ...
}

// Node is what a transfer reads of a node.
type Node struct {
	ID, Name, Status string
	// Addresses are every address Nomad lists for the node: its HTTP
	// advertise address, unique.network.ip-address, and its networks' IPs.
	Addresses []netip.Addr
	// TransferAddr and TransferPort are what the node's plugin publishes
	// (device-group attributes AttrAddress, AttrPort); TransferAddr is
	// invalid when the plugin listens on every address.
	TransferAddr netip.Addr
	TransferPort int
}

// The device-group attributes a plugin publishes its transport under, on
// its zfs/dataset groups (DeviceVendor, DeviceType): read by peers through
// the Nomad API, which needs no more than node:read.
const (
	AttrPort    = "transfer_port"
	AttrAddress = "transfer_address"
	// DeviceVendor and DeviceType are the plugin's device groups'
	// (model.Vendor, model.DeviceType).
	DeviceVendor = "zfs"
	DeviceType   = "dataset"
)

// APINomad answers through a Nomad agent's HTTP API with the token and TLS
// of the allocation watcher's configuration. A token file is re-read when
// the API answers 401 or 403, as the watcher does.
type APINomad struct {
	cfg    allocwatch.Config
	mu     sync.Mutex
	client *api.Client
	token  string
}

var _ Nomad = (*APINomad)(nil)

// requestTimeout bounds one lookup.
const requestTimeout = 30 * time.Second

// NewAPINomad makes a client from the watcher's configuration (the
// plugin's `nomad` block, over the NOMAD_* environment).
func NewAPINomad(cfg allocwatch.Config) (*APINomad, error) {
	ac, err := cfg.APIConfig()
	if err != nil {
		return nil, err
	}
	c, err := api.NewClient(ac)
	if err != nil {
		return nil, fmt.Errorf("nomad client for %s: %w", ac.Address, err)
	}
	return &APINomad{cfg: cfg, client: c, token: ac.SecretID}, nil
}

// Allocation implements Nomad.
func (n *APINomad) Allocation(ctx context.Context, id string) (Alloc, error) {
	if !isUUID(id) {
		return Alloc{}, fmt.Errorf("allocation ID %q is not a UUID", id)
	}
	var a *api.Allocation
	err := n.do(ctx, func(q *api.QueryOptions) (err error) {
		a, _, err = n.client.Allocations().Info(id, q)
		return err
	})
	switch status, body := httpStatus(err); {
	case err == nil:
	case status == http.StatusNotFound:
		return Alloc{}, fmt.Errorf("allocation %s: %w", id, ErrUnknown)
	case status == http.StatusInternalServerError && strings.HasPrefix(body, "Unknown allocation"):
		// Nomad's answer for an allocation in a namespace the token
		// cannot read-job (allocwatch/doc.go).
		return Alloc{}, fmt.Errorf("allocation %s: the token cannot read-job in its namespace: %w", id, err)
	default:
		return Alloc{}, fmt.Errorf("allocation %s: %w", id, err)
	}
	return Alloc{ID: a.ID, NodeID: a.NodeID, Namespace: a.Namespace, JobID: a.JobID, TaskGroup: a.TaskGroup,
		PreviousAllocation: a.PreviousAllocation, DesiredStatus: a.DesiredStatus, ClientStatus: a.ClientStatus}, nil
}

// Node implements Nomad.
func (n *APINomad) Node(ctx context.Context, id string) (Node, error) {
	if !isUUID(id) {
		return Node{}, fmt.Errorf("node ID %q is not a UUID", id)
	}
	var node *api.Node
	err := n.do(ctx, func(q *api.QueryOptions) (err error) {
		node, _, err = n.client.Nodes().Info(id, q)
		return err
	})
	if status, _ := httpStatus(err); status == http.StatusNotFound {
		return Node{}, fmt.Errorf("node %s: %w", id, ErrUnknown)
	}
	if err != nil {
		return Node{}, fmt.Errorf("node %s: %w", id, err)
	}
	return convertNode(node), nil
}

// convertNode reads a node's addresses and its plugin's published
// transport.
func convertNode(node *api.Node) Node {
	out := Node{ID: node.ID, Name: node.Name, Status: node.Status}
	add := func(s string) {
		if a, err := netip.ParseAddr(s); err == nil && !a.IsUnspecified() {
			a = a.Unmap()
			for _, have := range out.Addresses {
				if have == a {
					return
				}
			}
			out.Addresses = append(out.Addresses, a)
		}
	}
	if host, _, err := net.SplitHostPort(node.HTTPAddr); err == nil {
		add(host)
	}
	add(node.Attributes["unique.network.ip-address"])
	if r := node.NodeResources; r != nil {
		for _, nw := range r.Networks {
			if nw != nil {
				add(nw.IP)
			}
		}
		for _, d := range r.Devices {
			if d == nil || d.Vendor != DeviceVendor || d.Type != DeviceType {
				continue
			}
			if p := d.Attributes[AttrPort]; p != nil && p.IntVal != nil && out.TransferPort == 0 {
				out.TransferPort = int(*p.IntVal)
			}
			if a := d.Attributes[AttrAddress]; a != nil && a.StringVal != nil && !out.TransferAddr.IsValid() {
				if ip, err := netip.ParseAddr(*a.StringVal); err == nil {
					out.TransferAddr = ip.Unmap()
				}
			}
		}
	}
	return out
}

// do runs one request with the current token; on 401 or 403 it re-reads
// the token file and, if the token changed, tries once more.
func (n *APINomad) do(ctx context.Context, call func(q *api.QueryOptions) error) error {
	token := n.currentToken()
	err := n.call(ctx, token, call)
	if status, _ := httpStatus(err); (status != http.StatusUnauthorized && status != http.StatusForbidden) || n.cfg.TokenFile == "" {
		return err
	}
	ac, rerr := n.cfg.APIConfig()
	if rerr != nil || ac.SecretID == token {
		return err
	}
	n.mu.Lock()
	n.token = ac.SecretID
	n.mu.Unlock()
	return n.call(ctx, ac.SecretID, call)
}

func (n *APINomad) call(ctx context.Context, token string, call func(q *api.QueryOptions) error) error {
	ctx, cancel := context.WithTimeout(ctx, requestTimeout)
	defer cancel()
	q := &api.QueryOptions{AuthToken: token}
	return call(q.WithContext(ctx))
}

func (n *APINomad) currentToken() string {
	n.mu.Lock()
	defer n.mu.Unlock()
	return n.token
}

// httpStatus is an API error's status code and body, or 0.
func httpStatus(err error) (int, string) {
	var ure api.UnexpectedResponseError
	if errors.As(err, &ure) {
		return ure.StatusCode(), ure.Body()
	}
	return 0, ""
}

// isUUID: a Nomad ID, "1cc0a14a-c239-313f-9be4-9ee3e8cc0399". Checked
// before an ID goes into a request path or a log line.
func isUUID(s string) bool {
	if len(s) != 36 {
		return false
	}
	for i := 0; i < len(s); i++ {
		c := s[i]
		switch i {
		case 8, 13, 18, 23:
			if c != '-' {
				return false
			}
		default:
			if _, err := strconv.ParseUint(string(c), 16, 8); err != nil {
				return false
			}
		}
	}
	return true
}
