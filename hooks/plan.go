package hooks

import (
	"fmt"
	"time"
)

// actionKind is one step that brings the datasets toward the configuration.
type actionKind int

const (
	// createClass creates <parent>/<class>.
	createClass actionKind = iota
	// createSlot creates a ready slot.
	createSlot
	// mountSlot mounts an owned slot that is not mounted.
	mountSlot
	// mountClass mounts an owned class dataset, before any of its slots.
	mountClass
)

func (k actionKind) String() string {
	return [...]string{"create class dataset", "create slot", "mount slot", "mount class dataset"}[k]
}

// action is one zfs command to run, planned from a View.
type action struct {
	kind    actionKind
	class   string
	dataset string
	props   map[string]string
}

// planEnsure lists what to do so every class has its ready slots. It is
// pure. It plans nothing while the view has a node-wide problem, nothing for
// a class whose dataset belongs to someone else, and never touches a foreign
// dataset. Slots that need space up front are planned only while the class
// dataset's available space covers them; the others get a reason instead.
func planEnsure(cfg *Config, v *View, now time.Time) (acts []action, blocked map[string]string) {
	if v.Problem != "" {
		return nil, nil
	}
	blocked = map[string]string{}
	for ci := range v.Classes {
		cv := &v.Classes[ci]
		if cv.Problem != "" {
			continue
		}
		avail := cv.Info.Available
		if cv.Exists && unmounted(&cv.Info) {
			// Top-down: the class dataset first, its slots after it.
			acts = append(acts, action{kind: mountClass, class: cv.Class.Name, dataset: cv.Dataset})
		}
		if !cv.Exists {
			acts = append(acts, action{kind: createClass, class: cv.Class.Name, dataset: cv.Dataset,
				props: map[string]string{PropOwner: cv.Dataset}})
			avail = ^uint64(0) // unknown until created: let zfs decide
		}
		for si := range cv.Slots {
			s := &cv.Slots[si]
			switch {
			case s.Foreign:
			case !s.Exists:
				if need := cv.Class.NeedBytes; need > avail {
					blocked[s.Dataset] = fmt.Sprintf("pool out of space for another slot: %s available under %s, a slot reserves %s",
						humanBytes(avail), cv.Dataset, humanBytes(need))
					continue
				}
				avail -= cv.Class.NeedBytes
				acts = append(acts, action{kind: createSlot, class: cv.Class.Name, dataset: s.Dataset,
					props: newSlotProps(cv.Class, s.Dataset, 1, now)})
			case (s.State == StateReady || s.State == StateHeld) && !s.Mounted && mountable(s.Mountpoint):
				acts = append(acts, action{kind: mountSlot, class: cv.Class.Name, dataset: s.Dataset})
			}
		}
	}
	return acts, blocked
}

// newSlotProps are the properties of a new slot: the class's own and the
// plugin's state, set in the same create so a slot never exists unmarked.
func newSlotProps(c Class, dataset string, generation int, now time.Time) map[string]string {
	props := make(map[string]string, len(c.Properties)+4)
	for k, v := range c.Properties {
		props[k] = v
	}
	for k, v := range slotProps(dataset, generation, now) {
		props[k] = v
	}
	return props
}

func mountable(mountpoint string) bool {
	return mountpoint != "" && mountpoint != "none" && mountpoint != "legacy"
}

// humanBytes prints a size the way zfs list does without -p.
func humanBytes(b uint64) string {
	const unit = 1024
	if b < unit {
		return fmt.Sprintf("%dB", b)
	}
	div, exp := uint64(unit), 0
	for n := b / unit; n >= unit && exp < 5; n /= unit {
		div *= unit
		exp++
	}
	return fmt.Sprintf("%.1f%c", float64(b)/float64(div), "KMGTPE"[exp])
}
