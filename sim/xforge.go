package sim

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"net/netip"
	"strconv"
	"strings"

	"github.com/hashicorp/nomad/nomad/structs"

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
	numForges
)

func (k forgeKind) String() string {
	return [...]string{"another allocation as the replacement", "the replacement from the wrong node",
		"a token of another dataset's snapshot", "a token without rawok for encrypted data"}[k]
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
	a := as[w.rng.IntN(len(as))]
	o := as[w.rng.IntN(len(as))]
	for kind := range numForges {
		w.forgeOne(kind, a, o)
		if len(w.violations) > 0 {
			return
		}
	}
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
	switch kind {
	case forgeReplacement:
		if o.ID == a.ID || o.PreviousAllocation == a.ID {
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
		if kind == forgeToken {
			req.ResumeToken = from.forgedToken(from.otherSnapshot(parent+"/pg/none@x"), true)
		} else if w.encrypted {
			req.ResumeToken = from.forgedToken(from.transferSnapshot(a.ID, slot), false)
		}
		if req.ResumeToken == "" {
			return
		}
	}
	w.counts.Forged++
	if from.p == nil || from.p.run.dead {
		return
	}
	body, err := json.Marshal(req)
	if err != nil {
		w.violate("harness", "forged request: %v", err)
		return
	}
	hr, err := http.NewRequestWithContext(context.Background(), http.MethodPost,
		"https://"+netip.AddrPortFrom(from.addr, xTransferPort).String()+"/v1/send", bytes.NewReader(body))
	if err != nil {
		w.violate("harness", "forged request: %v", err)
		return
	}
	rec := w.serve(from, by, hr)
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

// transferSnapshot is the snapshot of allocation alloc's data of slot a
// transfer would resume now: its parked data's final one, else the newest
// pre-copy of its slot; "" for none.
func (n *xnode) transferSnapshot(alloc, slot string) string {
	out := ""
	for _, ds := range []string{n.w.cfg.SlotDataset("pg", slot), n.w.cfg.ParkedName("pg", alloc, slot)} {
		sets, err := zfs.NewClient(n.fake).List(context.Background(), ds, nil)
		if err != nil {
			continue
		}
		for _, s := range sets {
			if name, snap, ok := strings.Cut(s.Name, "@"); ok && name == ds && strings.HasPrefix(snap, "migrate-") {
				out = s.Name
				if snap == model.MigrateFinal {
					return out
				}
			}
		}
	}
	return out
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
