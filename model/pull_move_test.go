package model_test

import (
	"errors"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/nomad-device-zfs/nomad-device-zfs/model"
	"github.com/nomad-device-zfs/nomad-device-zfs/zfs"
)

// moveBeat is one move of a pull or a send and what came of it: want is
// the move (as the test's describe names it), the rest the Result the
// driver feeds back.
type moveBeat struct {
	want     string
	err      error
	rows     []zfs.Dataset
	slot     model.Slot
	complete bool
	parked   *model.Retained
	locked   bool
	resume   *model.Resume
	// check, if set, looks at the move itself.
	check func(t *testing.T, mv model.Move)
}

// result is the Result the driver feeds back after mv, as b has it.
func (b moveBeat) result(mv model.Move) model.Result {
	return model.Result{Step: mv, Err: b.err, Rows: b.rows, Slot: b.slot, Complete: b.complete,
		Parked: b.parked, Locked: b.locked, Resume: b.resume}
}

// playMoves runs the beats against a decider, as the driver would
// (hooks/drive.go): decide the move, check it, feed its result back
// (after). The beats may stop before the loop ends, unless mustEnd.
func playMoves(t *testing.T, decide func() model.Move, after func(model.Result), describe func(model.Move) string,
	beats []moveBeat, mustEnd bool) {
	t.Helper()
	var got []string
	for i, b := range beats {
		mv := decide()
		got = append(got, describe(mv))
		if describe(mv) != b.want {
			t.Fatalf("move %d = %q, want %q (moves so far: %s)", i, describe(mv), b.want, strings.Join(got, ", "))
		}
		if b.check != nil {
			b.check(t, mv)
		}
		if mv.Kind == model.MoveDone || mv.Kind == model.MoveFail {
			if i != len(beats)-1 {
				t.Fatalf("move %d ends the loop, but %d more beats follow", i, len(beats)-1-i)
			}
			return
		}
		after(b.result(mv))
	}
	if mustEnd {
		t.Fatalf("the loop did not end: %s", strings.Join(got, ", "))
	}
}

// describePull is a move as a pull's beat names it: its kind and where in
// the pull it is; a pause's time and failures in a row, and whether a
// Reserve's kick ends it; an end's wake or refusal.
func describePull(mv model.Move) string {
	out := mv.Kind.String()
	if mv.Phase != 0 {
		out += " " + mv.Phase.String()
	}
	switch mv.Kind {
	case model.MoveWait:
		out += fmt.Sprintf(" %s #%d", mv.For, mv.Attempt)
		if mv.Awaits == model.AwaitsIncrement {
			out += " kickable"
		}
	case model.MoveDone:
		if mv.Wake {
			out += " wake"
		}
	case model.MoveFail:
		if mv.Refused {
			out += " refused"
		}
	}
	return out
}

// playPull runs the beats against DecidePullMove from in, as
// hooks/migrate.go's pullDecider does.
func playPull(t *testing.T, in model.PullLoop, beats []moveBeat) {
	t.Helper()
	playMoves(t, func() model.Move { return model.DecidePullMove(in) }, func(r model.Result) { in = in.After(r) },
		describePull, beats, false)
}

func TestDecidePullMove(t *testing.T) {
	const copyName = "tank/nomad/pg/parked-A-pg-1"
	class := model.Class{Name: "pg", Slots: 1, Sticky: true, StickyWait: time.Hour,
		Migrate: model.Migrate{Enabled: true, Timeout: time.Minute}}
	quota := class
	quota.Properties = map[string]string{"quota": "1M"}
	mg := model.Migration{Class: "pg", Slot: "pg-1", Replacement: model.Alloc{ID: "B"}, Previous: model.Alloc{ID: "A"},
		PrevSlot: "pg-1", Node: "node-1", ParkedName: copyName}
	now := time.Unix(1_700_000_000, 0)

	// The copy as a listing shows it: the dataset in state, then its
	// snapshots (name, guid).
	listing := func(state model.State, snaps ...string) []zfs.Dataset {
		rows := []zfs.Dataset{{Name: copyName, Type: zfs.DatasetFilesystem, GUID: "1",
			User: zfs.UserPropsOf(map[string]string{model.PropState: string(state), model.PropOwner: copyName})}}
		for i, s := range snaps {
			rows = append(rows, zfs.Dataset{Name: copyName + "@" + s, Type: zfs.DatasetSnapshot, GUID: fmt.Sprint(11 + i)})
		}
		return rows
	}
	receiving := listing(model.StateReceiving, "migrate-1")
	// A partial receive's token comes with the copy's row.
	partial := listing(model.StateReceiving, "migrate-1")
	partial[0].ResumeToken = "1-abc"
	twoPre := listing(model.StateReceiving, "migrate-1", "migrate-2")
	final := listing(model.StateReceiving, "migrate-1", model.MigrateFinal)
	parked := listing(model.StateParked, "migrate-1", model.MigrateFinal)
	big := listing(model.StateReceiving, model.MigrateFinal)
	big[0].Referenced = 3 << 20
	volume := []zfs.Dataset{{Name: copyName + "@migrate-1", Type: zfs.DatasetSnapshot, GUID: "11"}}
	below := append(listing(model.StateReceiving, "migrate-1"), zfs.Dataset{Name: copyName + "/evil", Type: zfs.DatasetFilesystem})
	foreignBare := listing(model.StateReceiving)
	foreignBare[0].User = zfs.UserPropsOf(map[string]string{model.PropState: string(model.StateReceiving)})
	claimed := model.Slot{Exists: true, Holder: "B"}
	empty := model.Slot{Exists: true}
	fail := errors.New("zfs: exit status 1")
	notExist := fmt.Errorf("listing: %w", zfs.ErrNotExist)

	// The first look of a pull with nothing yet, and its start.
	look := []moveBeat{
		{want: "list look", err: notExist},
		{want: "read-slot look-slot", slot: empty},
		{want: "wait start 0s #0"},
	}
	// A round over receiving with a pre-copy snapshot, up to its fetch.
	round := func(b moveBeat) []moveBeat {
		return []moveBeat{{want: "list list", rows: receiving}, b}
	}
	fetchWith := func(have uint64, token string) func(*testing.T, model.Move) {
		return func(t *testing.T, mv model.Move) {
			f := mv.Fetch
			if f.HaveGUID != have || f.ResumeToken != token || f.Target != copyName || f.Alloc != "A" || f.Replacement != "B" ||
				f.Props[model.PropState] != string(model.StateReceiving) || !f.At.Equal(now) {
				t.Errorf("fetch %+v, want have %d, token %q", f, have, token)
			}
		}
	}
	seq := func(parts ...[]moveBeat) []moveBeat {
		var out []moveBeat
		for _, p := range parts {
			out = append(out, p...)
		}
		return out
	}

	cases := []struct {
		name   string
		class  model.Class
		marked bool
		beats  []moveBeat
	}{
		{name: "a copy an earlier pull of this process marked parked: ends without a listing", marked: true, beats: []moveBeat{
			{want: "done"},
		}},
		{name: "a copy claimable already: nothing to pull, and the pull ends quietly", beats: []moveBeat{
			{want: "list look", rows: parked},
			{want: "done"},
		}},
		{name: "the replacement holds its slot already (claimed, or started empty): ends quietly", beats: []moveBeat{
			{want: "list look", err: notExist},
			{want: "read-slot look-slot", slot: claimed},
			{want: "done"},
		}},
		{name: "a first look that fails is no reason not to pull", beats: []moveBeat{
			{want: "list look", err: fail},
			{want: "wait start 0s #0"},
			{want: "list list", err: notExist},
			{want: "read-slot settled", slot: empty},
			{want: "fetch fetch", check: fetchWith(0, "")},
		}},
		{name: "the first increment from nothing, then the pre-copy's pace", beats: seq(look, []moveBeat{
			{want: "list list", err: notExist},
			{want: "read-slot settled", slot: empty},
			{want: "fetch fetch", check: fetchWith(0, ""), rows: receiving},
			{want: "wait next 10s #0 kickable"},
			{want: "list list", rows: receiving},
		})},
		{name: "a fetcher that returns no listing: the copy listed after it, a failure of which fails the round", beats: seq(look,
			round(moveBeat{want: "fetch fetch"}),
			[]moveBeat{
				{want: "list relist", err: fail},
				{want: "wait retry 1s #1"},
				{want: "list list", rows: receiving},
				{want: "fetch fetch"},
				{want: "list relist", rows: receiving},
				{want: "wait next 10s #0 kickable"},
			})},
		{name: "an increment from the newest snapshot, resuming a partial receive's token", beats: seq(look,
			round(moveBeat{want: "fetch fetch", check: fetchWith(11, ""), err: fmt.Errorf("cut: %w", zfs.ErrInterrupted)}),
			[]moveBeat{
				{want: "wait retry 1s #1"},
				{want: "list list", rows: partial},
				{want: "fetch fetch", check: fetchWith(11, "1-abc")},
			})},
		{name: "older snapshots dropped after a pre-copy; after the final one left to the claim, complete asked for at once on the fetch's listing with no token, then marked received", beats: seq(look,
			round(moveBeat{want: "fetch fetch", rows: twoPre}),
			[]moveBeat{
				{want: "run drop-older"},
				{want: "wait next 10s #0 kickable"},
			},
			round(moveBeat{want: "fetch fetch", rows: final}),
			[]moveBeat{
				{want: "fetch fetch", complete: true, check: fetchWith(12, "")},
				{want: "run received", check: func(t *testing.T, mv model.Move) {
					if mv.Plan == nil || !strings.Contains(mv.Plan.Doing, "marking "+copyName+" received") {
						t.Errorf("plan %+v, want the copy marked received", mv.Plan)
					} else if got := mv.Plan.Ops[0].Props[model.PropRetainAs]; got != "tank/nomad/pg/pg-1" {
						t.Errorf("the copy marked for %q, want the replacement's slot (the claim renames it without a set)", got)
					}
				}},
				{want: "done received wake"},
			})},
		{name: "the final increment received ends the failures in a row: a complete that fails then waits a second", beats: seq(look,
			round(moveBeat{want: "fetch fetch", err: fail}),
			[]moveBeat{{want: "wait retry 1s #1"}},
			round(moveBeat{want: "fetch fetch", err: fail}),
			[]moveBeat{{want: "wait retry 2s #2"}},
			round(moveBeat{want: "fetch fetch", rows: final}),
			[]moveBeat{
				{want: "fetch fetch", err: fail},
				{want: "wait retry 1s #1"},
			})},
		{name: "a mark that fails still ends the pull: the pass and the waiting Reserves look again", beats: seq(look, []moveBeat{
			{want: "list list", rows: final},
			{want: "fetch fetch", complete: true},
			{want: "run received", err: fail},
			{want: "done wake"},
		})},
		{name: "a complete over a pre-copy is not believed", beats: seq(look,
			round(moveBeat{want: "fetch fetch", complete: true}),
			[]moveBeat{{want: "wait retry 1s #1"}, {want: "list list", rows: receiving}})},
		{name: "a complete over no copy is not believed", beats: seq(look, []moveBeat{
			{want: "list list", err: notExist},
			{want: "read-slot settled", slot: empty},
			{want: "fetch fetch", complete: true},
			{want: "wait retry 1s #1"},
		})},
		{name: "a resume the sender refuses: the partial receive discarded, then asked again", beats: seq(look,
			round(moveBeat{want: "fetch fetch", err: model.ErrResumeRefused}),
			[]moveBeat{
				{want: "run abort"},
				{want: "wait retry 1s #1", check: func(t *testing.T, mv model.Move) {
					if !errors.Is(mv.Retry, model.ErrResumeRefused) {
						t.Errorf("retry after %v, want the refusal", mv.Retry)
					}
				}},
			})},
		{name: "an abort that fails is the round's failure", beats: seq(look,
			round(moveBeat{want: "fetch fetch", err: model.ErrResumeRefused}),
			[]moveBeat{
				{want: "run abort", err: fail},
				{want: "wait retry 1s #1", check: func(t *testing.T, mv model.Move) {
					if mv.Retry != fail {
						t.Errorf("retry after %v, want the abort's", mv.Retry)
					}
				}},
			})},
		{name: "a copy that no longer lines up with the sender's: listed again and dropped whole", beats: seq(look,
			round(moveBeat{want: "fetch fetch", err: fmt.Errorf("receiving: %w", model.ErrStartOver)}),
			[]moveBeat{
				{want: "list recount", rows: twoPre},
				{want: "run start-over", check: func(t *testing.T, mv model.Move) {
					if mv.Plan == nil || !strings.Contains(mv.Plan.Doing, "dropping the copy") {
						t.Errorf("plan %+v, want the copy dropped", mv.Plan)
					}
				}},
				{want: "wait retry 1s #1"},
			})},
		{name: "what came is not the snapshot the sender named: dropped whole", beats: seq(look,
			round(moveBeat{want: "fetch fetch", err: model.ErrStartOver}),
			[]moveBeat{{want: "list recount", err: fail}, {want: "wait retry 1s #1"}})},
		{name: "a complete copy with no snapshot of the transfer's (a lie's, its drop cut by a crash): dropped, then pulled whole", beats: seq(look, []moveBeat{
			{want: "list list", rows: listing(model.StateReceiving, "foreign")},
			{want: "run start-over", check: func(t *testing.T, mv model.Move) {
				if mv.Plan == nil || !strings.Contains(mv.Plan.Doing, "dropping the copy") {
					t.Errorf("plan %+v, want the copy dropped", mv.Plan)
				}
			}},
			{want: "wait retry 1s #1"},
			{want: "list list", err: notExist},
			{want: "read-slot settled", slot: empty},
			{want: "fetch fetch", check: fetchWith(0, "")},
		})},
		{name: "a copy with no snapshot of the transfer's that is not the plugin's: left, and the round fails", beats: seq(look, []moveBeat{
			{want: "list list", rows: foreignBare},
			{want: "wait retry 1s #1"},
		})},
		{name: "a busy sender: a short pause, and no failure counted", beats: seq(look,
			round(moveBeat{want: "fetch fetch", err: fail}),
			[]moveBeat{{want: "wait retry 1s #1"}},
			round(moveBeat{want: "fetch fetch", err: fmt.Errorf("peer: %w", model.ErrPeerBusy)}),
			[]moveBeat{{want: "wait busy 1s #1"}},
			round(moveBeat{want: "fetch fetch", err: fail}),
			[]moveBeat{{want: "wait retry 2s #2"}},
			round(moveBeat{want: "fetch fetch", err: fail}),
			[]moveBeat{{want: "wait retry 4s #3"}},
			round(moveBeat{want: "fetch fetch", rows: receiving}),
			[]moveBeat{{want: "wait next 10s #0 kickable"}},
			round(moveBeat{want: "fetch fetch", err: fail}),
			[]moveBeat{{want: "wait retry 1s #1"}})},
		{name: "crash: restarted, the pull finds its copy parked by a pass before the restart", beats: []moveBeat{
			{want: "list look", rows: final},
			{want: "read-slot look-slot", err: fail},
			{want: "wait start 0s #0"},
			{want: "list list", rows: parked},
			{want: "done wake"},
		}},
		{name: "the copy claimed between two rounds: no copy, and the replacement on its slot", beats: seq(look, []moveBeat{
			{want: "list list", err: notExist},
			{want: "read-slot settled", slot: claimed},
			{want: "done wake"},
		})},
		{name: "a listing that fails is the round's failure", beats: seq(look, []moveBeat{
			{want: "list list", err: fail},
			{want: "wait retry 1s #1"},
			{want: "list list", err: fail},
			{want: "wait retry 2s #2"},
			{want: "list list", err: notExist},
			{want: "read-slot settled", err: fail},
			{want: "wait retry 4s #3"},
		})},
		{name: "a volume's stream is refused before anything is written", beats: seq(look,
			round(moveBeat{want: "fetch fetch", err: fmt.Errorf("receiving: %w", model.ErrNotFilesystem)}),
			[]moveBeat{{want: "fail refused"}})},
		{name: "a copy a volume's stream made a volume is dropped and refused", beats: seq(look,
			round(moveBeat{want: "fetch fetch", rows: volume}),
			[]moveBeat{{want: "run drop-refused"}, {want: "fail refused"}})},
		{name: "a copy with datasets below it is refused and left for the operator", beats: seq(look,
			round(moveBeat{want: "fetch fetch", rows: below}),
			[]moveBeat{{want: "fail refused"}})},
		{name: "a whole copy over the class's quota is dropped and refused", class: quota, beats: seq(look, []moveBeat{
			{want: "list list", rows: big},
			{want: "fetch fetch", complete: true},
			{want: "run drop-refused"},
			{want: "fail refused", check: func(t *testing.T, mv model.Move) {
				if !strings.Contains(mv.Reason, "more than the class's quota 1M") {
					t.Errorf("reason %q, want the quota", mv.Reason)
				}
			}},
		})},
		// The request after the final increment tells the sender this
		// node holds it, and the sender then releases its data: a copy
		// this node will refuse is refused before it (sim seed 9760098).
		{name: "a final increment over the class's quota is refused before the sender hears of it", class: quota, beats: seq(look,
			round(moveBeat{want: "fetch fetch", rows: big}),
			[]moveBeat{{want: "run drop-refused"}, {want: "fail refused", check: func(t *testing.T, mv model.Move) {
				if !strings.Contains(mv.Reason, "more than the class's quota 1M") {
					t.Errorf("reason %q, want the quota", mv.Reason)
				}
			}}})},
		{name: "a refused copy whose drop fails: the round fails and is tried again", class: quota, beats: seq(look, []moveBeat{
			{want: "list list", rows: big},
			{want: "fetch fetch", complete: true},
			{want: "run drop-refused", err: fail},
			{want: "wait retry 1s #1", check: func(t *testing.T, mv model.Move) {
				if !strings.Contains(mv.Retry.Error(), "; dropping it: zfs: exit status 1") {
					t.Errorf("retry after %v, want the drop's failure", mv.Retry)
				}
			}},
		})},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			c := class
			if tc.class.Name != "" {
				c = tc.class
			}
			playPull(t, model.PullLoop{Mig: mg, Class: c, SlotDataset: "tank/nomad/pg/pg-1", Now: now, Marked: tc.marked}, tc.beats)
		})
	}
}

func TestRetryWait(t *testing.T) {
	s := time.Second
	cases := []struct {
		name string
		got  time.Duration
		want time.Duration
	}{
		{"first retry after a second", model.RetryWait(1, 15*s), s},
		{"retries double", model.RetryWait(3, 15*s), 4 * s},
		{"retries wait the ceiling at most", model.RetryWait(10, 15*s), 15 * s},
		{"retries wait a second at least", model.RetryWait(1, 100*time.Millisecond), s},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			if tc.got != tc.want {
				t.Errorf("got %s, want %s", tc.got, tc.want)
			}
		})
	}
}
