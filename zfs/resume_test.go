package zfs

import (
	"errors"
	"reflect"
	"strings"
	"testing"
)

// The guids of the captured snapshots (list-snap-guids, send-dry-token-raw).
const (
	guidS1  = 2904051388168125192
	guidS2  = 9736367278034713689
	guidEnc = 11349146670238609250
)

func TestParseResumeTokenRealOutput(t *testing.T) {
	cases := []struct {
		capture string
		want    ResumeToken
	}{
		{"send-dry-token", ResumeToken{ToName: "tank/xfer/src@s1", ToGUID: guidS1,
			Object: 2, Offset: 0x2a0000, Bytes: 0x2c24d0, Size: 5523872}},
		{"send-dry-token-incr", ResumeToken{ToName: "tank/xfer/src@s2", ToGUID: guidS2, FromGUID: guidS1,
			Object: 3, Offset: 0x60000, Bytes: 0x80ec8, Size: 1581352}},
		{"send-dry-token-raw", ResumeToken{ToName: "tank/xfer/enc@s1", ToGUID: guidEnc,
			Object: 2, Offset: 0x40000, Bytes: 0x61374, CompressOK: true, RawOK: true, Size: 3855356}},
		// -v without -P: the human estimate is read as no estimate.
	}
	for _, tc := range cases {
		t.Run(tc.capture, func(t *testing.T) {
			got, err := ParseResumeToken(readCapture(t, tc.capture).stdout)
			if err != nil {
				t.Fatal(err)
			}
			if !reflect.DeepEqual(got, tc.want) {
				t.Fatalf("got  %+v\nwant %+v", got, tc.want)
			}
		})
	}
}

func TestParseResumeTokenRejects(t *testing.T) {
	head := "resume token contents:\nnvlist version: 0\n"
	cases := []struct{ name, out, wantErr string }{
		{"no header", "full\ttank/a@s\t1\nsize\t1\n", "no \"resume token contents:\""},
		{"no toname", head + "\tobject = 0x2\n\toffset = 0x0\n\tbytes = 0x0\n\ttoguid = 0x1\n", "no toname"},
		{"decimal guid", head + "\ttoname = tank/a@s\n\ttoguid = 12\n", "not a hex number"},
		{"flag with a value", head + "\trawok = 0\n", "not a present boolean"},
		{"entry twice", head + "\ttoname = tank/a@s\n\ttoname = tank/b@s\n", "appears twice"},
		{"not name = value", head + "\ttoname\n", "not \"name = value\""},
		{"bad estimate", head + "\ttoname = tank/a@s\n\ttoguid = 0x1\n\tobject = 0x1\n\toffset = 0x0\n\tbytes = 0x0\nfull send of x estimated size is 5M\n",
			"not a -P estimate line"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			_, err := ParseResumeToken([]byte(tc.out))
			if err == nil || !strings.Contains(err.Error(), tc.wantErr) {
				t.Fatalf("error %v, want one saying %q", err, tc.wantErr)
			}
		})
	}
}

// TestCheckResumeToken: the sender resumes only what it meant to send
// (OpenZFS #14153). Each forgery a hostile receiver could try is a row.
func TestCheckResumeToken(t *testing.T) {
	full := ResumeExpect{ToName: "tank/nomad/pg/pg-1@xfer-1", ToGUID: 100}
	incr := ResumeExpect{ToName: "tank/nomad/pg/pg-1@xfer-2", ToGUID: 200, FromGUID: 100, Compressed: true}
	raw := ResumeExpect{ToName: "tank/nomad/enc/enc-1@xfer-1", ToGUID: 300, Raw: true, Compressed: true}
	genuine := func(e ResumeExpect) ResumeToken {
		return ResumeToken{ToName: e.ToName, ToGUID: e.ToGUID, FromGUID: e.FromGUID, RawOK: e.Raw, CompressOK: e.Compressed,
			Object: 7, Offset: 1 << 20, Bytes: 5 << 20}
	}
	with := func(e ResumeExpect, change func(*ResumeToken)) ResumeToken {
		t := genuine(e)
		change(&t)
		return t
	}
	cases := []struct {
		name    string
		token   ResumeToken
		expect  ResumeExpect
		wantErr string // "" accepts
	}{
		{name: "genuine full", token: genuine(full), expect: full},
		{name: "genuine incremental", token: genuine(incr), expect: incr},
		{name: "genuine raw", token: genuine(raw), expect: raw},
		{name: "incremental token that asks for less than allowed", token: with(incr, func(t *ResumeToken) { t.CompressOK = false }), expect: incr},
		{name: "another dataset's snapshot", expect: full,
			token:   with(full, func(t *ResumeToken) { t.ToName = "tank/other/secret@daily" }),
			wantErr: `toname is "tank/other/secret@daily"`},
		{name: "the right name, another snapshot's guid", expect: full,
			token: with(full, func(t *ResumeToken) { t.ToGUID = 999 }), wantErr: "toguid is 999"},
		{name: "a full stream where an incremental was meant", expect: incr,
			token: with(incr, func(t *ResumeToken) { t.FromGUID = 0 }), wantErr: "fromguid is 0, the transfer's is 100"},
		{name: "an incremental from another source", expect: incr,
			token: with(incr, func(t *ResumeToken) { t.FromGUID = 42 }), wantErr: "fromguid is 42"},
		{name: "an incremental where a full stream was meant", expect: full,
			token: with(full, func(t *ResumeToken) { t.FromGUID = 42 }), wantErr: "fromguid is 42, the transfer's is 0"},
		{name: "an encrypted dataset without rawok: zfs would decrypt it", expect: raw,
			token: with(raw, func(t *ResumeToken) { t.RawOK = false }), wantErr: "rawok is false, the transfer's is true"},
		{name: "raw asked of a transfer that is not", expect: full,
			token: with(full, func(t *ResumeToken) { t.RawOK = true }), wantErr: "rawok is true"},
		{name: "compression the transfer does not use", expect: full,
			token: with(full, func(t *ResumeToken) { t.CompressOK = true }), wantErr: "compressok is asked for"},
		{name: "large blocks the transfer does not use", expect: full,
			token: with(full, func(t *ResumeToken) { t.LargeBlockOK = true }), wantErr: "largeblockok"},
		{name: "embedded blocks the transfer does not use", expect: full,
			token: with(full, func(t *ResumeToken) { t.EmbedOK = true }), wantErr: "embedok"},
		{name: "a send of saved partial data", expect: full,
			token: with(full, func(t *ResumeToken) { t.SavedOK = true }), wantErr: "savedok"},
		{name: "an entry the sender does not know", expect: full,
			token: with(full, func(t *ResumeToken) { t.Other = map[string]string{"redact_snaps": "0x1 0x2"} }), wantErr: "redact_snaps = 0x1 0x2"},
		{name: "every mismatch listed", expect: raw,
			token:   with(raw, func(t *ResumeToken) { t.ToName, t.ToGUID, t.RawOK = "tank/x@y", 1, false }),
			wantErr: `toname is "tank/x@y", the transfer's is "tank/nomad/enc/enc-1@xfer-1"; toguid is 1, the transfer's is 300; rawok is false`},
		{name: "a transfer with nothing to resume", expect: ResumeExpect{}, token: genuine(full), wantErr: "names no snapshot"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			err := CheckResumeToken(tc.token, tc.expect)
			if tc.wantErr == "" {
				if err != nil {
					t.Fatalf("a genuine token was refused: %v", err)
				}
				return
			}
			if !errors.Is(err, ErrResumeTokenRefused) {
				t.Fatalf("got %v, want ErrResumeTokenRefused", err)
			}
			if !strings.Contains(err.Error(), tc.wantErr) {
				t.Fatalf("error %q does not say %q", err, tc.wantErr)
			}
		})
	}
}

func TestExpectFor(t *testing.T) {
	cases := []struct {
		name      string
		o         SendOptions
		encrypted bool
		want      ResumeExpect
	}{
		{"plain", SendOptions{Snapshot: "p/a@s"}, false, ResumeExpect{ToName: "p/a@s", ToGUID: 2, FromGUID: 1}},
		{"compressed large embedded", SendOptions{Snapshot: "p/a@s", Compressed: true, LargeBlocks: true, Embedded: true}, false,
			ResumeExpect{ToName: "p/a@s", ToGUID: 2, FromGUID: 1, Compressed: true, LargeBlocks: true, Embedded: true}},
		{"raw encrypted: no embedded data", SendOptions{Snapshot: "p/a@s", Raw: true}, true,
			ResumeExpect{ToName: "p/a@s", ToGUID: 2, FromGUID: 1, Raw: true, Compressed: true, LargeBlocks: true}},
		{"raw unencrypted: no rawok", SendOptions{Snapshot: "p/a@s", Raw: true}, false,
			ResumeExpect{ToName: "p/a@s", ToGUID: 2, FromGUID: 1, Compressed: true, LargeBlocks: true, Embedded: true}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			if got := ExpectFor(tc.o, 2, 1, tc.encrypted); got != tc.want {
				t.Fatalf("got %+v, want %+v", got, tc.want)
			}
		})
	}
}

// TestCheckResumeTokenRealTokens checks the captured tokens against what
// their transfers were, and against another's.
func TestCheckResumeTokenRealTokens(t *testing.T) {
	t.Parallel()
	tok := func(name string) ResumeToken {
		got, err := ParseResumeToken(readCapture(t, name).stdout)
		if err != nil {
			t.Fatal(err)
		}
		return got
	}
	full := ExpectFor(SendOptions{Snapshot: "tank/xfer/src@s1"}, guidS1, 0, false)
	incr := ExpectFor(SendOptions{Snapshot: "tank/xfer/src@s2", From: "tank/xfer/src#b1"}, guidS2, guidS1, false)
	raw := ExpectFor(SendOptions{Snapshot: "tank/xfer/enc@s1", Raw: true}, guidEnc, 0, true)
	for _, c := range []struct {
		token  string
		expect ResumeExpect
		ok     bool
	}{
		{"send-dry-token", full, true},
		{"send-dry-token-incr", incr, true},
		{"send-dry-token-raw", raw, true},
		{"send-dry-token", incr, false},
		{"send-dry-token-incr", full, false},
		// The same encrypted snapshot, planned without -w: zfs would decrypt.
		{"send-dry-token-raw", ExpectFor(SendOptions{Snapshot: "tank/xfer/enc@s1"}, guidEnc, 0, true), false},
		// Raw planned for a dataset thought unencrypted: no rawok expected.
		{"send-dry-token-raw", ExpectFor(SendOptions{Snapshot: "tank/xfer/enc@s1", Raw: true}, guidEnc, 0, false), false},
	} {
		err := CheckResumeToken(tok(c.token), c.expect)
		if (err == nil) != c.ok {
			t.Errorf("%s against %s: %v", c.token, c.expect.ToName, err)
		}
	}
}
