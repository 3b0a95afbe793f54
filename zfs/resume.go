package zfs

import (
	"errors"
	"fmt"
	"maps"
	"slices"
	"strconv"
	"strings"
)

// ResumeToken is what zfs decodes from a receive_resume_token
// (`zfs send -nvP -t`): where an interrupted receive stopped and what it
// was receiving. The receiving side makes the token; the sending side must
// not trust it (see CheckResumeToken).
type ResumeToken struct {
	// ToName and ToGUID are the snapshot being sent. zfs resumes from the
	// snapshot of that guid found near ToName.
	ToName string
	ToGUID uint64
	// FromGUID is the incremental source's guid, 0 for a full stream.
	FromGUID uint64
	// Object, Offset and Bytes are where the receive stopped.
	Object, Offset, Bytes uint64
	// The stream features the interrupted send used, which zfs uses again
	// when it resumes: compressed (-c), raw (-w), large blocks (-L),
	// embedded data (-e), and a send of saved partial data (-S).
	CompressOK, RawOK, LargeBlockOK, EmbedOK, SavedOK bool
	// Other holds every other entry, as printed (a redaction list, what a
	// newer OpenZFS adds). CheckResumeToken refuses a token with any: the
	// sender cannot tell what it would make zfs do.
	Other map[string]string
	// Size is zfs's estimate of what remains to send, in bytes (0 if it
	// printed none).
	Size uint64
}

// ParseResumeToken reads the output of the command SendResumeEstimateArgs
// builds: "resume token contents:", an nvlist as nvlist_print writes it
// ("\tname = value", numbers in hex), then the estimate lines.
func ParseResumeToken(out []byte) (ResumeToken, error) {
	text := string(out)
	_, body, ok := strings.Cut(text, "resume token contents:\n")
	if !ok {
		return ResumeToken{}, fmt.Errorf("no \"resume token contents:\" in %q", abbreviate(text))
	}
	var t ResumeToken
	seen := map[string]bool{}
	var estimate []string
	for _, line := range strings.Split(body, "\n") {
		switch {
		case line == "" || strings.HasPrefix(line, "nvlist version:"):
			continue
		case !strings.HasPrefix(line, "\t"):
			estimate = append(estimate, line)
			continue
		}
		name, value, ok := strings.Cut(strings.TrimPrefix(line, "\t"), " = ")
		if !ok {
			return ResumeToken{}, fmt.Errorf("token entry %q: not \"name = value\"", line)
		}
		if seen[name] {
			return ResumeToken{}, fmt.Errorf("token entry %q appears twice", name)
		}
		seen[name] = true
		if err := t.set(name, value); err != nil {
			return ResumeToken{}, fmt.Errorf("token entry %s: %w", name, err)
		}
	}
	for _, need := range []string{"toname", "toguid", "object", "offset", "bytes"} {
		if !seen[need] {
			return ResumeToken{}, fmt.Errorf("token has no %s", need)
		}
	}
	if len(estimate) > 0 {
		est, err := ParseSendEstimate([]byte(strings.Join(estimate, "\n")))
		if err != nil {
			return ResumeToken{}, err
		}
		t.Size = est.Size
	}
	return t, nil
}

// set stores one entry of the token's nvlist.
func (t *ResumeToken) set(name, value string) error {
	hex := func(dst *uint64) error {
		v, err := strconv.ParseUint(strings.TrimPrefix(value, "0x"), 16, 64)
		if err != nil || !strings.HasPrefix(value, "0x") {
			return fmt.Errorf("%q is not a hex number", value)
		}
		*dst = v
		return nil
	}
	flag := func(dst *bool) error {
		if value != "1" {
			return fmt.Errorf("%q is not a present boolean (1)", value)
		}
		*dst = true
		return nil
	}
	switch name {
	case "toname":
		t.ToName = value
		return nil
	case "toguid":
		return hex(&t.ToGUID)
	case "fromguid":
		return hex(&t.FromGUID)
	case "object":
		return hex(&t.Object)
	case "offset":
		return hex(&t.Offset)
	case "bytes":
		return hex(&t.Bytes)
	case "compressok":
		return flag(&t.CompressOK)
	case "rawok":
		return flag(&t.RawOK)
	case "largeblockok":
		return flag(&t.LargeBlockOK)
	case "embedok":
		return flag(&t.EmbedOK)
	case "savedok":
		return flag(&t.SavedOK)
	}
	if t.Other == nil {
		t.Other = map[string]string{}
	}
	t.Other[name] = value
	return nil
}

// ResumeExpect is what the sending side meant to send in one transfer:
// the only thing a resume token from the receiving side may resume.
type ResumeExpect struct {
	// ToName and ToGUID: the snapshot the transfer sends.
	ToName string
	ToGUID uint64
	// FromGUID: the incremental source's guid, 0 for a full stream.
	FromGUID uint64
	// Raw: the transfer sends an encrypted dataset raw. The token must
	// then say rawok, and otherwise must not: zfs would decrypt an
	// encrypted dataset for a token without it.
	Raw bool
	// Compressed, LargeBlocks, Embedded: features the transfer's stream
	// may use; a token may ask for these and no others.
	Compressed, LargeBlocks, Embedded bool
}

// ExpectFor is what a send with o means for a resume token, given the
// guids of o.Snapshot and o.From (0 for a full send) and whether the
// dataset is encrypted. It follows what zfs puts in a stream (dmu_send.c
// of 2.1): a raw send also uses compressed and large blocks, and embedded
// data unless the dataset is encrypted; a token says rawok only for an
// encrypted dataset sent raw.
func ExpectFor(o SendOptions, toGUID, fromGUID uint64, encrypted bool) ResumeExpect {
	return ResumeExpect{ToName: o.Snapshot, ToGUID: toGUID, FromGUID: fromGUID,
		Raw:         o.Raw && encrypted,
		Compressed:  o.Compressed || o.Raw,
		LargeBlocks: o.LargeBlocks || o.Raw,
		Embedded:    o.Embedded || (o.Raw && !encrypted),
	}
}

// ErrResumeTokenRefused: a resume token from the receiving side does not
// resume what the sending side meant to send, so it is not used.
var ErrResumeTokenRefused = errors.New("resume token refused")

// CheckResumeToken is the sending side's check of a token the receiving
// side sent it, before `zfs send -t` uses it: zfs sends whatever snapshot
// a token names, from whatever source, decrypted unless it says rawok
// (OpenZFS #14153: a hostile receiver can forge one). It must name exactly
// the transfer's snapshot (name and guid) and source (none for a full
// stream), ask for raw exactly when the transfer is raw, and for no
// feature the transfer does not use. Every mismatch is listed, wrapped in
// ErrResumeTokenRefused.
func CheckResumeToken(t ResumeToken, want ResumeExpect) error {
	var bad []string
	mismatch := func(what string, got, expected any) {
		bad = append(bad, fmt.Sprintf("%s is %v, the transfer's is %v", what, got, expected))
	}
	if want.ToName == "" || want.ToGUID == 0 {
		return fmt.Errorf("%w: the transfer names no snapshot to resume", ErrResumeTokenRefused)
	}
	if t.ToName != want.ToName {
		mismatch("toname", strconv.Quote(t.ToName), strconv.Quote(want.ToName))
	}
	if t.ToGUID != want.ToGUID {
		mismatch("toguid", t.ToGUID, want.ToGUID)
	}
	if t.FromGUID != want.FromGUID {
		mismatch("fromguid", t.FromGUID, want.FromGUID)
	}
	if t.RawOK != want.Raw {
		mismatch("rawok", t.RawOK, want.Raw)
	}
	for _, f := range []struct {
		name        string
		asked, fits bool
	}{
		{"compressok", t.CompressOK, want.Compressed},
		{"largeblockok", t.LargeBlockOK, want.LargeBlocks},
		{"embedok", t.EmbedOK, want.Embedded},
		{"savedok", t.SavedOK, false},
	} {
		if f.asked && !f.fits {
			bad = append(bad, f.name+" is asked for, the transfer does not use it")
		}
	}
	for _, name := range slices.Sorted(maps.Keys(t.Other)) {
		bad = append(bad, fmt.Sprintf("%s = %s is not an entry the transfer knows", name, t.Other[name]))
	}
	if len(bad) > 0 {
		return fmt.Errorf("%w: %s", ErrResumeTokenRefused, strings.Join(bad, "; "))
	}
	return nil
}
