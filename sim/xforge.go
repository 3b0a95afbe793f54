package sim

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"net/http/httptest"
	"net/netip"
	"slices"
	"strconv"
	"strings"

	"github.com/hashicorp/nomad/nomad/structs"

	"github.com/nomad-device-zfs/nomad-device-zfs/internal/nomadapi"
	"github.com/nomad-device-zfs/nomad-device-zfs/model"
	"github.com/nomad-device-zfs/nomad-device-zfs/transfer"
	"github.com/nomad-device-zfs/nomad-device-zfs/zfs"
	"github.com/nomad-device-zfs/nomad-device-zfs/zfs/zfstest"
)

// forgeKind is how a forged request asks for data it must not get.
type forgeKind int

const (
	// forgeReplacement: another allocation named as the replacement.
	forgeReplacement forgeKind = iota
	// forgeNode: the real replacement, asked for from the node it is not on.
	forgeNode
	// forgeToken: the real replacement's node, with a resume token of
	// another dataset's snapshot.
	forgeToken
	// forgeNotRaw: the real replacement's node, with a token of the
	// transfer's own snapshot of encrypted data that does not say rawok
	// (zfs would send it decrypted: OpenZFS #14153).
	forgeNotRaw
	// forgeBody: the real replacement's node, its headers naming its own
	// allocations (what the sender authorizes before reading the body),
	// its body asking for another allocation's data.
	forgeBody
	numForges
)

func (k forgeKind) String() string {
	return [...]string{"another allocation as the replacement", "the replacement from the wrong node",
		"a token of another dataset's snapshot", "a token without rawok for encrypted data",
		"headers naming the replacement's own allocations, a body naming another's"}[k]
}

// forge asks a node's transfer server, as someone who must not get it,
// for a started allocation's data, in every way that applies to it. The
// server must refuse, and send nothing: not a stream, and not "complete"
// either (the sender would take its data for copied).
func (w *XWorld) forge() {
	var as []*structs.Allocation
	for _, n := range w.nodes {
		for _, sa := range w.cluster.Allocs(n.id) {
			if d := w.data[sa.ID]; d != nil && d.started {
				as = append(as, sa)
			}
		}
	}
	if len(as) == 0 {
		return
	}
	// moving are those whose replacement is placed on the other node:
	// their data is asked for, and has a transfer's snapshots.
	var moving []*structs.Allocation
	for _, sa := range as {
		if b := w.cluster.Alloc(sa.NextAllocation); b != nil && b.NodeID != sa.NodeID {
			moving = append(moving, sa)
		}
	}
	a, o := as[w.rng.IntN(len(as))], as[w.rng.IntN(len(as))]
	for kind := range numForges {
		if kind != forgeReplacement && len(moving) > 0 {
			a = moving[w.rng.IntN(len(moving))]
		}
		w.forgeOne(kind, a, o)
		if len(w.violations) > 0 {
			return
		}
	}
	if len(moving) > 0 {
		w.askStale(moving[w.rng.IntN(len(moving))])
	}
	w.forgeReplicas(a)
}

// askStale asks for a's data as B's node does after its copy lost its
// newest snapshots (a crash, an aborted receive): with an older base, one
// of the data's pre-copy snapshots. The sender may stream, or refuse, but
// "complete" only to the holder of its final snapshot (X6): the sender
// would take its data for copied, and release it.
func (w *XWorld) askStale(a *structs.Allocation) {
	from, b := w.node(a.NodeID), w.cluster.Alloc(a.NextAllocation)
	if b == nil || from.p == nil || from.p.run.dead {
		return
	}
	slot := ""
	for _, t := range a.AllocatedResources.Tasks {
		for _, d := range t.Devices {
			slot = d.DeviceIDs[0]
		}
	}
	var bases []uint64
	for _, ds := range []string{w.cfg.SlotDataset("pg", slot), w.cfg.ParkedName("pg", a.ID, slot)} {
		sets, err := zfs.NewClient(from.fake).List(context.Background(), ds, nil)
		if err != nil {
			continue
		}
		for _, s := range sets {
			if n, snap, ok := strings.Cut(s.Name, "@"); ok && n == ds && strings.HasPrefix(snap, "migrate-") && snap != model.MigrateFinal {
				g, _ := strconv.ParseUint(s.GUID, 10, 64)
				bases = append(bases, g)
			}
		}
	}
	if len(bases) == 0 {
		return
	}
	req := transfer.Request{Alloc: a.ID, Replacement: b.ID, Slot: slot, HaveGUID: bases[w.rng.IntN(len(bases))]}
	by := w.node(b.NodeID)
	rec := w.post(from, by, req)
	w.logf("%s asks %s for %s's data from an older base: %d", by.name, from.name, shortID(a.ID), rec.Code)
	if rec.Code == http.StatusNoContent && !from.holdsFinal(req) {
		w.violate("X6", "%s answers complete to %s for %s's data, whose newest snapshot (guid %d) is a pre-copy",
			from.name, by.name, shortID(a.ID), req.HaveGUID)
	}
}

// unlinkedReplacement reports whether o may have a's data though it
// names no predecessor: the replacement Nomad places for an allocation
// it stopped as lost with its node, which names none (docs/security.md:
// "One replacement is allowed without the link"; seed 9791579). Asking
// for a's data as o, from o's node, is no forgery then.
func unlinkedReplacement(a, o *structs.Allocation) bool {
	return o.PreviousAllocation == "" && a.NextAllocation == "" && a.DesiredStatus == structs.AllocDesiredStatusStop &&
		nomadapi.LostByServers(a.DesiredDescription) && o.Namespace == a.Namespace && o.JobID == a.JobID &&
		o.TaskGroup == a.TaskGroup && o.Name == a.Name && o.CreateIndex > a.CreateIndex
}

// forgeOne is one forged request for a's data (o: some allocation to name
// as its replacement), if kind applies.
func (w *XWorld) forgeOne(kind forgeKind, a, o *structs.Allocation) {
	from := w.node(a.NodeID)
	slot := ""
	for _, t := range a.AllocatedResources.Tasks {
		for _, d := range t.Devices {
			slot = d.DeviceIDs[0]
		}
	}
	req := transfer.Request{Alloc: a.ID, Slot: slot}
	by := w.other(from)
	b := w.cluster.Alloc(a.NextAllocation)
	var claim *transfer.Request // the headers, when they differ from req
	switch kind {
	case forgeBody:
		if b == nil || w.node(b.NodeID) == from || o.ID == a.ID || o.NodeID != a.NodeID {
			return
		}
		claim = &transfer.Request{Alloc: a.ID, Replacement: b.ID}
		req.Alloc, req.Replacement, by = o.ID, b.ID, w.node(b.NodeID)
		for _, t := range o.AllocatedResources.Tasks {
			for _, d := range t.Devices {
				req.Slot = d.DeviceIDs[0] // o's own slot: what its data is asked by
			}
		}
	case forgeReplacement:
		if o.ID == a.ID || o.PreviousAllocation == a.ID || unlinkedReplacement(a, o) && w.node(o.NodeID) == by {
			return
		}
		req.Replacement = o.ID
	case forgeNode:
		if b == nil {
			return
		}
		req.Replacement = b.ID
		by = w.other(w.node(b.NodeID))
	case forgeToken, forgeNotRaw:
		if b == nil || w.node(b.NodeID) == from {
			return
		}
		req.Replacement, by = b.ID, w.node(b.NodeID)
		if from.p == nil || from.p.run.dead {
			return
		}
		switch {
		case kind == forgeToken:
			other := from.otherSnapshot(w.cfg.SlotDataset("pg", slot) + "@x")
			if ds, _, _ := strings.Cut(other, "@"); ds == w.cfg.ParkedName("pg", a.ID, slot) {
				return // a's own data, parked: its token would be a's own
			}
			req.ResumeToken = from.forgedToken(other, true)
		case w.encrypted:
			// As B's node may: ask, and hear which snapshot goes (raw);
			// then ask to resume it without rawok.
			first := w.post(from, by, req)
			if first.Code != http.StatusOK {
				return
			}
			guid, _ := strconv.ParseUint(first.Header().Get("Ndz-Snapshot-Guid"), 10, 64)
			req.ResumeToken = zfstest.EncodeResumeToken(zfs.ResumeToken{ToName: first.Header().Get("Ndz-Snapshot"), ToGUID: guid,
				CompressOK: true, LargeBlockOK: true})
		}
		if req.ResumeToken == "" {
			return
		}
	}
	w.counts.Forged++
	if from.p == nil || from.p.run.dead {
		return
	}
	rec := w.postAs(from, by, req, claim)
	if rec.Code == http.StatusOK || rec.Code == http.StatusNoContent {
		w.violate("X3", "%s answers %d (%s %s) to a forged request for %s's data, %s: replacement %s, from %s",
			from.name, rec.Code, rec.Header().Get("Ndz-Snapshot"), rec.Header().Get("Ndz-Complete"), shortID(a.ID), kind,
			shortID(req.Replacement), by.name)
		return
	}
	w.counts.ForgedRefused++
	w.logf("forged request to %s for %s's data (%s: replacement %s, from %s): %d %s", from.name, shortID(a.ID), kind,
		shortID(req.Replacement), by.name, rec.Code, short(fmt.Errorf("%s", strings.TrimSpace(rec.Body.String()))))
}

// post is req as node by sends it to node from's transfer server, and
// the server's answer.
func (w *XWorld) post(from, by *xnode, req transfer.Request) *httptest.ResponseRecorder {
	return w.postAs(from, by, req, nil)
}

// postAs is post with headers that name claim's allocations instead of
// req's (nil: req's, as the transfer's Client sends them).
func (w *XWorld) postAs(from, by *xnode, req transfer.Request, claim *transfer.Request) *httptest.ResponseRecorder {
	if claim == nil {
		claim = &req
	}
	body, err := json.Marshal(req)
	if err != nil {
		w.violate("harness", "a request: %v", err)
		return httptest.NewRecorder()
	}
	hr, err := http.NewRequestWithContext(context.Background(), http.MethodPost,
		"https://"+netip.AddrPortFrom(from.addr, xTransferPort).String()+"/v1/send", bytes.NewReader(body))
	if err != nil {
		w.violate("harness", "a request: %v", err)
		return httptest.NewRecorder()
	}
	hr.Header.Set("Ndz-Alloc", claim.Alloc)
	hr.Header.Set("Ndz-Replacement", claim.Replacement)
	return w.serve(from, by, hr)
}

// forgedToken is a resume token for the whole of snapshot snap of node n,
// as a receiver could forge it: zfs on n decodes it. Embedded: the token
// asks for embedded data too (a non-raw send's feature).
func (n *xnode) forgedToken(snap string, embedded bool) string {
	if snap == "" {
		return ""
	}
	ds, _, _ := strings.Cut(snap, "@")
	sets, err := zfs.NewClient(n.fake).List(context.Background(), ds, nil)
	if err != nil {
		return ""
	}
	for _, s := range sets {
		if s.Name == snap {
			guid, _ := strconv.ParseUint(s.GUID, 10, 64)
			return zfstest.EncodeResumeToken(zfs.ResumeToken{ToName: snap, ToGUID: guid, CompressOK: true, LargeBlockOK: true,
				EmbedOK: embedded})
		}
	}
	return ""
}

// forgeReplicas asks a's node for replica pulls of a's data that it must
// refuse, in a world that keeps replicas: from a node not chosen for a's
// replica, and from a chosen node naming a slot a does not hold. The
// server must send nothing.
func (w *XWorld) forgeReplicas(a *structs.Allocation) {
	from := w.node(a.NodeID)
	if !w.replicas || from == nil || from.p == nil || from.p.run.dead {
		return
	}
	slot := ""
	for _, t := range a.AllocatedResources.Tasks {
		for _, d := range t.Devices {
			slot = d.DeviceIDs[0]
		}
	}
	stubs, _ := xnomad{from}.Nodes(context.Background())
	chosen, _ := from.p.mgr.ReplicaNodes(transfer.Alloc{ID: a.ID, NodeID: a.NodeID, Namespace: a.Namespace, JobID: a.JobID,
		TaskGroup: a.TaskGroup}, slot, stubs)
	other := "pg-1"
	if slot == other {
		other = "pg-2"
	}
	for _, by := range w.nodes {
		switch {
		case by == from:
		case !slices.Contains(chosen, by.id):
			w.forgeReplica(from, by, a, slot, "from a node not chosen for its replica")
		default:
			w.forgeReplica(from, by, a, other, "naming a slot it does not hold")
		}
	}
}

func (w *XWorld) forgeReplica(from, by *xnode, a *structs.Allocation, slot, why string) {
	req := transfer.Request{Kind: transfer.KindReplica, Alloc: a.ID, Slot: slot}
	body, _ := json.Marshal(req)
	hr, err := http.NewRequestWithContext(context.Background(), http.MethodPost,
		"https://"+netip.AddrPortFrom(from.addr, xTransferPort).String()+"/v1/send", bytes.NewReader(body))
	if err != nil {
		w.violate("harness", "a request: %v", err)
		return
	}
	hr.Header.Set("Ndz-Alloc", a.ID)
	hr.Header.Set("Ndz-Kind", transfer.KindReplica)
	hr.Header.Set("Ndz-Slot", slot)
	w.counts.Forged++
	rec := w.serve(from, by, hr)
	if rec.Code == http.StatusOK || rec.Code == http.StatusNoContent {
		w.violate("X3", "%s answers %d (%s) to a forged replica pull of %s's data %s (slot %s, from %s)",
			from.name, rec.Code, rec.Header().Get("Ndz-Snapshot"), shortID(a.ID), why, slot, by.name)
		return
	}
	w.counts.ForgedRefused++
	w.logf("forged replica pull to %s for %s's data (%s: slot %s, from %s): %d", from.name, shortID(a.ID), why, slot, by.name, rec.Code)
}
