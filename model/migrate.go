package model

import (
	"errors"
	"fmt"
	"maps"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/nomad-device-zfs/nomad-device-zfs/zfs"
)

// Migration: a sticky class with Migrate set hands an allocation's data to
// its replacement on another node too. Nomad places B (PreviousAllocation
// A) on node 2 while A still runs or stops on node 1; node 2's plugin pulls
// A's data from node 1's (package transfer) into the name A's data has when
// parked (ParkedName), and B's Reserve claims it there as a same-node
// replacement claims parked data:
//
//	node 1: held by A ─snapshot @migrate-<n>, sent─▶ (A still runs: pre-copy)
//	        A ended ──▶ parked (sticky.go) ─@migrate-final, sent as the increment─▶
//	        the receiver has it ─@migrate-final renamed @migrated─▶ the class's policy
//	node 2: receiving (a partial or pre-copied copy) ─the final increment─▶ parked
//	        ─B reserves─▶ claimed (PlanClaim), as on one node
//
// A's data is never released on node 1 before node 2 has said it holds the
// final snapshot (its next request names that snapshot's guid), or
// sticky_wait has run out. B never sees a copy that is not final: it is
// claimable only once parked, and a Reserve waits for it (bounded by
// Migrate.Timeout) while it is receiving.

// Migrate is a class's migration configuration.
type Migrate struct {
	// Enabled: the data follows the replacement to another node.
	Enabled bool
	// Timeout bounds how long the replacement's start waits for the data.
	Timeout time.Duration
	// OnTimeout is what then happens: MigrateFail or MigrateStartEmpty.
	OnTimeout string
}

// What a replacement's start does when the data has not come in time.
const (
	// MigrateFail fails the start: Nomad restarts the task (its restart
	// policy), whose next Reserve waits again; node 1 keeps the data.
	MigrateFail = "fail"
	// MigrateStartEmpty starts it on an empty slot; node 1 keeps the data
	// parked, and sticky_wait then the class's policy apply to it there.
	MigrateStartEmpty = "start_empty"
)

// Snapshot names of a migration, on the sending node: each is the plugin's
// own (ownSnapshot), under its hold, and goes with the data it is of.
const (
	// migratePrefix starts a pre-copy snapshot, @migrate-<n>, of data
	// whose holder may still run.
	migratePrefix = "migrate-"
	// MigrateFinal is the snapshot of parked data: nothing writes it any
	// more, so it is the copy's last state.
	MigrateFinal = "migrate-final"
	// Migrated is MigrateFinal renamed once the receiver holds it.
	Migrated = "migrated"
)

// OutcomeMigrated is the outcome of a copy received from another node. A
// copy no replacement claims is destroyed, whatever the class's policy:
// the class's policy applies to the original, on its own node.
const OutcomeMigrated = "migrated"

// StateReceiving: a copy of another node's data being received (partial,
// or pre-copied while its holder still runs there). Never claimable.
const StateReceiving State = "receiving"

// migrationSnapshot reports whether snap (the part after @) is one of a
// migration's snapshots.
func migrationSnapshot(snap string) bool {
	return strings.HasPrefix(snap, migratePrefix) || snap == Migrated
}

// Send is one send of a migration, as the sending node decides it
// (DecideSend, then DecideSendMove) and its transport streams it: a new
// snapshot to take (Take, under its hold) or none, and the stream:
// Options.Snapshot, from Options.From (the snapshot the receiver holds, ""
// for a full stream).
type Send struct {
	// Complete: the receiver holds the final snapshot already; nothing to
	// send. The data's Migrated mark is written (PlanMigrated).
	Complete bool
	// Take is a snapshot to take first ("" when Options.Snapshot exists
	// already).
	Take string
	// Options is what zfs sends: the snapshot and its base here, the
	// stream's flags once the data's encryption is known (Streamed).
	Options zfs.SendOptions
	// FromGUID and ToGUID are the guids of Options.From (0 for a full
	// stream) and of Options.Snapshot (known only once taken): what a
	// resume token must name.
	FromGUID, ToGUID uint64
	// Encrypted: the data is encrypted, so it is sent raw (-w) and the key
	// never travels; the transport refuses to send it otherwise.
	Encrypted bool
	// Final: sent from parked data (its holder has ended): no writer.
	Final bool
	// Drop are the data's pre-copy snapshots no stream will start from or
	// send again, while its holder may still write: older than the
	// receiver's base, or neither the base nor the one sent. None once
	// the data is parked: the class's policy drops them with it.
	Drop []string
}

// Streamed is s with the stream's flags for data encrypted or not: raw
// when encrypted (the key never travels), else compressed as stored,
// with large and embedded blocks.
func (s Send) Streamed(encrypted bool) Send {
	s.Encrypted = encrypted
	s.Options.Raw = encrypted
	s.Options.Compressed = !encrypted
	s.Options.LargeBlocks = true
	s.Options.Embedded = !encrypted
	return s
}

// SendInput is what a send is decided from, on the sending node.
type SendInput struct {
	// Dataset is where the holder's data is, and Rows one `zfs list -r`
	// of it (its snapshots and their guids).
	Dataset string
	Rows    []zfs.Dataset
	// Final: the data is parked (its holder has ended): no writer, so a
	// snapshot of it is the last.
	Final bool
	// HaveGUID is the guid of the newest snapshot the receiver holds, 0
	// for none; Token, when set, what its interrupted receive was taking.
	HaveGUID uint64
	Token    *Resume
}

// Resume is what a receiver's resume token says it was receiving, as the
// sending node's zfs decodes it (never as the receiver says).
type Resume struct {
	ToGUID, FromGUID uint64
}

// ErrMigrated: the receiver has named the data's final snapshot already
// (@migrated), so its copy is whole and the data goes by the class's
// policy; any other request is answered with nothing. It comes from the
// receiver's pull still running after the replacement's Reserve claimed
// the copy (which renames it away): sending the whole data again then
// would only make a second copy, for no one.
var ErrMigrated = errors.New("the replacement's node holds its final copy already")

// migrationSnap is one of the data's migration snapshots: its name after
// the @, and its guid.
type migrationSnap struct {
	name string
	guid uint64
}

// DecideSend decides the send for one request of a migration. The base is
// the receiver's newest snapshot, found among the data's own migration
// snapshots by its guid (a base the data no longer has means a full
// stream: the receiver must then start over). An interrupted receive is
// resumed only for exactly the snapshot and base this decision names now.
//
// While the holder may still write, a request that holds the newest
// pre-copy snapshot (@migrate-<n>) gets a new one, so the final increment
// after the holder ends carries only what changed since; never more than
// two are kept (preCopy). Once the data is parked, the final
// snapshot is taken once; a receiver that names it holds the last state.
// Once that is recorded (@migrated), a request naming it is still
// complete, and any other gets ErrMigrated.
func DecideSend(in SendInput) (Send, error) {
	type snap = migrationSnap
	var own []snap
	for _, r := range in.Rows {
		ds, name, ok := strings.Cut(r.Name, "@")
		if !ok || ds != in.Dataset || !migrationSnapshot(name) {
			continue
		}
		g, err := strconv.ParseUint(r.GUID, 10, 64)
		if err != nil {
			return Send{}, fmt.Errorf("snapshot %s: guid %q: %w", r.Name, r.GUID, err)
		}
		own = append(own, snap{name, g})
	}
	find := func(guid uint64) (snap, bool) {
		for _, s := range own {
			if s.guid == guid {
				return s, true
			}
		}
		return snap{}, false
	}
	final, hasFinal, migrated := snap{}, false, false
	for _, s := range own {
		if s.name == MigrateFinal || s.name == Migrated {
			final, hasFinal = s, true
			migrated = s.name == Migrated
		}
	}
	var out Send
	if base, ok := find(in.HaveGUID); ok && in.HaveGUID != 0 {
		out.Options.From, out.FromGUID = in.Dataset+"@"+base.name, base.guid
		for _, s := range own {
			if s.name == base.name || in.Final {
				// own is in the listing's order: oldest first. Parked
				// data's are left to the class's policy, which drops
				// them all with the data (PlanReleaseParked): not two
				// zfs processes on the cutover's path.
				break
			}
			if s.name != MigrateFinal && s.name != Migrated {
				out.Drop = append(out.Drop, in.Dataset+"@"+s.name)
			}
		}
		if hasFinal && base.guid == final.guid {
			return Send{Complete: true, Options: zfs.SendOptions{Snapshot: in.Dataset + "@" + final.name}, Drop: out.Drop}, nil
		}
	}
	if migrated {
		return Send{}, fmt.Errorf("%w: %s", ErrMigrated, in.Dataset)
	}
	if t := in.Token; t != nil {
		// Resume only what this decision would send anew: the token's
		// snapshot must be one of the data's own, from the same base.
		if to, ok := find(t.ToGUID); ok && t.FromGUID == out.FromGUID && (to.guid == final.guid || !in.Final) {
			out.Options.Snapshot = in.Dataset + "@" + to.name
			return out, nil
		}
	}
	switch {
	case in.Final && hasFinal:
		out.Options.Snapshot = in.Dataset + "@" + final.name
	case in.Final:
		out.Take = in.Dataset + "@" + MigrateFinal
		out.Options.Snapshot = out.Take
	default:
		out = preCopy(in.Dataset, own, out)
	}
	return out, nil
}

// preCopy decides a pre-copy (the holder may still write): the increment
// from the receiver's base (out.Options.From, "" for none) to a newer pre-copy
// snapshot. One the data has already that is newer than the base (taken
// for an earlier request whose stream the receiver did not keep) is sent
// again rather than another taken, and every other pre-copy snapshot is
// dropped: at most two are ever on the data, the base and the one sent,
// however many requests come (a peer asking from nothing again and again
// would otherwise pile held snapshots on the live slot).
func preCopy(dataset string, own []migrationSnap, out Send) Send {
	base := 0
	if out.Options.From != "" {
		base = preCopyNumber(out.Options.From[strings.IndexByte(out.Options.From, '@')+1:])
	}
	newest, newestName := 0, ""
	for _, s := range own {
		if i := preCopyNumber(s.name); i > newest {
			newest, newestName = i, s.name
		}
	}
	if newest > base {
		out.Options.Snapshot = dataset + "@" + newestName
	} else {
		out.Take = fmt.Sprintf("%s@%s%d", dataset, migratePrefix, newest+1)
		out.Options.Snapshot = out.Take
	}
	out.Drop = nil
	for _, s := range own {
		name := dataset + "@" + s.name
		if preCopyNumber(s.name) > 0 && name != out.Options.From && name != out.Options.Snapshot {
			out.Drop = append(out.Drop, name)
		}
	}
	return out
}

// preCopyNumber is n of a pre-copy snapshot's name, migrate-<n>; 0 for any
// other name (migrate-final, migrated).
func preCopyNumber(name string) int {
	if !strings.HasPrefix(name, migratePrefix) {
		return 0
	}
	i, err := strconv.Atoi(strings.TrimPrefix(name, migratePrefix))
	if err != nil || i < 1 {
		return 0
	}
	return i
}

// PlanDropSnapshots destroys a migration's snapshots no stream needs any
// more (Send.Drop), each after the plugin's hold on it.
func PlanDropSnapshots(snaps []string) Plan {
	return Plan{Doing: "dropping a migration's old snapshots", Ops: dropSnapshots(snaps)}
}

// PlanTakeSnapshot takes a migration's snapshot under the plugin's hold,
// so that nothing but the plugin's own release destroys it.
func PlanTakeSnapshot(name string) Plan {
	return Plan{Doing: "taking " + name, Ops: []Op{snapshotOp(name), holdOp(name)}}
}

// PlanMigrated records, on the sending node, that the receiver holds the
// final snapshot of data: @migrate-final becomes @migrated, and the data
// may go by the class's policy (PlanParked).
func PlanMigrated(dataset string) Plan {
	return Plan{
		Doing: "recording that " + dataset + " has a copy on its replacement's node",
		Ops:   []Op{renameOp(dataset+"@"+MigrateFinal, dataset+"@"+Migrated)},
		Done:  Note{Msg: "the replacement's node holds the final copy", KV: []any{"dataset", dataset}},
	}
}

// ReceiveProps are set by the receive (-o) on a copy of holder's data
// arriving as name for class c: the plugin's mark and the copy's state, so
// that a partial receive, too, is recognisably the plugin's, and the
// class's own properties (quota, refquota, compression, ...), so that the
// copy a replacement claims by rename has this node's class limits, not
// the sender's or none. The properties only a create can set
// (CreateOnlyProps) stay as the stream has them.
func ReceiveProps(c Class, name, holder string, now, expires time.Time) map[string]string {
	props := make(map[string]string, len(c.Properties)+6)
	for k, v := range c.Properties {
		if !slices.Contains(CreateOnlyProps, k) {
			props[k] = v
		}
	}
	maps.Copy(props, map[string]string{
		PropOwner:   name,
		PropState:   string(StateReceiving),
		PropHolder:  holder,
		PropOutcome: OutcomeMigrated,
		PropSince:   unix(now),
		PropExpires: unix(expires),
	})
	return props
}

// CopyNotOneFilesystem says why the received copy name, as listed (rows,
// `zfs list -r -t filesystem,snapshot`), is not what a transfer receives,
// one filesystem and its snapshots ("" when it is), and whether the copy
// is to be dropped:
//   - a replication stream (zfs send -R) brings datasets below it, which no
//     slot may have. They carry no mark of the plugin's own (they inherit
//     the copy's), so the plugin does not destroy them: the operator does,
//     with the copy;
//   - a volume's stream (a zvol) makes the copy a volume, which no task can
//     mount. The listing shows its snapshots and not the volume itself.
//     The copy is the plugin's (the receive marked it): drop is true, and
//     the caller drops it (PlanDropCopy).
func CopyNotOneFilesystem(name string, rows []zfs.Dataset) (why string, drop bool) {
	var below []string
	filesystem, snapshots := false, false
	for _, r := range rows {
		switch {
		case r.Name == name:
			filesystem = r.Type == zfs.DatasetFilesystem
		case strings.HasPrefix(r.Name, name+"@"):
			snapshots = true
		case strings.HasPrefix(r.Name, name+"/") && !r.IsSnapshot():
			below = append(below, r.Name)
		}
	}
	if len(below) > 0 {
		return fmt.Sprintf("the stream brought %d dataset(s) below the copy (%s): a replication stream, not one filesystem; "+
			"the plugin never destroys what carries no mark of its own: destroy the copy with them (zfs destroy -r %s)",
			len(below), below[0], name), false
	}
	if snapshots && !filesystem {
		return fmt.Sprintf("the stream made %s a volume (zvol), not a filesystem: no task can mount it as a slot; the copy is dropped", name), true
	}
	return "", false
}

// CopyOverLimits says why received copy d cannot become a slot of class
// c: it references more than the class's refquota or quota, so its
// replacement would start over its limit, unable to write ("" when it
// fits, or the class sets neither). The copy's own migration snapshots go
// at the claim, so what it references is what the slot will use.
func CopyOverLimits(c Class, d zfs.Dataset) string {
	for _, p := range []string{"refquota", "quota"} {
		v, ok := c.Properties[p]
		if !ok {
			continue
		}
		limit, err := zfs.ParseSize(v)
		if err != nil || limit == 0 {
			continue // "none"; the configuration refuses anything else
		}
		if d.Referenced > limit {
			return fmt.Sprintf("the copy references %s, more than the class's %s %s", humanBytes(d.Referenced), p, v)
		}
	}
	return ""
}

// CreateOnlyProps are native properties set only when a dataset is made
// (or, for encryption's, by zfs change-key): a receive cannot set them.
var CreateOnlyProps = []string{"casesensitivity", "encryption", "keyformat", "keylocation",
	"normalization", "pbkdf2iters", "utf8only", "volblocksize", "volsize"}

// ReceiveExclude are the properties a peer's stream may carry that the
// receiver never takes from it (-x) unless props sets them (-o): every one
// of the plugin's own (a sender could otherwise plant a state, a
// generation or a retain_as) and readonly (a copy the replacement could not
// write). Properties that act on the host (mountpoint, sharing, setuid)
// are the transfer's own rule, transfer.HostProps.
func ReceiveExclude(props map[string]string) []string {
	var out []string
	for _, p := range append(slices.Clone(UserProps), "readonly") {
		if _, set := props[p]; !set {
			out = append(out, p)
		}
	}
	return out
}

// PlanReceived makes a copy that holds the final snapshot parked data: its
// replacement's Reserve may now claim it (DecideInherit). The same zfs set
// marks it with the replacement's slot, slotDataset, as the claim's first
// write would (ClaimAsProps: its owner mark is the receive's): the claim
// then renames it without a set of its own (PlanClaim; one process less
// on the cutover's path, docs/performance.md). Nothing reads PropRetainAs
// of parked data at its own name; a crash anywhere leaves what the claim
// would have left.
func PlanReceived(name, slotDataset string, now, expires time.Time) Plan {
	props := ClaimAsProps(name, slotDataset)
	maps.Copy(props, map[string]string{PropSince: unix(now), PropExpires: unix(expires)})
	return Plan{
		Doing: "marking " + name + " received",
		Ops:   []Op{setOp(name, props)},
		Done:  Note{Msg: "received the final copy from the allocation's node", KV: []any{"dataset", name}},
	}
}

// PlanAbortReceive discards the partial state of an interrupted receive
// into copy name; none there is done.
func PlanAbortReceive(name string) Plan {
	return Plan{Doing: "discarding the partial receive into " + name, Ops: []Op{abortReceiveOp(name)}}
}

// PlanDropCopy destroys copy name, as last listed (rows): what a partial
// receive left, its snapshots, then the dataset; so that the next pull
// starts over with a whole copy. Nothing for what is not the plugin's.
func PlanDropCopy(name string, rows []zfs.Dataset) Plan {
	return dropCopy(name, rows, Owned)
}

// dropCopy is PlanDropCopy with ours saying whether the copy's dataset
// is the plugin's.
func dropCopy(name string, rows []zfs.Dataset, ours func(*zfs.Dataset) bool) Plan {
	p := Plan{Doing: "dropping the copy " + name}
	var snaps []string
	for i := range rows {
		if rows[i].Name == name && !ours(&rows[i]) {
			return Plan{}
		}
		if strings.HasPrefix(rows[i].Name, name+"@") {
			snaps = append(snaps, rows[i].Name)
		}
	}
	p.Ops = append([]Op{abortReceiveOp(name)}, dropSnapshots(snaps)...)
	p.Ops = append(p.Ops, destroyOp(name))
	return p
}

func abortReceiveOp(name string) Op {
	return Op{Command: zfs.Command{Verb: zfs.VerbReceiveAbort, Name: name}, Done: []error{zfs.ErrNotExist}}
}

// OlderCopied are a copy's snapshots older than its newest (rows, one
// listing of it): the next increment needs only the newest as its base.
func OlderCopied(name string, rows []zfs.Dataset) []string {
	newest, _ := NewestCopied(name, rows)
	var out []string
	for _, r := range rows {
		snap, ok := strings.CutPrefix(r.Name, name+"@")
		if ok && migrationSnapshot(snap) && r.GUID != strconv.FormatUint(newest, 10) {
			out = append(out, r.Name)
		}
	}
	return out
}

// HoldsFinal reports whether a copy's newest snapshot (rows, one listing
// of it) is the sending node's final one (MigrateFinal, or Migrated): only
// then does its "complete" mean the copy is whole.
func HoldsFinal(name string, rows []zfs.Dataset) bool {
	newest, _ := NewestCopied(name, rows)
	for _, r := range rows {
		if snap, ok := strings.CutPrefix(r.Name, name+"@"); ok && (snap == MigrateFinal || snap == Migrated) &&
			r.GUID == strconv.FormatUint(newest, 10) {
			return true
		}
	}
	return false
}

// NewestCopied is the guid of a copy's newest snapshot (the base of the
// next increment; 0 for none) and the copy's state, from one listing of it
// (rows). The snapshots carry the sending node's names: @migrate-<n> in
// the order they were taken, then @migrate-final.
func NewestCopied(name string, rows []zfs.Dataset) (guid uint64, state State) {
	best := -1
	for _, r := range rows {
		if r.Name == name {
			state = State(r.User.Get(PropState))
			continue
		}
		snap, ok := strings.CutPrefix(r.Name, name+"@")
		if !ok || !migrationSnapshot(snap) {
			continue
		}
		n, err := strconv.Atoi(strings.TrimPrefix(snap, migratePrefix))
		if err != nil { // final, or migrated
			n = int(^uint(0) >> 1)
		}
		if g, err := strconv.ParseUint(r.GUID, 10, 64); err == nil && n > best {
			guid, best = g, n
		}
	}
	return guid, state
}

// Settled reports whether the replacement holds slot s, its Slot as just
// read: it claimed the copy (the claim renames the copy onto the slot and
// records the replacement as its holder, in one plan under the copy's
// lock), or started on the empty slot. Either way nothing more is pulled,
// though Nomad still shows the replacement pending until its task runs: a
// pull then would bring a second copy that no one claims.
func (mg Migration) Settled(s Slot) bool {
	return s.Exists && s.Holder == mg.Replacement.ID
}

// Migration is one copy this node is to pull: the data of allocation
// Previous's slot PrevSlot on node Node, for Replacement's slot Slot of
// class Class, into ParkedName.
type Migration struct {
	Class, Slot string
	Replacement Alloc
	Previous    Alloc
	PrevSlot    string
	Node        string
	ParkedName  string
}

// Migrations lists the copies this node is to pull now: for each
// allocation of snap not started yet and meant to run, in a class that
// migrates, whose previous allocation ran on another node (snap.Others),
// one per slot it pairs with the previous one's (Predecessor). need lists
// the previous allocations to look up first: neither this node's nor
// looked up yet.
func Migrations(cfg *Config, snap *Snapshot) (out []Migration, need []string) {
	if snap == nil {
		return nil, nil
	}
	for _, b := range snap.Allocs {
		if b.PreviousAllocation == "" || b.ClientTerminal() || b.ServerTerminal() || anyRunning([]Alloc{b}) || !migrates(cfg, b) {
			continue
		}
		if _, local := localAlloc(snap, b.PreviousAllocation); local {
			continue // a replacement on the same node: sticky.go
		}
		prev, known := findAlloc(snap, b.PreviousAllocation)
		switch {
		case !known:
			need = append(need, b.PreviousAllocation)
			continue
		case prev.NodeID == "" || prev.NodeID == snap.NodeID:
			continue
		}
		for _, d := range b.Devices {
			c := cfg.Class(d.Name)
			if d.Vendor != Vendor || d.Type != DeviceType || !cfg.HasClass(d.Name) || !c.Sticky || !c.Migrate.Enabled {
				continue
			}
			for _, id := range d.IDs {
				if _, prevSlot, ok := Predecessor(c, b, id, snap); ok {
					out = append(out, Migration{Class: c.Name, Slot: id, Replacement: b, Previous: prev, PrevSlot: prevSlot,
						Node: prev.NodeID, ParkedName: cfg.ParkedName(c.Name, prev.ID, prevSlot)})
				}
			}
		}
	}
	return out, need
}

// migrates reports whether a holds a slot of a class whose data follows
// its replacement across nodes.
func migrates(cfg *Config, a Alloc) bool {
	for _, d := range a.Devices {
		if c := cfg.Class(d.Name); d.Vendor == Vendor && d.Type == DeviceType && cfg.HasClass(d.Name) && c.Sticky && c.Migrate.Enabled {
			return true
		}
	}
	return false
}

// localAlloc finds allocation id among this node's own.
func localAlloc(snap *Snapshot, id string) (Alloc, bool) {
	if snap.idx != nil {
		if i, ok := snap.idx.byID[id]; ok {
			return snap.Allocs[i], true
		}
		return Alloc{}, false
	}
	for _, a := range snap.Allocs {
		if a.ID == id {
			return a, true
		}
	}
	return Alloc{}, false
}
