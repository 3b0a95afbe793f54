package hooks

import (
	"context"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/nomad-device-zfs/nomad-device-zfs/model"
)

// The driver's own rules; the deciders' step sequences are the model's
// tests (model/reserve_move_test.go).
func TestDrive(t *testing.T) {
	_, c := newFakeZFS(t)
	waitThen := func(mv model.Move) decider {
		return func(_ model.Since, last model.Result) model.Move {
			if last.Step.Kind == model.MoveWait {
				return mv
			}
			return model.Move{Kind: model.MoveWait, For: time.Millisecond}
		}
	}
	cases := []struct {
		name   string
		sleep  func(context.Context, time.Duration) error
		decide decider
		want   string // the error, or the final move
	}{
		{name: "a grant ends the loop", decide: waitThen(model.Move{Kind: model.MoveGrant}), want: "grant"},
		{name: "a failure ends the loop", decide: waitThen(model.Move{Kind: model.MoveFail, Reason: "no"}), want: "fail"},
		{name: "a pause that fails ends it: the loop's time is up",
			sleep:  func(context.Context, time.Duration) error { return context.DeadlineExceeded },
			decide: waitThen(model.Move{Kind: model.MoveGrant}), want: "gave up waiting: context deadline exceeded"},
		{name: "a decider that never pauses is stopped",
			decide: func(model.Since, model.Result) model.Move { return model.Move{Kind: model.MoveRun, Act: model.ActPark} },
			want:   "64 moves without a pause"},
		{name: "what the loop read is kept by Since.After",
			decide: func(since model.Since, last model.Result) model.Move {
				if since.Parked {
					return model.Move{Kind: model.MoveGrant}
				}
				return model.Move{Kind: model.MoveRun, Act: model.ActPark}
			}, want: "grant"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			m := newTestManager(t, c, model.Class{Name: "scratch", Slots: 1})
			if tc.sleep != nil {
				m.sleep = tc.sleep
			}
			mv, err := m.drive(t.Context(), driveLoop{decide: tc.decide})
			got := mv.Kind.String()
			if err != nil {
				got = err.Error()
			}
			if !strings.Contains(got, tc.want) {
				t.Errorf("drive = %q, want %q", got, tc.want)
			}
		})
	}
}

// TestDriveGivesUpWithTheLastError: a Reserve's deadline ends the loop
// with what it last met, not only the deadline.
func TestDriveGivesUpWithTheLastError(t *testing.T) {
	_, c := newFakeZFS(t)
	m := newTestManager(t, c, model.Class{Name: "scratch", Slots: 1})
	ctx, cancel := context.WithCancel(t.Context())
	busy := errors.New("dataset is busy")
	_, err := m.drive(ctx, driveLoop{decide: func(_ model.Since, last model.Result) model.Move {
		cancel()
		return model.Move{Kind: model.MoveWait, For: time.Hour, Retry: busy}
	}})
	if err == nil || !strings.Contains(err.Error(), "context canceled (last: dataset is busy)") {
		t.Errorf("drive = %v, want it to give up with the last error", err)
	}
}
