package model

import (
	"fmt"
	"maps"
	"strconv"
	"time"
)

// Snapshot names and the hold tag the lifecycle uses.
const (
	// PristineSnapshot is the snapshot a rollback-policy slot returns to.
	PristineSnapshot = "pristine"
	// RetainedSnapshot is the held snapshot of retained data.
	RetainedSnapshot = "retained"
	// HoldTag is the zfs hold the plugin places on retained snapshots.
	HoldTag = "nomad-device-zfs"
)

// The property sets below are every lifecycle write: the state machine's
// edges, as the ZFS user properties that record them. The Manager only
// carries them out.

// NewSlotProps are the properties of a new ready slot of class c: the
// class's own and the plugin's state, set in the same create or clone so a
// slot never exists unmarked. holderIndex is the CreateIndex of the holder
// whose data the slot replaces (0 for a first creation), so that holder's
// record is not taken for a newer one.
func NewSlotProps(c Class, dataset string, generation int, holderIndex uint64, now time.Time) map[string]string {
	props := make(map[string]string, len(c.Properties)+5)
	maps.Copy(props, c.Properties)
	props[PropOwner] = dataset
	props[PropState] = string(StateReady)
	props[PropGeneration] = strconv.Itoa(generation)
	props[PropSince] = unix(now)
	if holderIndex > 0 {
		props[PropHolderIndex] = strconv.FormatUint(holderIndex, 10)
	}
	return props
}

// ClassProps are the properties of a new class dataset: only the mark.
func ClassProps(dataset string) map[string]string {
	return map[string]string{PropOwner: dataset}
}

// HeldProps record allocation id (placed at createIndex) as the slot's
// holder: ready → held.
func HeldProps(id string, createIndex uint64, now time.Time) map[string]string {
	return map[string]string{
		PropState:       string(StateHeld),
		PropHolder:      id,
		PropHolderIndex: strconv.FormatUint(createIndex, 10),
		PropSince:       unix(now),
	}
}

// ReleasingProps record that the holder ended and its release began:
// held (or ready with an unrecorded holder's data) → releasing. From here a
// crash resumes the release.
func ReleasingProps(holder string, holderIndex uint64, outcome string, now time.Time) map[string]string {
	return map[string]string{
		PropState:       string(StateReleasing),
		PropHolder:      holder,
		PropHolderIndex: strconv.FormatUint(holderIndex, 10),
		PropOutcome:     outcome,
		PropSince:       unix(now),
	}
}

// OperatorReleaseProps are what `nomad-device-zfs-ctl release` writes on a slot
// it read as seen: releasing, outcome operator, the holder as recorded.
func OperatorReleaseProps(seen Slot, now time.Time) map[string]string {
	props := map[string]string{
		PropState:   string(StateReleasing),
		PropOutcome: OutcomeOperator,
		PropSince:   unix(now),
	}
	if seen.Holder != "" {
		props[PropHolder] = seen.Holder
	}
	return props
}

// RolledBackProps make a rolled-back slot ready again, one generation on.
// The holder and outcome are cleared separately (zfs inherit).
func RolledBackProps(generation int, holderIndex uint64, now time.Time) map[string]string {
	return map[string]string{
		PropState:       string(StateReady),
		PropGeneration:  strconv.Itoa(generation),
		PropHolderIndex: strconv.FormatUint(holderIndex, 10),
		PropSince:       unix(now),
	}
}

// ClearedOnReady are the properties slot s no longer carries once it is
// ready again: its holder and outcome, and what an interrupted retain left
// (the name it was to be renamed to, and that data's expiry). Only those it
// carries, each a zfs process: as the slot was last read, and the holder
// and outcome a releasing mark wrote (marked).
func ClearedOnReady(s Slot, marked bool) []string {
	var props []string
	for _, p := range []string{PropHolder, PropOutcome, PropRetainAs, PropExpires} {
		written := marked && (p == PropHolder || p == PropOutcome)
		if written || s.Info.User.Get(p) != "" {
			props = append(props, p)
		}
	}
	return props
}

// RetainAsProps mark a releasing slot with the name it is about to be
// renamed to and when that data expires, before the rename: a crash between
// the two leaves data that is still recognisably the plugin's.
func RetainAsProps(aside string, expires time.Time) map[string]string {
	return map[string]string{PropRetainAs: aside, PropExpires: unix(expires)}
}

// RetainedProps make a renamed slot a retained dataset of its own.
func RetainedProps(aside string, now time.Time) map[string]string {
	return map[string]string{
		PropOwner: aside,
		PropState: string(StateRetained),
		PropSince: unix(now),
	}
}

// Sticky data (sticky.go): a park, and a claim.

// ParkAsProps mark a releasing slot with the name its data is about to be
// parked under, before the rename, so that a crash between the two leaves
// data that is still recognisably the plugin's.
func ParkAsProps(aside string) map[string]string {
	return map[string]string{PropRetainAs: aside}
}

// ParkedProps make a renamed slot parked data of its own, waiting for a
// replacement until expires.
func ParkedProps(aside string, now, expires time.Time) map[string]string {
	return map[string]string{
		PropOwner:   aside,
		PropState:   string(StateParked),
		PropSince:   unix(now),
		PropExpires: unix(expires),
	}
}

// RetainedParkedProps make parked data that no replacement claimed
// retained data of the snapshot policy, kept until expires.
func RetainedParkedProps(name string, now, expires time.Time) map[string]string {
	props := RetainedProps(name, now)
	props[PropExpires] = unix(expires)
	return props
}

// ClaimAsProps mark parked data with the slot it is about to be renamed
// onto, before the rename; PropOwner names it until the rename, PropRetainAs
// after it. They also finish data a crash left half-parked (PropOwner still
// naming the slot it came from, its state the release's): without its own
// owner mark it would be nobody's once PropRetainAs names the slot, and
// left for good if the rename then failed; renamed in the releasing state,
// a pass would take it for a slot to release, not a claim to finish.
func ClaimAsProps(parked, slotDataset string) map[string]string {
	return map[string]string{PropOwner: parked, PropState: string(StateParked), PropRetainAs: slotDataset}
}

// ClaimedProps make claimed data, renamed onto slot dataset, that slot,
// held by caller; generation follows the slot's it replaced.
func ClaimedProps(dataset string, caller Alloc, generation int, now time.Time) map[string]string {
	return map[string]string{
		PropOwner:       dataset,
		PropState:       string(StateHeld),
		PropHolder:      caller.ID,
		PropHolderIndex: strconv.FormatUint(caller.CreateIndex, 10),
		PropGeneration:  strconv.Itoa(generation),
		PropSince:       unix(now),
	}
}

// ReleaseIndex is the holder index a release records: the newer of the
// slot's and the ending holder's.
func ReleaseIndex(s Slot, holderCreateIndex uint64) uint64 {
	return max(s.HolderIndex, holderCreateIndex)
}

// CheckMarkReleasing says why an operator's release of the slot read as
// seen cannot be asked for, or nil.
func CheckMarkReleasing(seen Slot) error {
	switch {
	case seen.Foreign:
		return fmt.Errorf("%s exists but is not owned by nomad-device-zfs; not touching it", seen.Dataset)
	case !seen.Exists:
		return fmt.Errorf("%s does not exist: the plugin has not created slot %s (nothing to release)", seen.Dataset, seen.ID)
	case seen.State == StateReady:
		return fmt.Errorf("slot %s is ready (generation %d, no holder): nothing to release", seen.ID, seen.Generation)
	case seen.State == StateReleasing:
		// Marking it again would rewrite its outcome, and so maybe its
		// policy, in the middle of the release.
		return fmt.Errorf("slot %s is already releasing (outcome %s): the plugin finishes it", seen.ID, seen.Outcome)
	}
	return nil
}

func unix(t time.Time) string { return strconv.FormatInt(t.Unix(), 10) }
