package plugin

import (
	"context"
	"fmt"

	"github.com/hashicorp/nomad/plugins/device"
	"github.com/hashicorp/nomad/plugins/shared/structs"

	"github.com/nomad-device-zfs/nomad-device-zfs/hooks"
	"github.com/nomad-device-zfs/nomad-device-zfs/transfer"
	"github.com/nomad-device-zfs/nomad-device-zfs/zfs"
)

// startTransfer starts the transport between plugins when the transfer
// block is set (package transfer): the server that sends this node's data
// to the node of its allocation's replacement, as the Manager decides
// (hooks.Sender), and the client the Manager pulls copies with. Its errors
// leave the slots as they are: no copy is sent or received, and a class
// that migrates starts its replacements as its migrate timeout says.
func (p *Plugin) startTransfer(ctx context.Context, s *Settings, mgr *hooks.Manager, z *zfs.Client) error {
	nomad, err := transfer.NewAPINomad(s.Nomad.Config)
	if err != nil {
		return fmt.Errorf("transfer: the Nomad API: %w", err)
	}
	logger := p.logger.Named("transfer")
	srv, err := transfer.NewServer(transfer.ServerConfig{
		Config: *s.Transfer,
		Authorizer: &transfer.NomadAuthorizer{Nomad: nomad, Self: mgr.NodeID,
			RequireNodeIdentity: s.Transfer.RequireNodeIdentity, Region: s.Transfer.Region},
		Source: mgr.Sender(),
		ZFS:    z,
		Logger: logger,
	})
	if err != nil {
		return err
	}
	client, err := transfer.NewClient(transfer.ClientConfig{
		Config: *s.Transfer, Locator: transfer.NomadLocator{Nomad: nomad}, ZFS: z, Logger: logger})
	if err != nil {
		return err
	}
	mgr.SetFetcher(client)
	go func() {
		if err := srv.Run(ctx); err != nil && ctx.Err() == nil {
			logger.Error("the transfer server stopped; no data is sent to other nodes", "error", err)
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
