package plugin

import (
	"fmt"
	"math"
	"slices"
	"strings"
	"time"

	"github.com/hashicorp/nomad/plugins/shared/hclspec"

	"github.com/nomad-device-zfs/nomad-device-zfs/model"
)

// replicateSpec is a class's `replicate { ... }` block (issue 30,
// docs/node-loss.md): copies of each held slot kept on other nodes while
// its holder runs, for a replacement when the holder's node is lost.
var replicateSpec = hclspec.NewObject(map[string]*hclspec.Spec{
	"copies": hclspec.NewDefault(
		hclspec.NewAttr("copies", "number", false),
		hclspec.NewLiteral(`1`),
	),
	"every": hclspec.NewDefault(
		hclspec.NewAttr("every", "string", false),
		hclspec.NewLiteral(`"1m"`),
	),
	"spread": hclspec.NewDefault(
		hclspec.NewAttr("spread", "string", false),
		hclspec.NewLiteral(`""`),
	),
})

// ReplicateConfig is the decoded `replicate` block of a class.
type ReplicateConfig struct {
	// Copies is read as any number so that 1.5 is refused naming the key.
	Copies float64 `codec:"copies"`
	Every  string  `codec:"every"`
	Spread string  `codec:"spread"`
}

// Bounds of the replicate block.
const (
	// maxCopies: each copy is a stream from the holder's node every Every;
	// past a few, the holder's disks and network pay more than the
	// cluster gains.
	maxCopies = 5
	// minEvery: each pull takes a snapshot on the holder and opens a
	// stream; more often than this costs more than it saves.
	minEvery = 10 * time.Second
)

// spreads are what spread accepts: a node attribute as a job's spread
// block names it inside its ${...}, among those GET /v1/nodes answers for
// every node in one request (structs.NodeListStub: Datacenter, NodeClass,
// NodePool). An attr.* or meta.* would take one request per node.
var spreads = []string{"node.datacenter", "node.class", "node.pool"}

// validate reads a replicate block; nil is a class that keeps no
// replicas. It needs the migrate block (so sticky = true and the plugin's
// transfer block): a replica travels on the transport and is claimed by a
// replacement's Reserve, which waits for it and gives up as migrate says.
func (rc *ReplicateConfig) validate(migrates bool) (model.Replicate, []string) {
	if rc == nil {
		return model.Replicate{}, nil
	}
	var errs []string
	if !migrates {
		errs = append(errs, "needs a migrate block (and so sticky = true and the plugin's transfer block): a replica moves on the "+
			"transport, and a replacement waits for it as migrate says")
	}
	if rc.Copies < 1 || rc.Copies > maxCopies || rc.Copies != math.Trunc(rc.Copies) {
		errs = append(errs, fmt.Sprintf("copies = %v: must be between 1 and %d, a whole number", rc.Copies, maxCopies))
	}
	every, err := boundedDuration(rc.Every, minEvery)
	if err != nil {
		errs = append(errs, fmt.Sprintf("every = %q: %v", rc.Every, err))
	}
	if rc.Spread != "" && !slices.Contains(spreads, rc.Spread) {
		errs = append(errs, fmt.Sprintf("spread = %q: must be one of %s (a node attribute as a job's spread names it inside its ${...})",
			rc.Spread, strings.Join(spreads, ", ")))
	}
	return model.Replicate{Copies: int(rc.Copies), Every: every, Spread: rc.Spread}, errs
}
