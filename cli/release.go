package cli

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"time"

	"github.com/nomad-device-zfs/nomad-device-zfs/hooks"
	"github.com/nomad-device-zfs/nomad-device-zfs/model"
)

const releaseHelp = `
Ask the running plugin to release slot <slot-id> (e.g. scratch-2) as if its
holder had ended: by its class's release policy (destroy, rollback or
snapshot; on_failure does not apply), then the slot is ready again.

This command changes one thing: it records in the slot's ZFS properties that
its release is asked for (one zfs set: state releasing, outcome operator).
The plugin, which owns the slots, carries the release out on its next pass,
as it resumes a release after a crash. The command then waits until the slot
is ready again and prints its new generation.

It refuses while the holder may still run: Nomad says it is pending, running
or unknown, the local client still has a lost allocation, or Nomad cannot be
asked. -force releases anyway: the holder's data goes while it may still be
in use.`

type releaseReport struct {
	Slot               string  `json:"slot"`
	Dataset            string  `json:"dataset,omitempty"`
	Class              string  `json:"class,omitempty"`
	State              string  `json:"state,omitempty"`
	PreviousGeneration int     `json:"previous_generation,omitempty"`
	Holder             *holder `json:"holder,omitempty"`
	Policy             string  `json:"policy,omitempty"`
	// Safe: Nomad says the holder has ended; Why says what it said.
	Safe     bool   `json:"safe"`
	Why      string `json:"why,omitempty"`
	Forced   bool   `json:"forced,omitempty"`
	Marked   bool   `json:"marked"`
	Ready    bool   `json:"ready"`
	Gen      int    `json:"generation,omitempty"`
	Retained string `json:"retained_as,omitempty"`
	Error    string `json:"error,omitempty"`
}

func runRelease(ctx context.Context, e *env, args []string) int {
	fs := newFlags(e, "release", "<slot-id>", releaseHelp)
	var cf commonFlags
	cf.register(fs)
	force := fs.Bool("force", false, "Release even if the holder may still run (its data is lost).")
	wait := fs.Duration("wait", 2*time.Minute, "Longest time to wait for the plugin to finish the release.")
	detach := fs.Bool("detach", false, "Do not wait for the plugin; return once the release is asked for.")
	var af apiFlags
	af.register(fs)
	if code, done := parse(fs, args); done {
		return code
	}
	if fs.NArg() != 1 {
		fs.Usage()
		return 1
	}
	r := &releaser{e: e, rep: &releaseReport{Slot: fs.Arg(0)}, json: cf.json}
	code := r.run(ctx, cf.configs, &af, *force, *wait, *detach)
	if r.json {
		if err := printJSON(e.stdout, r.rep); err != nil {
			return 1
		}
	}
	return code
}

// releaser runs one release and keeps its report.
type releaser struct {
	e    *env
	rep  *releaseReport
	json bool
}

// say prints a line for people; -json prints only the report.
func (r *releaser) say(format string, a ...any) {
	if !r.json {
		fmt.Fprintf(r.e.stdout, format+"\n", a...)
	}
}

// fail records the error and prints its one line.
func (r *releaser) fail(format string, a ...any) int {
	r.rep.Error = fmt.Sprintf(format, a...)
	if !r.json {
		fmt.Fprintf(r.e.stderr, "✗ %s\n", r.rep.Error)
	}
	return 1
}

func (r *releaser) run(ctx context.Context, configs []string, af *apiFlags, force bool, wait time.Duration, detach bool) int {
	_, st, err := loadSettings(configs)
	if err != nil {
		return r.fail("%v", err)
	}
	z := r.e.zfs(st.ZFSTimeout)
	id := r.rep.Slot
	seen, err := hooks.ReadSlot(ctx, &st.Slots, z, id)
	switch {
	case errors.Is(err, hooks.ErrUnknownSlot):
		return r.fail("no slot %q in this configuration (parent %s; slots %s)", id, strings.Join(st.Slots.Parents(), ", "), slotRange(&st.Slots))
	case err != nil:
		return r.fail("cannot read slot %s: %v", id, err)
	}
	class := st.Slots.Class(seen.Class)
	r.rep.Dataset, r.rep.Class, r.rep.State, r.rep.PreviousGeneration = seen.Dataset, seen.Class, string(seen.State), seen.Generation
	if err := model.CheckMarkReleasing(seen); err != nil && seen.State != model.StateReleasing {
		return r.fail("%v", err) // an ongoing release is reported below, not refused
	}

	policy, plan := describePolicy(class, seen, st.Slots.RetainedName(seen))
	r.rep.Policy = string(policy)
	if policy == model.PolicySnapshot {
		r.rep.Retained = st.Slots.RetainedName(seen)
	}
	now := r.e.clock()
	kv := [][2]string{
		{"Slot", id}, {"Dataset", seen.Dataset},
		{"State", fmt.Sprintf("%s, generation %d, since %s", seen.State, seen.Generation, ago(seen.Since, now))},
	}
	if seen.State == model.StateReleasing {
		r.rep.Safe = true
		if !r.json {
			keyValues(r.e.stdout, append(kv, [2]string{"Outcome", seen.Outcome}))
		}
		r.say("\nAlready releasing (outcome %s): the plugin finishes it on its next pass.", seen.Outcome)
	} else {
		n, nerr := newNomadAPI(af.apply(st.Nomad))
		h, safe, why := checkHolder(ctx, n, nerr, seen)
		r.rep.Holder, r.rep.Safe, r.rep.Why = h, safe, why
		kv = append(kv, [2]string{"Holder", describeHolder(seen.Holder, h)}, [2]string{"Policy", fmt.Sprintf("%s: %s", policy, plan)})
		if !r.json {
			keyValues(r.e.stdout, kv)
			fmt.Fprintln(r.e.stdout)
		}
		switch {
		case !safe && !force:
			return r.fail("refusing to release %s: %s. -force releases it anyway, and its holder's data goes while it may still be in use", id, why)
		case !safe:
			r.rep.Forced = true
			r.say("! forced: %s", why)
		default:
			r.say("✓ %s", why)
		}
		if err := hooks.MarkReleasing(ctx, &st.Slots, z, seen, now); err != nil {
			if errors.Is(err, hooks.ErrSlotChanged) {
				return r.fail("%v; nothing changed: look again (nomad-device-zfs-ctl status)", err)
			}
			return r.fail("cannot mark %s releasing: %v", seen.Dataset, err)
		}
		r.rep.Marked = true
		r.say("✓ marked %s releasing (outcome %s)", id, model.OutcomeOperator)
	}
	if detach {
		r.say("The plugin releases it on its next pass (scan_interval %s).", st.Slots.ScanInterval)
		return 0
	}
	r.say("Waiting up to %s for the plugin (it scans every %s)...", wait, st.Slots.ScanInterval)
	return r.wait(ctx, st, seen, wait)
}

// wait polls the slot until the plugin has released it: a newer
// generation that is not releasing.
func (r *releaser) wait(ctx context.Context, st *settings, seen model.Slot, wait time.Duration) int {
	z := r.e.zfs(st.ZFSTimeout)
	poll := r.e.poll
	if poll <= 0 {
		poll = time.Second
	}
	start := r.e.clock()
	parent := ctx
	ctx, cancel := context.WithTimeout(ctx, wait)
	defer cancel()
	last := seen
	for {
		s, err := hooks.ReadSlot(ctx, &st.Slots, z, seen.ID)
		if err == nil {
			last = s
			if s.Exists && s.Generation > seen.Generation && s.State != model.StateReleasing {
				r.rep.Ready, r.rep.Gen = true, s.Generation
				after := span(r.e.clock().Sub(start))
				if s.State == model.StateReady {
					r.say("✓ %s is ready again: generation %d (after %s)", seen.ID, s.Generation, after)
				} else {
					r.say("✓ %s released: generation %d, already %s by its next allocation (after %s)", seen.ID, s.Generation, s.State, after)
				}
				return 0
			}
		}
		select {
		case <-ctx.Done():
			if parent.Err() != nil {
				return r.fail("interrupted while %s is %s: the release is asked for, and the plugin finishes it on its next pass", seen.ID, last.State)
			}
			state := string(last.State)
			if !last.Exists {
				state = "being re-created"
			}
			return r.fail("%s is still %s after %s: the plugin resumes the release on its next pass once its allocation "+
				"watcher has an answer from Nomad; if it does not, check the agent's log for nomad-device-zfs (a busy dataset is retried until it is free)",
				seen.ID, state, span(r.e.clock().Sub(start)))
		case <-time.After(poll):
		}
	}
}

// checkHolder asks Nomad about the slot's holder and says whether it has
// definitely ended, by the plugin's own rule (model.Judge).
func checkHolder(ctx context.Context, n *nomadAPI, nerr error, s model.Slot) (*holder, bool, string) {
	id := s.Holder
	if id == "" {
		return nil, false, "the slot records no holder, so Nomad cannot be asked whether it still runs"
	}
	if nerr != nil {
		return &holder{ID: id, Err: nerr, Error: nerr.Error()}, false,
			fmt.Sprintf("cannot ask Nomad whether allocation %s still runs: %v", short(id), nerr)
	}
	h := n.holder(ctx, id, s.ID)
	if h.Err != nil {
		return &h, false, fmt.Sprintf("cannot tell whether allocation %s still runs: %s", short(id), apiProblem(n.addr, h.Err))
	}
	what := fmt.Sprintf("allocation %s (job %s) is %s", short(id), h.JobID, h.ClientStatus)
	if !h.Found {
		what = fmt.Sprintf("allocation %s no longer exists in Nomad (garbage-collected)", short(id))
	}
	switch live, _ := model.Judge(h.alloc, h.Found); live {
	case model.Ended:
		return &h, true, what
	case model.AskClient:
		running, err := n.runningLocally(ctx, id)
		switch {
		case err != nil:
			return &h, false, fmt.Sprintf("%s, and this node's client cannot be asked whether it still runs it: %v", what, err)
		case running:
			return &h, false, what + ", but this node's client still has it (Nomad keeps it until the servers garbage-collect it)"
		}
		return &h, true, what + " and no longer on this node"
	}
	if h.alloc.ServerTerminal() {
		what += " (stopping)"
	}
	return &h, false, what
}

func describeHolder(id string, h *holder) string {
	switch {
	case id == "":
		return "none recorded"
	case h == nil || h.Err != nil:
		return short(id) + " (Nomad not asked)"
	case !h.Found:
		return short(id) + " (no longer in Nomad)"
	}
	return fmt.Sprintf("%s (job %s, task %s): %s", short(id), h.JobID, strings.Join(h.Tasks, ","), h.ClientStatus)
}

// describePolicy says what the plugin will do with the slot's data.
func describePolicy(c model.Class, s model.Slot, retainedAs string) (model.Policy, string) {
	p := c.PolicyFor(s, model.OutcomeOperator)
	switch {
	case p == model.PolicyRollback:
		return p, "rolled back to its @pristine snapshot; the holder's data is lost"
	case p != c.Release.PolicyFor(model.OutcomeOperator):
		return p, "no @pristine snapshot, so destroyed and created afresh; the holder's data is lost"
	case p == model.PolicySnapshot:
		return p, fmt.Sprintf("the holder's data is kept at %s for %s, a fresh slot takes its place", retainedAs, span(c.Release.Retain))
	}
	return p, "destroyed and created afresh; the holder's data is lost"
}

// slotRange lists the configured slot IDs compactly: "scratch-1..4, pg-1".
func slotRange(cfg *model.Config) string {
	parts := make([]string, 0, len(cfg.Classes))
	for _, c := range cfg.Classes {
		if c.Slots == 1 {
			parts = append(parts, model.SlotID(c.Name, 1))
		} else {
			parts = append(parts, fmt.Sprintf("%s..%d", model.SlotID(c.Name, 1), c.Slots))
		}
	}
	return strings.Join(parts, ", ")
}
