package plugin

import (
	"context"
	"errors"
	"path"
	"strings"
	"time"

	"github.com/hashicorp/nomad/plugins/device"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	"github.com/nomad-device-zfs/nomad-device-zfs/hooks"
)

// Reserve hands the task its slots: for each ID a bind mount of the slot's
// dataset at the class's mount path (exec, docker and java honour mounts),
// and environment variables for every driver (raw_exec ignores mounts, so a
// task there uses the host path). It is called on every task start and
// restart, and gives back the same dataset each time.
func (p *Plugin) Reserve(deviceIDs []string) (*device.ContainerReservation, error) {
	if len(deviceIDs) == 0 {
		return &device.ContainerReservation{}, nil
	}
	mgr, s, err := p.manager()
	if err != nil {
		return nil, status.Error(codes.FailedPrecondition, err.Error())
	}
	// Nomad calls Reserve with no deadline: bound it, or a hung zfs or a
	// predecessor that never stops would hang the task's start forever.
	// Data coming from another node may take its class's migrate timeout
	// on top.
	ctx, cancel := context.WithDeadline(p.runCtx, p.now().Add(s.ReserveTimeout+s.Slots.MigrateWait(deviceIDs)))
	defer cancel()
	start := time.Now()
	grants, err := mgr.Reserve(ctx, deviceIDs)
	p.metrics.ReserveDone(deviceIDs, time.Since(start), err)
	switch {
	case errors.Is(err, hooks.ErrUnknownSlot):
		return nil, status.Error(codes.InvalidArgument, err.Error())
	case errors.Is(err, hooks.ErrNotReady):
		return nil, status.Error(codes.Unavailable, err.Error())
	case errors.Is(err, hooks.ErrRefused):
		return nil, status.Error(codes.FailedPrecondition, err.Error())
	case err != nil:
		return nil, status.Error(codes.Internal, err.Error())
	}
	res := reservation(grants)
	p.logger.Debug("reserved", "device_ids", deviceIDs, "envs", res.Envs)
	return res, nil
}

// reservation builds the mounts and environment for granted slots. With one
// slot of a class the mount is the class's path; with several (count > 1),
// each goes to <path>/<id> and the variables hold comma-separated lists in
// the order of the IDs.
//
//	ZFS_<CLASS>_DATASET    tank/nomad/scratch/scratch-1
//	ZFS_<CLASS>_HOST_PATH  /tank/nomad/scratch/scratch-1  (raw_exec writes here)
//	ZFS_<CLASS>_MOUNT      /zfs/scratch                   (exec/docker write here)
//	ZFS_<CLASS>_ID         scratch-1
func reservation(grants []hooks.Grant) *device.ContainerReservation {
	perClass := map[string]int{}
	for _, g := range grants {
		perClass[g.Class.Name]++
	}
	res := &device.ContainerReservation{Envs: map[string]string{}}
	lists := map[string][]string{}
	for _, g := range grants {
		taskPath := g.Class.MountPath
		if perClass[g.Class.Name] > 1 {
			taskPath = path.Join(taskPath, g.Slot.ID)
		}
		res.Mounts = append(res.Mounts, &device.Mount{TaskPath: taskPath, HostPath: g.Slot.WantMountpoint})
		key := "ZFS_" + envKey(g.Class.Name) + "_"
		lists[key+"DATASET"] = append(lists[key+"DATASET"], g.Slot.Dataset)
		lists[key+"HOST_PATH"] = append(lists[key+"HOST_PATH"], g.Slot.WantMountpoint)
		lists[key+"MOUNT"] = append(lists[key+"MOUNT"], taskPath)
		lists[key+"ID"] = append(lists[key+"ID"], g.Slot.ID)
	}
	for k, v := range lists {
		res.Envs[k] = strings.Join(v, ",")
	}
	return res
}
