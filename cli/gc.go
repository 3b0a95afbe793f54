package cli

import (
	"context"
	"fmt"
	"slices"
	"time"

	"github.com/nomad-device-zfs/nomad-device-zfs/hooks"
	"github.com/nomad-device-zfs/nomad-device-zfs/model"
)

const gcHelp = `
Destroy the retained data (release policy snapshot) that is past its
retention, and the oldest beyond a class's retain_max, by the plugin's own
rule. The plugin prunes by the same rule on every pass; gc applies it now,
with the configuration as it is in the files (e.g. a retain_max lowered
before the agent is restarted). Only retained datasets are touched, never a
slot.`

type gcReport struct {
	DryRun bool      `json:"dry_run"`
	Pruned []gcEntry `json:"pruned"`
	Error  string    `json:"error,omitempty"`
}

// gcEntry is a retained dataset as status shows it, and what gc did.
type gcEntry struct {
	retainedJSON
	// Why: "expired", or "beyond retain_max N".
	Why       string `json:"why"`
	Destroyed bool   `json:"destroyed"`
	Error     string `json:"error,omitempty"`
}

func runGC(ctx context.Context, e *env, args []string) int {
	fs := newFlags(e, "gc", "", gcHelp)
	var cf commonFlags
	cf.register(fs)
	dryRun := fs.Bool("dry-run", false, "List what would be destroyed; destroy nothing.")
	if code, done := parseNoArgs(e, fs, args); done {
		return code
	}
	rep := &gcReport{DryRun: *dryRun, Pruned: []gcEntry{}}
	code := gc(ctx, e, cf.configs, rep)
	if cf.json {
		if err := printJSON(e.stdout, rep); err != nil {
			return 1
		}
		return code
	}
	if rep.Error != "" {
		fmt.Fprintf(e.stderr, "✗ %s\n", rep.Error)
		return code
	}
	rep.print(e, e.clock())
	return code
}

func gc(ctx context.Context, e *env, configs []string, rep *gcReport) int {
	_, st, err := loadSettings(configs)
	if err != nil {
		rep.Error = err.Error()
		return 1
	}
	z := e.zfs(st.ZFSTimeout)
	v, err := hooks.Inspect(ctx, &st.Slots, z)
	if err != nil {
		rep.Error = fmt.Sprintf("cannot read the retained data: %v", err)
		return 1
	}
	now := e.clock()
	code := 0
	// A removed class's retained data (View.Removed) expires as recorded.
	classes := append(slices.Clip(v.Classes), v.Removed...)
	for ci := range classes {
		cv := &classes[ci]
		for _, p := range model.RetainedDue(cv.Class.Release, cv.Retained, now) {
			r := p.Retained
			ent := gcEntry{retainedJSON: newRetainedJSON(&st.Slots, cv.Class.Name, r), Why: "expired"}
			if !p.Expired {
				ent.Why = fmt.Sprintf("beyond retain_max %d", cv.Class.Release.RetainMax)
			}
			if !rep.DryRun {
				if err := hooks.DestroyRetained(ctx, &st.Slots, z, r); err != nil {
					ent.Error = err.Error()
					code = 1
				} else {
					ent.Destroyed = true
				}
			}
			rep.Pruned = append(rep.Pruned, ent)
		}
	}
	return code
}

func (r *gcReport) print(e *env, now time.Time) {
	w := e.stdout
	if len(r.Pruned) == 0 {
		fmt.Fprintln(w, "No retained data is past its retention or beyond retain_max.")
		return
	}
	rows := make([][]string, 0, len(r.Pruned))
	for _, p := range r.Pruned {
		if !r.DryRun && !p.Destroyed {
			continue
		}
		why := p.Why
		if p.Expires != nil && p.Why == "expired" {
			why = until(*p.Expires, now)
		}
		row := []string{p.Dataset, p.Class, short(p.Holder), p.Outcome, "", why, size(p.Used)}
		if p.Since != nil {
			row[4] = ago(*p.Since, now)
		}
		rows = append(rows, row)
	}
	verb := "Destroyed"
	if r.DryRun {
		verb = "Would destroy (dry run)"
	}
	fmt.Fprintf(w, "%s %d retained dataset(s)\n", verb, len(rows))
	if len(rows) > 0 {
		table(w, []string{"Dataset", "Class", "Allocation", "Outcome", "Since", "Why", "Used"}, rows)
	}
	for _, p := range r.Pruned {
		if p.Error != "" {
			fmt.Fprintf(e.stderr, "✗ %s: %s\n", p.Dataset, p.Error)
		}
	}
}
