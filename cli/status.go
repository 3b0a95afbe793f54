package cli

import (
	"context"
	"errors"
	"fmt"
	"io"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/nomad-device-zfs/nomad-device-zfs/allocwatch"
	"github.com/nomad-device-zfs/nomad-device-zfs/hooks"
	"github.com/nomad-device-zfs/nomad-device-zfs/internal/nomadapi"
	"github.com/nomad-device-zfs/nomad-device-zfs/model"
	"github.com/nomad-device-zfs/nomad-device-zfs/zfs"
)

const statusHelp = `
Show every parent dataset with its pool's health, then the plugin's slots by
class, read from ZFS as the plugin's own scan reads them (one zfs list per
parent): state, generation, holder allocation with its job, task and status
(asked from the Nomad API when it answers), since when, space used and
quota; then the retained data with its expiry.`

type statusReport struct {
	// Parent, Pool and Problem are the block's parent's; Parents has every
	// parent, the block's first.
	Parent        string         `json:"parent"`
	Pool          *poolJSON      `json:"pool,omitempty"`
	Problem       string         `json:"problem,omitempty"`
	Parents       []parentJSON   `json:"parents"`
	NomadAPI      string         `json:"nomad_api"`
	NomadAPIError string         `json:"nomad_api_error,omitempty"`
	ScannedAt     time.Time      `json:"scanned_at"`
	Slots         []slotJSON     `json:"slots"`
	Retained      []retainedJSON `json:"retained"`
	// Parked is sticky data waiting for its allocation's replacement.
	Parked []retainedJSON `json:"parked"`
	// Replicas are the copies this node keeps of other nodes' held slots
	// (issue 30, docs/node-loss.md).
	Replicas []replicaJSON `json:"replicas"`
}

// replicaJSON is one replica: whose data (its source allocation and that
// allocation's slot on its own node), its newest snapshot's number (0
// while the first copy is still arriving) and the space it uses.
type replicaJSON struct {
	Class   string `json:"class"`
	Dataset string `json:"dataset"`
	Source  string `json:"alloc_id,omitempty"`
	Slot    string `json:"slot,omitempty"`
	Newest  int    `json:"newest"`
	Used    uint64 `json:"used"`
}

// parentJSON is one parent dataset: its pool, its problem (every slot of
// its classes is unhealthy while it has one), its classes, and the class
// datasets left below it by a class now below another parent.
type parentJSON struct {
	Parent  string    `json:"parent"`
	Pool    *poolJSON `json:"pool,omitempty"`
	Problem string    `json:"problem,omitempty"`
	Classes []string  `json:"classes"`
	Moved   []string  `json:"moved,omitempty"`
}

type poolJSON struct {
	Name     string `json:"name"`
	Health   string `json:"health"`
	ReadOnly bool   `json:"read_only"`
	Free     uint64 `json:"free"`
}

type slotJSON struct {
	Class   string `json:"class"`
	ID      string `json:"id"`
	Dataset string `json:"dataset"`
	// State is ready, held, releasing, or missing (not created) or foreign
	// (a dataset the plugin does not own).
	State      string `json:"state"`
	Generation int    `json:"generation"`
	Healthy    bool   `json:"healthy"`
	// Orphan: the configuration no longer has the slot; it goes once its
	// holder has ended.
	Orphan bool       `json:"orphan,omitempty"`
	Reason string     `json:"reason,omitempty"`
	Since  *time.Time `json:"since,omitempty"`
	Used   uint64     `json:"used"`
	Quota  uint64     `json:"quota"`
	Holder *holder    `json:"holder,omitempty"`
}

type retainedJSON struct {
	Class   string `json:"class"`
	Dataset string `json:"dataset"`
	// State is parked data's, as status shows it: parked, or where a
	// migration to or from another node is (parkedState).
	State   string     `json:"state,omitempty"`
	Holder  string     `json:"alloc_id,omitempty"`
	Outcome string     `json:"outcome,omitempty"`
	Since   *time.Time `json:"since,omitempty"`
	Expires *time.Time `json:"expires,omitempty"`
	Used    uint64     `json:"used"`
	// Problem says what keeps it from being pruned.
	Problem string `json:"problem,omitempty"`
}

func newRetainedJSON(cfg *model.Config, class string, r model.Retained) retainedJSON {
	return retainedJSON{Class: class, Dataset: r.Dataset, Holder: r.Holder, Outcome: r.Outcome,
		Since: timePtr(r.Since), Expires: timePtr(r.Expires), Used: r.Info.Used, Problem: r.Problem(cfg)}
}

// parkedState says where parked data is in its life: this node's, waiting
// for a replacement here; sent to or copied for another node's
// (model/migrate.go).
func parkedState(r model.Retained) string {
	switch {
	case r.State == model.StateReceiving:
		return "receiving a copy from its node"
	case r.Copy():
		return "copy received, for its replacement here"
	case r.Migrated():
		return "copied to its replacement's node"
	case r.FinalSent():
		return "final copy sent to its replacement's node"
	}
	return "parked"
}

func runStatus(ctx context.Context, e *env, args []string) int {
	fs := newFlags(e, "status", "", statusHelp)
	var cf commonFlags
	cf.register(fs)
	var af apiFlags
	af.register(fs)
	if code, done := parseNoArgs(e, fs, args); done {
		return code
	}
	_, st, err := loadSettings(cf.configs)
	if err != nil {
		fmt.Fprintf(e.stderr, "✗ %v\n", err)
		return 1
	}
	view, err := hooks.Inspect(ctx, &st.Slots, e.zfs(st.ZFSTimeout))
	if err != nil {
		fmt.Fprintf(e.stderr, "✗ cannot read the slots: %v\n", err)
		return 1
	}
	rep := buildStatus(ctx, st, view, af.apply(st.Nomad))
	if cf.json {
		if err := printJSON(e.stdout, rep); err != nil {
			return 1
		}
		return 0
	}
	rep.print(e.stdout, e.clock())
	return 0
}

// buildStatus turns a view into the report, asking Nomad about holders.
func buildStatus(ctx context.Context, st *settings, v *model.View, nc allocwatch.Config) *statusReport {
	rep := &statusReport{Parent: st.Slots.Parent, Problem: v.Problem, ScannedAt: v.ScannedAt,
		NomadAPI: address(nc), Slots: []slotJSON{}, Retained: []retainedJSON{}, Parked: []retainedJSON{},
		Replicas: []replicaJSON{}}
	rep.Pool = newPoolJSON(v.Pool)
	for _, p := range v.Parents {
		pj := parentJSON{Parent: p.Dataset, Pool: newPoolJSON(p.Pool), Problem: p.Problem, Classes: []string{}, Moved: p.Moved}
		for _, c := range st.Slots.Classes {
			if st.Slots.ClassParent(c.Name) == p.Dataset {
				pj.Classes = append(pj.Classes, c.Name)
			}
		}
		rep.Parents = append(rep.Parents, pj)
	}
	n, err := newNomadAPI(nc)
	if err != nil {
		rep.NomadAPIError = err.Error()
	}
	classes := append(slices.Clip(v.Classes), v.Removed...)
	for ci := range classes {
		cv := &classes[ci]
		for _, s := range append(slices.Clip(cv.Slots), cv.Orphans...) {
			sj := slotJSON{Class: cv.Class.Name, ID: s.ID, Dataset: s.Dataset, State: string(s.State),
				Generation: s.Generation, Healthy: s.Healthy, Reason: s.Reason, Orphan: s.Orphan,
				Used: s.Info.Used, Quota: s.Info.Quota, Since: timePtr(s.Since)}
			switch {
			case s.Foreign:
				sj.State = "foreign"
			case !s.Exists:
				sj.State = "missing"
			}
			if s.Exists && s.Holder != "" && s.State != model.StateReady {
				h := holder{ID: s.Holder}
				if n != nil {
					h = n.holder(ctx, s.Holder, s.ID)
				}
				sj.Holder = &h
			}
			rep.Slots = append(rep.Slots, sj)
		}
		for _, r := range cv.Retained {
			rep.Retained = append(rep.Retained, newRetainedJSON(&st.Slots, cv.Class.Name, r))
		}
		for _, r := range cv.Parked {
			p := newRetainedJSON(&st.Slots, cv.Class.Name, r)
			p.State = parkedState(r)
			rep.Parked = append(rep.Parked, p)
		}
		for _, r := range cv.Replicas {
			rep.Replicas = append(rep.Replicas, replicaJSON{Class: cv.Class.Name, Dataset: r.Dataset, Source: r.Source, Slot: r.Slot,
				Newest: r.Newest, Used: r.Info.Used})
		}
	}
	if n != nil && n.down != nil {
		rep.NomadAPIError = apiProblem(n.addr, n.down)
	}
	return rep
}

func newPoolJSON(p *zfs.Pool) *poolJSON {
	if p == nil {
		return nil
	}
	return &poolJSON{Name: p.Name, Health: p.Health, ReadOnly: p.ReadOnly, Free: p.Free}
}

func (r *statusReport) print(w io.Writer, now time.Time) {
	var kv [][2]string
	for _, p := range r.Parents {
		parent := p.Parent
		if len(r.Parents) > 1 {
			// Which classes each parent's health is the health of.
			parent += " (" + classList(p.Classes) + ")"
		}
		kv = append(kv, [2]string{"Parent", parent})
		if p := p.Pool; p != nil {
			state := p.Health
			if p.ReadOnly {
				state += ", read-only"
			}
			kv = append(kv, [2]string{"Pool", fmt.Sprintf("%s (%s, %s free)", p.Name, state, size(p.Free))})
		}
		if p.Problem != "" {
			kv = append(kv, [2]string{"Problem", p.Problem})
		}
		for _, m := range p.Moved {
			kv = append(kv, [2]string{"Left behind", m + " (its class is below another parent now; the plugin leaves it alone: destroy it once no task uses it)"})
		}
	}
	api := r.NomadAPI
	if r.NomadAPIError != "" {
		api += " (" + r.NomadAPIError + "; job and task not shown)"
	}
	kv = append(kv, [2]string{"Nomad API", api})
	keyValues(w, kv)

	fmt.Fprintln(w, "\nSlots")
	rows := make([][]string, 0, len(r.Slots))
	var unhealthy [][]string
	for _, s := range r.Slots {
		row := []string{s.ID, s.Class, s.State, "", "", "", "", "", "", "", "", s.Dataset}
		if s.Orphan {
			row[2] += " (orphan)"
		}
		if s.State != "missing" && s.State != "foreign" {
			row[3] = strconv.Itoa(s.Generation)
			row[9], row[10] = size(s.Used), quota(s.Quota)
		}
		if h := s.Holder; h != nil {
			row[4] = short(h.ID)
			switch {
			case errors.Is(h.Err, nomadapi.ErrPermissionDenied):
				row[7] = "denied"
			case h.Err != nil:
			case !h.Found:
				row[7] = "gone"
			default:
				row[5], row[6], row[7] = h.JobID, strings.Join(h.Tasks, ","), h.ClientStatus
			}
		}
		if s.Since != nil {
			row[8] = ago(*s.Since, now)
		}
		rows = append(rows, row)
		if !s.Healthy {
			unhealthy = append(unhealthy, []string{s.ID, s.Reason})
		}
	}
	table(w, []string{"ID", "Class", "State", "Gen", "Allocation", "Job", "Task", "Status", "Since", "Used", "Quota", "Dataset"}, rows)
	if len(unhealthy) > 0 {
		fmt.Fprintln(w, "\nNot offered to the scheduler")
		table(w, []string{"ID", "Reason"}, unhealthy)
	}

	if len(r.Parked) > 0 {
		fmt.Fprintln(w, "\nParked for a replacement (sticky): its allocation's replacement gets it, here or, with migrate, on its node")
		rows = rows[:0]
		for _, p := range r.Parked {
			row := []string{p.Dataset, p.Class, p.State, short(p.Holder), "", "never", size(p.Used)}
			if p.Since != nil {
				row[4] = ago(*p.Since, now)
			}
			if p.Expires != nil {
				row[5] = until(*p.Expires, now)
			}
			rows = append(rows, row)
		}
		table(w, []string{"Dataset", "Class", "State", "Allocation", "Since", "Waits until", "Used"}, rows)
	}

	if len(r.Replicas) > 0 {
		fmt.Fprintln(w, "\nReplicas of other nodes' slots: a replacement of their allocation may start from one if its node is lost")
		rows = rows[:0]
		for _, rp := range r.Replicas {
			newest := "receiving"
			if rp.Newest > 0 {
				newest = "@" + model.ReplicaSnapshot(rp.Newest)
			}
			rows = append(rows, []string{rp.Dataset, rp.Class, short(rp.Source), rp.Slot, newest, size(rp.Used)})
		}
		table(w, []string{"Dataset", "Class", "Allocation", "Slot", "Newest", "Used"}, rows)
	}

	fmt.Fprintln(w, "\nRetained")
	if len(r.Retained) == 0 {
		fmt.Fprintln(w, "No retained data")
		return
	}
	rows = rows[:0]
	for _, rt := range r.Retained {
		row := []string{rt.Dataset, rt.Class, short(rt.Holder), rt.Outcome, "", "never", size(rt.Used)}
		if rt.Since != nil {
			row[4] = ago(*rt.Since, now)
		}
		if rt.Expires != nil {
			row[5] = until(*rt.Expires, now)
		}
		rows = append(rows, row)
	}
	table(w, []string{"Dataset", "Class", "Allocation", "Outcome", "Since", "Expires", "Used"}, rows)
	for _, rt := range r.Retained {
		if rt.Problem != "" {
			fmt.Fprintf(w, "! %s: %s\n", rt.Dataset, rt.Problem)
		}
	}
}

// classList names classes for people: "class fast", "classes bulk, scratch",
// "no class".
func classList(classes []string) string {
	switch len(classes) {
	case 0:
		return "no class"
	case 1:
		return "class " + classes[0]
	}
	return "classes " + strings.Join(classes, ", ")
}

func timePtr(t time.Time) *time.Time {
	if t.IsZero() {
		return nil
	}
	return &t
}
