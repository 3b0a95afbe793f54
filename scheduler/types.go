package scheduler

import (
	"errors"
	"fmt"
	"time"

	"github.com/hashicorp/nomad/nomad/structs"
	psstructs "github.com/hashicorp/nomad/plugins/shared/structs"
)

// Device identity of this plugin's instances, as Nomad records it.
const (
	Vendor = "zfs"
	Type   = "dataset"
)

// Node is a client node as the servers see it: enough resources for any
// test job, and this plugin's device groups as fingerprinted.
type Node struct {
	ID   string // a UUID
	Name string
	// Devices are the zfs/dataset/<class> groups, one per class.
	Devices []DeviceGroup
}

// DeviceGroup is one class: its instances (slots) and attributes.
type DeviceGroup struct {
	Class string
	// Attributes a job can constrain on, e.g. "pool": "tank".
	Attributes map[string]string
	Instances  []Instance
}

// Instance is one slot as fingerprinted.
type Instance struct {
	ID         string
	Healthy    bool
	HealthDesc string
}

func (n Node) validate() error {
	if len(n.ID) != 36 {
		return fmt.Errorf("node ID %q is not a UUID", n.ID)
	}
	return nil
}

func (n Node) toStructs() *structs.Node {
	sn := &structs.Node{
		ID:         n.ID,
		SecretID:   n.ID,
		Datacenter: "dc1",
		Name:       n.Name,
		NodePool:   structs.NodePoolDefault,
		Drivers: map[string]*structs.DriverInfo{
			"mock_driver": {Detected: true, Healthy: true},
		},
		Attributes: map[string]string{
			"kernel.name":        "linux",
			"driver.mock_driver": "1",
		},
		NodeResources: &structs.NodeResources{
			Cpu:      structs.NodeCpuResources{CpuShares: 14000},
			Memory:   structs.NodeMemoryResources{MemoryMB: 64 * 1024},
			Disk:     structs.NodeDiskResources{DiskMB: 1024 * 1024},
			Networks: []*structs.NetworkResource{{Mode: "host", Device: "eth0", CIDR: "192.168.0.100/32", MBits: 1000}},
			NodeNetworks: []*structs.NodeNetworkResource{{Mode: "host", Device: "eth0", Speed: 1000,
				Addresses: []structs.NodeNetworkAddress{{Alias: "default", Address: "192.168.0.100", Family: structs.NodeNetworkAF_IPv4}}}},
		},
		Status:                structs.NodeStatusReady,
		SchedulingEligibility: structs.NodeSchedulingEligible,
	}
	for _, g := range n.Devices {
		d := &structs.NodeDeviceResource{Vendor: Vendor, Type: Type, Name: g.Class,
			Attributes: map[string]*psstructs.Attribute{}}
		for k, v := range g.Attributes {
			d.Attributes[k] = psstructs.NewStringAttribute(v)
		}
		for _, in := range g.Instances {
			d.Instances = append(d.Instances, &structs.NodeDevice{ID: in.ID, Healthy: in.Healthy, HealthDescription: in.HealthDesc})
		}
		sn.NodeResources.Devices = append(sn.NodeResources.Devices, d)
	}
	_ = sn.ComputeClass()
	return sn
}

// Job is a service or batch job of task groups.
type Job struct {
	ID        string
	Namespace string // "" is default
	// Batch makes it a batch job; otherwise a service job.
	Batch bool
	// Priority 1-100; 0 is Nomad's default, 50. A higher one may preempt
	// a lower one (Options.Preemption).
	Priority int
	Groups   []Group
}

// Group is a task group.
type Group struct {
	Name  string
	Count int
	Tasks []Task
	// LostAfter, if set, is the group's max_client_disconnect (Nomad 1.8
	// renamed it disconnect { lost_after }): its allocations on a
	// disconnected node go unknown instead of lost.
	LostAfter time.Duration
	// StopAfter, if set, is the group's stop_after_client_disconnect: the
	// servers place the replacement of an allocation lost with its node
	// only once WaitClientStop has passed (the time it turned lost, plus
	// StopAfter and the longest kill_timeout), by their clock: a caller in
	// simulated time moves that clock with Cluster.LostSince.
	StopAfter time.Duration
}

// Task is one task. Version is its config: changing it is a destructive
// update (the allocation is replaced); changing only KillTimeout is an
// in-place update (Nomad's tasksUpdated does not compare it).
type Task struct {
	Name        string
	Version     string
	KillTimeout time.Duration
	// Prestart or Sidecar make it a lifecycle task.
	Prestart, Sidecar bool
	// Devices are its device asks.
	Devices []Ask
}

// Ask is one device request: "zfs/dataset/<Class>", Count instances, and
// optional attribute constraints, e.g. {"pool", "=", "tank"}.
type Ask struct {
	Class       string
	Count       int
	Constraints [][3]string
}

func (j Job) toStructs() (*structs.Job, error) {
	if j.ID == "" || len(j.Groups) == 0 {
		return nil, errors.New("a job needs an ID and at least one group")
	}
	sj := &structs.Job{
		Region: "global", ID: j.ID, Name: j.ID, Namespace: j.Namespace,
		NodePool: structs.NodePoolDefault, Type: structs.JobTypeService,
		Priority: j.Priority, Datacenters: []string{"*"}, Status: structs.JobStatusPending,
	}
	if sj.Namespace == "" {
		sj.Namespace = structs.DefaultNamespace
	}
	if sj.Priority == 0 {
		sj.Priority = structs.JobDefaultPriority
	}
	if j.Batch {
		sj.Type = structs.JobTypeBatch
	}
	for _, g := range j.Groups {
		tg := &structs.TaskGroup{Name: g.Name, Count: g.Count,
			EphemeralDisk: &structs.EphemeralDisk{SizeMB: 300},
			RestartPolicy: &structs.RestartPolicy{Attempts: 0, Interval: time.Minute, Delay: 5 * time.Second, Mode: structs.RestartPolicyModeFail},
			ReschedulePolicy: &structs.ReschedulePolicy{Attempts: 0, Unlimited: true, Delay: 5 * time.Second,
				DelayFunction: "constant"},
		}
		if j.Batch {
			tg.ReschedulePolicy.Unlimited = false
		}
		if g.LostAfter > 0 {
			lostAfter := g.LostAfter
			tg.MaxClientDisconnect = &lostAfter
		}
		if g.StopAfter > 0 {
			stopAfter := g.StopAfter
			tg.StopAfterClientDisconnect = &stopAfter
		}
		for _, t := range g.Tasks {
			st := &structs.Task{Name: t.Name, Driver: "mock_driver",
				Config:      map[string]interface{}{"version": t.Version},
				KillTimeout: t.KillTimeout,
				LogConfig:   structs.DefaultLogConfig(),
				Resources:   &structs.Resources{CPU: 10, MemoryMB: 10},
			}
			switch {
			case t.Prestart:
				st.Lifecycle = &structs.TaskLifecycleConfig{Hook: structs.TaskLifecycleHookPrestart}
			case t.Sidecar:
				st.Lifecycle = &structs.TaskLifecycleConfig{Hook: structs.TaskLifecycleHookPoststart, Sidecar: true}
			}
			for _, a := range t.Devices {
				rd := &structs.RequestedDevice{Name: Vendor + "/" + Type + "/" + a.Class, Count: uint64(a.Count)}
				for _, c := range a.Constraints {
					rd.Constraints = append(rd.Constraints, &structs.Constraint{
						LTarget: "${device.attr." + c[0] + "}", Operand: c[1], RTarget: c[2]})
				}
				st.Resources.Devices = append(st.Resources.Devices, rd)
			}
			tg.Tasks = append(tg.Tasks, st)
		}
		sj.TaskGroups = append(sj.TaskGroups, tg)
	}
	sj.Canonicalize()
	if err := sj.Validate(); err != nil {
		return nil, fmt.Errorf("job %s: %w", j.ID, err)
	}
	return sj, nil
}

// Eval is what one evaluation did.
type Eval struct {
	// Placed are the new allocations, in name order.
	Placed []Placement
	// Stopped are allocations the plan stopped, Preempted those it evicted.
	Stopped, Preempted []string
	// Failed are the groups it could not place in full, by group name.
	Failed map[string]Failure
}

// Placement is one new allocation and the device instances it got.
type Placement struct {
	AllocID, NodeID, Name, Group string
	// Devices maps task name to instance IDs, in ask order.
	Devices map[string][]string
}

// Failure says why a group could not be placed.
type Failure struct {
	Missing int
	// Reasons are Nomad's: "devices: no devices match request",
	// "missing devices" and the like, each with the number of nodes.
	Reasons map[string]int
}
