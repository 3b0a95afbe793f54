package zfs

import (
	"fmt"
	"strconv"
	"strings"
)

// SendEstimate is what a dry-run send (-n -v -P) printed.
type SendEstimate struct {
	// Full is true for a full stream; From is an incremental's source as
	// zfs printed it.
	Full bool
	From string
	// To is the snapshot sent; Size the estimated stream size in bytes.
	To   string
	Size uint64
}

// ParseSendEstimate reads the -n -v -P output of a send: a "full" or
// "incremental" line per snapshot, then "size\t<bytes>", the total.
func ParseSendEstimate(out []byte) (SendEstimate, error) {
	var e SendEstimate
	var sized bool
	for n, line := range strings.Split(strings.TrimRight(string(out), "\n"), "\n") {
		f := strings.Split(line, "\t")
		var err error
		switch {
		case f[0] == "full" && len(f) == 3:
			e.Full, e.From, e.To = true, "", f[1]
		case f[0] == "incremental" && len(f) == 4:
			e.Full, e.From, e.To = false, f[1], f[2]
		case f[0] == "size" && len(f) == 2:
			e.Size, err = strconv.ParseUint(f[1], 10, 64)
			sized = true
		default:
			return SendEstimate{}, fmt.Errorf("line %d: %q is not a -P estimate line", n+1, line)
		}
		if err != nil {
			return SendEstimate{}, fmt.Errorf("line %d: %q: %w", n+1, line, err)
		}
	}
	if !sized {
		return SendEstimate{}, fmt.Errorf("no \"size\" line in %q", abbreviate(string(out)))
	}
	return e, nil
}

// ResumeState is one row of ResumeTokensArgs' listing.
type ResumeState struct {
	Dataset string
	// Token is the receive_resume_token, "" where no interrupted resumable
	// receive left one.
	Token string
}

// ParseResumeTokens parses the output of the command ResumeTokensArgs
// builds; "-" (unset) is "".
func ParseResumeTokens(out []byte) ([]ResumeState, error) {
	var states []ResumeState
	err := eachLine(out, len(resumeTokenColumns), func(_ string, f []string) error {
		p := fieldParser{fields: f, cols: resumeTokenColumns}
		st := ResumeState{Dataset: f[0], Token: p.str(1)}
		if st.Token != "" {
			if err := ValidateResumeToken(st.Token); err != nil {
				return fmt.Errorf("dataset %q: %w", st.Dataset, err)
			}
		}
		states = append(states, st)
		return nil
	})
	return states, err
}

// Bookmark is one row of ListBookmarksArgs' listing.
type Bookmark struct {
	// Name is "pool/fs#name".
	Name string
	// GUID is the guid of the snapshot it was made from: an incremental
	// send from the bookmark applies on a snapshot of that guid.
	GUID      uint64
	CreateTxg uint64
}

// ParseBookmarks parses the output of the command ListBookmarksArgs builds.
func ParseBookmarks(out []byte) ([]Bookmark, error) {
	var marks []Bookmark
	err := eachLine(out, len(bookmarkColumns), func(_ string, f []string) error {
		p := fieldParser{fields: f, cols: bookmarkColumns}
		b := Bookmark{Name: f[0], GUID: p.uint(1), CreateTxg: p.uint(2)}
		if p.err != nil {
			return fmt.Errorf("bookmark %q: %w", b.Name, p.err)
		}
		marks = append(marks, b)
		return nil
	})
	return marks, err
}
