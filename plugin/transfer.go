package plugin

import (
	"context"
	"fmt"

	hclog "github.com/hashicorp/go-hclog"
	"github.com/hashicorp/nomad/plugins/device"
	"github.com/hashicorp/nomad/plugins/shared/structs"

	"github.com/nomad-device-zfs/nomad-device-zfs/hooks"
	"github.com/nomad-device-zfs/nomad-device-zfs/transfer"
	"github.com/nomad-device-zfs/nomad-device-zfs/zfs"
)

// transport is the transport between plugins when the transfer block is
// set (package transfer): the client the Manager pulls copies with
// (hooks.Config.Fetcher), made before the Manager, and what the server
// that sends this node's data needs besides the Manager (serve). Its
// errors leave the slots as they are: no copy is sent or received, and a
// class that migrates starts its replacements as its migrate timeout says.
type transport struct {
	settings *Settings
	nomad    *transfer.APINomad
	client   *transfer.Client
	zfs      *zfs.Client
	logger   hclog.Logger
	// observer counts the streams' bytes: the metrics, nil without them.
	observer transfer.Observer
}

// transferFailed is what the plugin logs when the transport cannot start.
const transferFailed = "cannot start the transfer between nodes; data will not follow allocations to other nodes"

// newTransport makes the transport's client. The server checks the same
// transfer block (transfer.Config.Validate), so a block the client takes
// the server takes too.
func (p *Plugin) newTransport(s *Settings, z *zfs.Client) (*transport, error) {
	nomad, err := transfer.NewAPINomad(s.Nomad.Config)
	if err != nil {
		return nil, fmt.Errorf("transfer: the Nomad API: %w", err)
	}
	logger := p.logger.Named("transfer")
	var observer transfer.Observer
	if p.metrics != nil {
		observer = p.metrics
	}
	client, err := transfer.NewClient(transfer.ClientConfig{
		Config: *s.Transfer, Locator: transfer.NomadLocator{Nomad: nomad}, ZFS: z, Logger: logger, Observer: observer})
	if err != nil {
		return nil, err
	}
	return &transport{settings: s, nomad: nomad, client: client, zfs: z, logger: logger, observer: observer}, nil
}

// serve starts the server that sends this node's data to the node of its
// allocation's replacement, as mgr decides (hooks.Sender), until ctx ends.
func (t *transport) serve(ctx context.Context, mgr *hooks.Manager) error {
	s := t.settings
	srv, err := transfer.NewServer(transfer.ServerConfig{
		Config: *s.Transfer,
		Authorizer: &transfer.NomadAuthorizer{Nomad: t.nomad, Self: mgr.NodeID,
			RequireNodeIdentity: s.Transfer.RequireNodeIdentity, Region: s.Transfer.Region, ReplicaNodes: mgr.ReplicaNodes},
		Source:   mgr.Sender(),
		Replicas: mgr.Sender(),
		ZFS:      t.zfs,
		Logger:   t.logger,
		Observer: t.observer,
	})
	if err != nil {
		return err
	}
	go func() {
		if err := srv.Run(ctx); err != nil && ctx.Err() == nil {
			t.logger.Error("the transfer server stopped; no data is sent to other nodes", "error", err)
		}
	}()
	return nil
}

// transferAttributes are what each device group publishes for peers to
// find this plugin's transfer server (transfer.AttrPort, AttrAddress):
// none without a transfer block.
func transferAttributes(s *Settings) map[string]*structs.Attribute {
	if s == nil || s.Transfer == nil {
		return nil
	}
	addr, port, err := s.Transfer.Advertised()
	if err != nil {
		return nil // validated at SetConfig; cannot happen
	}
	attrs := map[string]*structs.Attribute{transfer.AttrPort: structs.NewIntAttribute(int64(port), "")}
	if addr.IsValid() {
		attrs[transfer.AttrAddress] = structs.NewStringAttribute(addr.String())
	}
	return attrs
}

// withAttributes adds attrs to every group's attributes.
func withAttributes(groups []*device.DeviceGroup, attrs map[string]*structs.Attribute) []*device.DeviceGroup {
	for _, g := range groups {
		for k, v := range attrs {
			g.Attributes[k] = v
		}
	}
	return groups
}
