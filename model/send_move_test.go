package model_test

import (
	"errors"
	"fmt"
	"strings"
	"testing"

	"github.com/nomad-device-zfs/nomad-device-zfs/model"
	"github.com/nomad-device-zfs/nomad-device-zfs/zfs"
)

// describeSend is a move as a send's beat names it: its kind and phase;
// for an end, what is sent or why not.
func describeSend(mv model.Move) string {
	out := mv.Kind.String()
	if mv.Phase != 0 {
		out += " " + mv.Phase.String()
	}
	switch {
	case mv.Kind == model.MoveDone && mv.Send.Complete:
		out += " complete"
	case mv.Kind == model.MoveDone:
		out += " " + mv.Send.Options.Snapshot[strings.IndexByte(mv.Send.Options.Snapshot, '@')+1:]
	}
	if mv.Wake {
		out += " wake"
	}
	return out
}

// playSend runs the beats against DecideSendMove from in, as
// hooks/send.go's Sender.Send does; the send must end.
func playSend(t *testing.T, in model.SendLoop, beats []moveBeat) {
	t.Helper()
	playMoves(t, func() model.Move { return model.DecideSendMove(in) }, func(r model.Result) { in = in.After(r) },
		describeSend, beats, true)
}

func TestDecideSendMove(t *testing.T) {
	const (
		slotDS = "tank/nomad/pg/pg-1"
		parked = "tank/nomad/pg/parked-A-pg-1"
	)
	row := func(name, guid string) zfs.Dataset { return zfs.Dataset{Name: name, GUID: guid} }
	live := []zfs.Dataset{row(slotDS, "1")}
	liveTaken := append(live, row(slotDS+"@migrate-1", "11"))
	encrypted := []zfs.Dataset{{Name: slotDS, GUID: "1", Encryption: "aes-256-gcm"}, row(slotDS+"@migrate-1", "11")}
	parkedRows := []zfs.Dataset{row(parked, "1"), row(parked+"@migrate-1", "11")}
	withFinal := append(parkedRows, row(parked+"@"+model.MigrateFinal, "13"))
	migrated := []zfs.Dataset{row(parked, "1"), row(parked+"@migrate-1", "11"), row(parked+"@"+model.Migrated, "13")}
	held := model.Slot{Dataset: slotDS, Exists: true, State: model.StateHeld, Holder: "A"}
	ready := model.Slot{Dataset: slotDS, Exists: true, State: model.StateReady}
	parkedA := &model.Retained{Holder: "A", State: model.StateParked}
	fail := errors.New("zfs: exit status 1")

	// Looking for A's data in its slot: the parked data first.
	inSlot := []moveBeat{
		{want: "lock lock-parked"},
		{want: "read-parked read-parked"},
		{want: "unlock unlock-parked"},
		{want: "lock lock-slot", locked: true},
		{want: "read read-slot", slot: held},
	}
	// A's parked data, read in one listing (rows) under its lock.
	asParked := func(rows []zfs.Dataset) []moveBeat {
		return []moveBeat{
			{want: "lock lock-parked"},
			{want: "read-parked read-parked", parked: parkedA, rows: rows},
		}
	}
	seq := func(parts ...[]moveBeat) []moveBeat {
		var out []moveBeat
		for _, p := range parts {
			out = append(out, p...)
		}
		return out
	}
	sent := func(snap, from string, fromGUID, toGUID uint64, raw, final bool) func(*testing.T, model.Move) {
		return func(t *testing.T, mv model.Move) {
			s := mv.Send
			if s.Options.Snapshot != snap || s.Options.From != from || s.FromGUID != fromGUID || s.ToGUID != toGUID ||
				s.Options.Raw != raw || s.Encrypted != raw || s.Options.Compressed == raw || s.Final != final {
				t.Errorf("send %+v, want %s from %q (%d, %d), raw %v, final %v", s, snap, from, fromGUID, toGUID, raw, final)
			}
		}
	}
	cases := []struct {
		name     string
		req      model.SendRequest
		migrates bool
		beats    []moveBeat
	}{
		{name: "a slot not of a class whose data migrates: no data", beats: []moveBeat{{want: "fail"}}},
		{name: "a pre-copy from nothing: a snapshot taken, then sent with its guid", migrates: true, beats: seq(inSlot, []moveBeat{
			{want: "list list", rows: live},
			{want: "run take"},
			{want: "list relist", rows: liveTaken},
			{want: "done migrate-1", check: sent(slotDS+"@migrate-1", "", 0, 11, false, false)},
		})},
		{name: "encrypted data goes out raw", migrates: true, req: model.SendRequest{HaveGUID: 11}, beats: seq(inSlot, []moveBeat{
			{want: "list list", rows: encrypted},
			{want: "run take"},
			{want: "list relist", rows: append(encrypted, row(slotDS+"@migrate-2", "12"))},
			{want: "done migrate-2", check: sent(slotDS+"@migrate-2", slotDS+"@migrate-1", 11, 12, true, false)},
		})},
		{name: "the slot busy (a Reserve fences it): the peer asks again", migrates: true, beats: []moveBeat{
			{want: "lock lock-parked"},
			{want: "read-parked read-parked"},
			{want: "unlock unlock-parked"},
			{want: "lock lock-slot"},
			{want: "fail", check: func(t *testing.T, mv model.Move) {
				if !errors.Is(mv.Err, model.ErrPeerBusy) {
					t.Errorf("error %v, want busy", mv.Err)
				}
			}},
		}},
		{name: "the slot holds no data of A's, nor is it parked: no data", migrates: true, beats: []moveBeat{
			{want: "lock lock-parked"},
			{want: "read-parked read-parked", parked: &model.Retained{Holder: "Z", State: model.StateParked}},
			{want: "unlock unlock-parked"},
			{want: "lock lock-slot", locked: true},
			{want: "read read-slot", slot: ready},
			{want: "fail", check: func(t *testing.T, mv model.Move) {
				if !errors.Is(mv.Err, model.ErrNoData) {
					t.Errorf("error %v, want no data", mv.Err)
				}
			}},
		}},
		{name: "parked (A has ended): the final snapshot taken and sent", migrates: true, req: model.SendRequest{HaveGUID: 11},
			beats: seq(asParked(parkedRows), []moveBeat{
				{want: "run take"},
				{want: "list relist", rows: withFinal},
				{want: "done migrate-final", check: sent(parked+"@"+model.MigrateFinal, parked+"@migrate-1", 11, 13, false, true)},
			})},
		{name: "renamed aside, the park still creating the fresh slot: the final snapshot taken and sent from the one listing", migrates: true,
			req: model.SendRequest{HaveGUID: 11}, beats: []moveBeat{
				{want: "lock lock-parked"},
				{want: "read-parked read-parked", parked: &model.Retained{Holder: "A", State: model.StateReleasing}, rows: parkedRows},
				{want: "run take"},
				{want: "list relist", rows: withFinal},
				{want: "done migrate-final", check: sent(parked+"@"+model.MigrateFinal, parked+"@migrate-1", 11, 13, false, true)},
			}},
		{name: "a copy received from another node is not A's final data: its slot is looked at", migrates: true,
			req: model.SendRequest{HaveGUID: 11}, beats: seq([]moveBeat{
				{want: "lock lock-parked"},
				{want: "read-parked read-parked", parked: &model.Retained{Holder: "A", State: model.StateParked, Outcome: model.OutcomeMigrated},
					rows: withFinal},
				{want: "unlock unlock-parked"},
				{want: "lock lock-slot", locked: true},
				{want: "read read-slot", slot: ready},
				{want: "fail"},
			})},
		{name: "the peer names the final snapshot: recorded, the pre-copies left to the policy, and the pass woken", migrates: true,
			req: model.SendRequest{HaveGUID: 13}, beats: seq(asParked(withFinal), []moveBeat{
				{want: "run migrated"},
				{want: "done complete wake"},
			})},
		{name: "a record of the whole copy that fails ends the send with its error", migrates: true, req: model.SendRequest{HaveGUID: 13},
			beats: seq(asParked(withFinal), []moveBeat{
				{want: "run migrated", err: fail},
				{want: "fail"},
			})},
		{name: "old snapshots whose drop fails: the send goes on (the driver logs it)", migrates: true, req: model.SendRequest{HaveGUID: 12},
			beats: seq(inSlot, []moveBeat{
				{want: "list list", rows: append(liveTaken, row(slotDS+"@migrate-2", "12"))},
				{want: "run drop", check: func(t *testing.T, mv model.Move) {
					if mv.Warn == "" || len(mv.Send.Drop) != 1 || mv.Send.Drop[0] != slotDS+"@migrate-1" {
						t.Errorf("drop %v, warn %q: want @migrate-1, the failure only logged", mv.Send.Drop, mv.Warn)
					}
				}},
				{want: "run take"},
				{want: "list relist", rows: append(liveTaken, row(slotDS+"@migrate-2", "12"), row(slotDS+"@migrate-3", "14"))},
				{want: "done migrate-3", check: sent(slotDS+"@migrate-3", slotDS+"@migrate-2", 12, 14, false, false)},
			})},
		{name: "migrated already: a request from nothing gets no data, not the whole data again", migrates: true,
			beats: seq(asParked(migrated), []moveBeat{
				{want: "fail", check: func(t *testing.T, mv model.Move) {
					if !errors.Is(mv.Err, model.ErrNoData) || !errors.Is(mv.Err, model.ErrMigrated) {
						t.Errorf("error %v, want no data (migrated)", mv.Err)
					}
				}},
			})},
		{name: "a resume token decoded first, and resumed only for what is sent now", migrates: true,
			req: model.SendRequest{HaveGUID: 11, ResumeToken: "1-abc"}, beats: seq([]moveBeat{
				{want: "decode-token token", resume: &model.Resume{ToGUID: 13, FromGUID: 11}},
			}, asParked(withFinal), []moveBeat{
				{want: "done migrate-final", check: sent(parked+"@"+model.MigrateFinal, parked+"@migrate-1", 11, 13, false, true)},
			})},
		{name: "a token zfs cannot decode: refused, the peer aborts its partial receive", migrates: true, req: model.SendRequest{ResumeToken: "1-abc"}, beats: []moveBeat{
			{want: "decode-token token", err: fail},
			{want: "fail", check: func(t *testing.T, mv model.Move) {
				if !errors.Is(mv.Err, model.ErrResumeRefused) || !strings.Contains(mv.Err.Error(), "decoding the resume token: ") {
					t.Errorf("error %v", mv.Err)
				}
			}},
		}},
		{name: "a snapshot not there after it was taken", migrates: true, beats: seq(inSlot, []moveBeat{
			{want: "list list", rows: live},
			{want: "run take"},
			{want: "list relist", rows: live},
			{want: "fail", check: func(t *testing.T, mv model.Move) {
				if !strings.Contains(mv.Err.Error(), "is not there after it was taken") {
					t.Errorf("error %v", mv.Err)
				}
			}},
		})},
		{name: "a reading that fails ends the send with its error", migrates: true, beats: []moveBeat{
			{want: "lock lock-parked"},
			{want: "read-parked read-parked", err: fail},
			{want: "fail", check: func(t *testing.T, mv model.Move) {
				if mv.Err != fail {
					t.Errorf("error %v, want the reading's", mv.Err)
				}
			}},
		}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			req := tc.req
			req.Alloc, req.Replacement, req.Slot = "A", "B", "pg-1"
			playSend(t, model.SendLoop{Req: req, Class: "pg", Migrates: tc.migrates, ParkedName: parked, SlotDataset: slotDS}, tc.beats)
		})
	}
}

func TestSendStreamed(t *testing.T) {
	cases := []struct {
		name      string
		encrypted bool
		want      string
	}{
		{name: "encrypted: raw, the key never travels", encrypted: true, want: "raw true compressed false large true embedded false"},
		{name: "plain: compressed as stored, large and embedded blocks", want: "raw false compressed true large true embedded true"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			o := model.Send{}.Streamed(tc.encrypted).Options
			got := fmt.Sprintf("raw %v compressed %v large %v embedded %v", o.Raw, o.Compressed, o.LargeBlocks, o.Embedded)
			if got != tc.want {
				t.Errorf("got %s, want %s", got, tc.want)
			}
		})
	}
}
