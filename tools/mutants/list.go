package main

// bug is one realistic bug: a one-line (or one-statement) mistake an
// engineer could make in the lifecycle's code, as an edit of it.
type bug struct {
	name string
	// why says what the bug does, in the words of the rule it breaks.
	why  string
	file string
	// find must appear exactly once in file; it becomes replace.
	find, replace string
}

// list is every bug the safety net must catch, in every package of the
// lifecycle: the model's rules, the Manager's acts, the watcher, the plugin.
func list() []bug {
	return []bug{
		// model: may this holder still run?
		{name: "lost-is-ended", file: "model/holder.go",
			why:     "a lost holder judged ended, without asking the local client (it may still run on a cut-off node)",
			find:    "case a.ClientStatus == \"lost\":\n\t\treturn AskClient, OutcomeLost",
			replace: "case a.ClientStatus == \"lost\":\n\t\treturn Ended, OutcomeLost"},
		{name: "unknown-is-terminal", file: "model/alloc.go",
			why:     "an unknown allocation (its node cut off) taken as client-terminal",
			find:    "case ClientComplete, ClientFailed, ClientLost:",
			replace: "case ClientComplete, ClientFailed, ClientLost, ClientUnknown:"},
		{name: "gone-is-ended", file: "model/holder.go",
			why:     "a holder the servers no longer know judged ended, without asking the local client",
			find:    "case !found:\n\t\treturn AskClient, OutcomeGone",
			replace: "case !found:\n\t\treturn Ended, OutcomeGone"},
		// model: the Reserve fence.
		{name: "fence-does-not-wait", file: "model/reserve.go",
			why:     "Reserve grants the slot while its previous holder is still stopping",
			find:    "return ReserveDecision{Kind: ReserveWait, Alloc: holder,",
			replace: "return ReserveDecision{Kind: ReserveGrant, Alloc: holder,"},
		{name: "reserve-on-stale-answer", file: "model/reserve.go",
			why:     "Reserve decides on the watcher's last snapshot instead of a fresh answer",
			find:    "if snap == nil || !fresh {",
			replace: "if snap == nil {"},
		{name: "ready-ended-data-kept", file: "model/reserve.go",
			why:     "Reserve hands out a ready slot that holds an ended, unrecorded holder's data",
			find:    "if dirty := newer(r.terminal, s.HolderIndex); len(dirty) > 0 {",
			replace: "if dirty := newer(r.terminal, s.HolderIndex); len(dirty) > 99 {"},
		// model: what a pass does to a slot.
		{name: "wipe-under-running", file: "model/lifecycle.go",
			why:     "a pass releases an ended holder's data from a slot a newer allocation already runs on",
			find:    "if len(dirty) > 0 && !anyRunning(live) {",
			replace: "if len(dirty) > 0 {"},
		{name: "successor-any-task", file: "model/lifecycle.go",
			why:     "a sticky replacement inherits a slot in place whichever task's data it holds",
			find:    "if prev, from, ok := Predecessor(c, a, s.ID, snap); ok && prev.ID == holder.ID && from == origin {",
			replace: "if prev, _, ok := Predecessor(c, a, s.ID, snap); ok && prev.ID == holder.ID && origin != \"\" {"},
		// model: plans.
		{name: "busy-destroy-is-done", file: "model/plan.go",
			why:     "a destroy refused as busy taken as done: the create that follows finds the old dataset",
			find:    "return Op{Command: zfs.Command{Verb: zfs.VerbDestroy, Name: name}, Done: []error{zfs.ErrNotExist}}",
			replace: "return Op{Command: zfs.Command{Verb: zfs.VerbDestroy, Name: name}, Done: []error{zfs.ErrNotExist, zfs.ErrBusy}}"},
		{name: "park-mark-after-rename", file: "model/plan_sticky.go",
			why:     "a park writes its mark after the rename it protects",
			find:    "p.Ops = append(p.Ops, setGoneOK(s.Dataset, ParkAsProps(aside)), rename)",
			replace: "p.Ops = append(p.Ops, rename, setGoneOK(s.Dataset, ParkAsProps(aside)))"},
		{name: "no-releasing-mark", file: "model/policy.go",
			why:     "a sticky release writes no releasing mark before it parks or retains",
			find:    "if c.Sticky {\n\t\treturn true\n\t}",
			replace: "if c.Sticky {\n\t\treturn false\n\t}"},
		{name: "retain-no-hold", file: "model/plan_release.go",
			why:     "retained data's snapshot taken without the plugin's hold",
			find:    "ops = append(ops, setGoneOK(s.Dataset, RetainAsProps(aside, expires)), snapshot, hold)",
			replace: "ops = append(ops, setGoneOK(s.Dataset, RetainAsProps(aside, expires)), snapshot)"},
		// model: ownership and retention.
		{name: "inherited-mark-is-ours", file: "model/ownership.go",
			why:     "an inherited ownership mark (a stranger's child of a slot) taken as the plugin's",
			find:    "return d.User.Get(PropOwner) == d.Name || d.User.Get(PropRetainAs) == d.Name",
			replace: "return d.User.Get(PropOwner) != \"\" || d.User.Get(PropRetainAs) == d.Name"},
		{name: "one-stranger-ignored", file: "model/ownership.go",
			why:     "a slot with one stranger's snapshot below it released anyway",
			find:    "if len(s.Strangers) > 0 {\n\t\treturn fmt.Errorf(\"not released: %s\"",
			replace: "if len(s.Strangers) > 1 {\n\t\treturn fmt.Errorf(\"not released: %s\""},
		{name: "pruned-before-expiry", file: "model/policy.go",
			why:     "retained data destroyed before its expiry",
			find:    "expired := !ret.Expires.IsZero() && now.After(ret.Expires)",
			replace: "expired := !ret.Expires.IsZero() && now.Add(time.Hour).After(ret.Expires)"},
		{name: "inherit-without-waiting", file: "model/sticky.go",
			why:     "a sticky replacement starts without waiting for its predecessor's data to be parked",
			find:    "return InheritDecision{Kind: InheritWait, Reason: fmt.Sprintf(",
			replace: "return InheritDecision{Kind: InheritNone, Reason: fmt.Sprintf("},
		// hooks: the Manager's acts.
		{name: "grant-without-record", file: "hooks/reserve.go",
			why:     "Reserve grants a ready slot without recording its caller as the holder first",
			find:    "\tcase !claimed:\n\t\tif err := m.recordHolder(ctx, s, caller); err != nil {\n\t\t\treturn false, err\n\t\t}",
			replace: "\tcase !claimed:"},
		{name: "client-error-is-not-running", file: "hooks/steps.go",
			why:     "an error from the local client taken as \"the lost allocation does not run here\"",
			find:    "running, err := m.allocs.RunningLocally(ctx, a.ID)\n\tif err != nil {",
			replace: "running, err := m.allocs.RunningLocally(ctx, a.ID)\n\tif err = nil; err != nil {"},
		{name: "lookup-error-is-gone", file: "hooks/steps.go",
			why:     "a failed lookup (a token without read-job) taken as \"the holder is gone\"",
			find:    "a, found, err := m.allocs.Lookup(ctx, id)\n\tif err != nil {",
			replace: "a, found, err := m.allocs.Lookup(ctx, id)\n\tif err = nil; err != nil {"},
		{name: "parked-released-as-scanned", file: "hooks/sticky.go",
			why:     "parked data released as an older scan saw it, not as it is under its lock (finding 12)",
			find:    "if cur == nil || !cur.Same(p) {",
			replace: "if cur == nil {"},
		{name: "create-without-lock", file: "hooks/create.go",
			why:     "a pass creates or mounts a slot without its lock, while a Reserve may be releasing it",
			find:    "lock := m.locks.get(id)\n\tif !lock.TryLock() {\n\t\treturn false, nil\n\t}\n\tdefer lock.Unlock()",
			replace: "_ = m.locks.get(id)"},
		// hooks and model: data that follows its allocation to another node.
		{name: "final-from-running-slot", file: "hooks/send.go",
			why:     "the sender serves its final snapshot from a slot whose allocation still runs: the copy misses what is written after it",
			find:    "return s.Dataset, false, lock.Unlock, nil",
			replace: "return s.Dataset, true, lock.Unlock, nil"},
		{name: "received-on-any-answer", file: "hooks/migrate.go",
			why:     "a copy marked received (claimable) after any increment, not only after the final one",
			find:    "case err == nil && res.Complete:",
			replace: "case err == nil && res == res:"},
		{name: "pull-after-claim", file: "model/migrate.go",
			why:     "a pull started after the replacement claimed its copy (Nomad still shows it pending) brings a second copy no one claims",
			find:    "return s.Exists && s.Holder == mg.Replacement.ID",
			replace: "return false"},
		{name: "resend-after-copied", file: "model/migrate.go",
			why:     "the sending node sends data already copied whole again, from nothing, to a pull that asks after the claim",
			find:    "if migrated {\n\t\treturn Send{}, fmt.Errorf(\"%w: %s\", ErrMigrated, in.Dataset)",
			replace: "if migrated && false {\n\t\treturn Send{}, fmt.Errorf(\"%w: %s\", ErrMigrated, in.Dataset)"},
		{name: "claim-partial-copy", file: "model/sticky.go",
			why:     "a replacement claims a copy still being received",
			find:    "case parked != nil && parked.Holder == prev.ID && parked.State == StateReceiving:",
			replace: "case false:"},
		// hooks: what the Manager reads.
		{name: "starved-read-is-a-problem", file: "hooks/manager.go",
			why:     "a scan read starved at the lowest priority counts as the pool's problem: a healthy pool's slots unhealthy, task starts refused",
			find:    "if errors.Is(err, zfs.ErrTimeout) && zfs.IsBackground(ctx) && ctx.Err() == nil {",
			replace: "if false {"},
		// allocwatch: what the plugin knows of Nomad.
		{name: "index-backwards-blocks", file: "allocwatch/rules.go",
			why:     "the watcher blocks on an index that went backwards instead of starting over",
			find:    "case lastIndex < waitIndex:\n\t\treturn 0, false",
			replace: "case lastIndex < waitIndex:\n\t\treturn waitIndex, false"},
		// plugin: the device API.
		{name: "reserve-unbounded", file: "plugin/reserve.go",
			why:     "Reserve is not bounded by reserve_timeout: a predecessor that never stops hangs the task's start",
			find:    "ctx, cancel := context.WithDeadline(p.runCtx, p.now().Add(s.ReserveTimeout+s.Slots.MigrateWait(deviceIDs)))",
			replace: "ctx, cancel := context.WithDeadline(p.runCtx, p.now().Add(s.ReserveTimeout*1000+s.Slots.MigrateWait(deviceIDs)))"},
	}
}
