package hooks

import (
	"context"
	"errors"
	"fmt"
	"time"

	hclog "github.com/hashicorp/go-hclog"

	"github.com/nomad-device-zfs/nomad-device-zfs/model"
	"github.com/nomad-device-zfs/nomad-device-zfs/zfs"
)

// The executor: every change the Manager makes to ZFS is a model.Plan,
// and this is the only code that runs one. It decides nothing: what a
// command's failure means is the plan's (model.Op.Outcome).

// errReplan: a command found the datasets not as the plan read them; the
// caller reads again and plans again (carryOut).
var errReplan = errors.New("the datasets changed since the plan was made")

// maxReplans bounds the readings one step makes: a plan that keeps finding
// its names taken fails, and the next pass tries again.
const maxReplans = 3

// runPlan runs p's commands in order; the caller holds the locks of what
// they change. A command that fails as the plan allows moves on; one whose
// failure asks to plan again stops the plan with errReplan, after reading
// the name it found taken into seen; any other failure stops it with the
// error, after the command's Recover and the plan's OnFail commands.
func runPlan(ctx context.Context, z ZFS, logger hclog.Logger, p model.Plan, seen model.Seen) error {
	for _, n := range p.Notes {
		logNote(logger, n)
	}
	start := time.Now()
	for _, op := range p.Ops {
		err := z.Exec(ctx, op.Command)
		switch op.Outcome(err) {
		case model.Next:
			continue
		case model.Again:
			rows, lerr := z.List(ctx, op.Check, model.UserProps)
			if lerr != nil && !errors.Is(lerr, zfs.ErrNotExist) {
				return fmt.Errorf("%s: reading %s, which %s found taken: %w", p.Doing, op.Check, op.Verb, lerr)
			}
			seen[op.Check] = rows
			return errReplan
		}
		for _, c := range op.Recover {
			if rerr := z.Exec(ctx, c); rerr != nil {
				logger.Debug("cannot put back what a failed command undid", "command", c.String(), "error", rerr)
			}
		}
		for _, o := range p.OnFail {
			if ferr := z.Exec(ctx, o.Command); o.Outcome(ferr) != model.Next {
				logger.Debug("cannot record a step that did not finish", "command", o.String(), "error", ferr)
			}
		}
		err = model.Explain(op, err)
		if p.Doing != "" {
			err = fmt.Errorf("%s: %w", p.Doing, err)
		}
		return err
	}
	if p.Done.Msg != "" {
		p.Done.KV = append(p.Done.KV, "took", time.Since(start).Round(time.Millisecond).String())
		logNote(logger, p.Done)
	}
	return nil
}

func logNote(logger hclog.Logger, n model.Note) {
	if n.Warn {
		logger.Warn(n.Msg, n.KV...)
	} else {
		logger.Info(n.Msg, n.KV...)
	}
}

// run runs one plan with the Manager's zfs and logger.
func (m *Manager) run(ctx context.Context, p model.Plan) error {
	return runPlan(ctx, m.zfs, m.logger, p, model.Seen{})
}

// carryOut plans one step and runs the plan until it is done or fails. A
// plan stopped by a command that found the datasets changed is made again
// from what reread reads and what the command found (at most maxReplans
// times); plan is called with what has been seen so far.
func (m *Manager) carryOut(ctx context.Context, plan func(seen model.Seen) (model.Plan, error), reread func(context.Context) error) error {
	seen := model.Seen{}
	for round := 0; ; round++ {
		p, err := plan(seen)
		if err != nil {
			return err
		}
		err = runPlan(ctx, m.zfs, m.logger, p, seen)
		if !errors.Is(err, errReplan) {
			return err
		}
		if round == maxReplans {
			return fmt.Errorf("%s: %w, %d times in a row; next pass", p.Doing, err, round+1)
		}
		if err := reread(ctx); err != nil {
			return err
		}
	}
}
