package zfs

import (
	"errors"
	"fmt"
	"slices"
	"strings"
)

// The argv builders of replication: zfs send, zfs receive, zfs bookmark,
// and the resume token. Like the others they are pure and validate every
// operand first. What a stream may carry is the caller's to decide (see
// SendOptions); what a received dataset becomes is ReceiveOptions'.

// SendOptions select what `zfs send` streams and how.
type SendOptions struct {
	// Snapshot is what is sent, "pool/fs@snap".
	Snapshot string
	// From makes the stream incremental: a snapshot ("pool/fs@base") or a
	// bookmark ("pool/fs#base") of Snapshot's filesystem, older than it.
	// The receiving side must hold the snapshot From was (its guid). ""
	// sends the whole snapshot.
	From string
	// Intermediates (-I instead of -i) also sends every snapshot between
	// From and Snapshot. From must then be a snapshot: zfs refuses -I from
	// a bookmark.
	Intermediates bool
	// Raw (-w) sends the blocks as they are on disk: an encrypted dataset
	// stays encrypted in the stream and on the receiving pool, so its key
	// never travels. Without it zfs decrypts an encrypted dataset whose key
	// is loaded and sends plaintext.
	Raw bool
	// Compressed (-c) sends compressed blocks as they are, instead of
	// decompressing them for the stream.
	Compressed bool
	// LargeBlocks (-L) keeps records larger than 128 KiB as they are.
	LargeBlocks bool
	// Embedded (-e) sends blocks embedded in block pointers as such.
	Embedded bool
	// Props (-p) carries the snapshot's properties in the stream; the
	// receiving side applies them as received properties.
	Props bool
}

// flags renders the stream's format flags in a fixed order.
func (o SendOptions) flags() []string {
	var f []string
	for _, x := range []struct {
		on   bool
		flag string
	}{{o.LargeBlocks, "-L"}, {o.Compressed, "-c"}, {o.Embedded, "-e"}, {o.Props, "-p"}, {o.Raw, "-w"}} {
		if x.on {
			f = append(f, x.flag)
		}
	}
	return f
}

// SendArgs streams o.Snapshot (incrementally from o.From) on stdout.
func SendArgs(o SendOptions) ([]string, error) {
	return sendArgs(o, nil)
}

// SendEstimateArgs is SendArgs as a dry run (-n -v -P): no stream, the
// estimated size on stdout (ParseSendEstimate).
func SendEstimateArgs(o SendOptions) ([]string, error) {
	return sendArgs(o, []string{"-n", "-v", "-P"})
}

func sendArgs(o SendOptions, pre []string) ([]string, error) {
	if err := ValidateName(o.Snapshot, true); err != nil {
		return nil, err
	}
	args := append(append([]string{"send"}, pre...), o.flags()...)
	if o.From != "" {
		if err := validateIncrementalSource(o.From, o.Snapshot); err != nil {
			return nil, err
		}
		if o.Intermediates && strings.Contains(o.From, "#") {
			return nil, fmt.Errorf("send %s from %s: -I (intermediate snapshots) needs a snapshot as the source, not a bookmark", o.Snapshot, o.From)
		}
		i := "-i"
		if o.Intermediates {
			i = "-I"
		}
		args = append(args, i, o.From)
	} else if o.Intermediates {
		return nil, fmt.Errorf("send %s: intermediate snapshots need an incremental source (From)", o.Snapshot)
	}
	return append(args, o.Snapshot), nil
}

// validateIncrementalSource checks that from is a snapshot or bookmark of
// snap's filesystem. zfs would say the same later, after opening both;
// here a mistake never reaches a command line.
func validateIncrementalSource(from, snap string) error {
	if err := ValidateSnapshotOrBookmark(from); err != nil {
		return err
	}
	if fsOf(from) != fsOf(snap) {
		return fmt.Errorf("incremental source %q is not of %q's filesystem", from, snap)
	}
	if from == snap {
		return fmt.Errorf("incremental source %q is the snapshot sent", from)
	}
	return nil
}

// SendResumeArgs resumes an interrupted send from the receiving side's
// receive_resume_token. Only a token checked with CheckResumeToken may be
// given: zfs sends whatever a token names (OpenZFS #14153). raw adds -w,
// which zfs honours over the token: a token that dropped "rawok" still
// gets an encrypted dataset's blocks raw, never decrypted.
func SendResumeArgs(token string, raw bool) ([]string, error) {
	if err := ValidateResumeToken(token); err != nil {
		return nil, err
	}
	args := []string{"send"}
	if raw {
		args = append(args, "-w")
	}
	return append(args, "-t", token), nil
}

// SendResumeEstimateArgs decodes a resume token without sending: zfs
// prints the token's contents and what would remain to send (-n -v -P),
// read by ParseResumeToken.
func SendResumeEstimateArgs(token string) ([]string, error) {
	if err := ValidateResumeToken(token); err != nil {
		return nil, err
	}
	return []string{"send", "-n", "-v", "-P", "-t", token}, nil
}

// ReceiveOptions say how `zfs receive` stores a stream.
//
// There is no -F (force a rollback of the target, and destroy its
// snapshots that the stream does not have): a target modified since its
// newest snapshot fails with ErrDestinationModified, and the caller rolls
// it back, or not, as a step of its own that it can see and log. -F would
// do it silently, and with -R destroy filesystems too.
type ReceiveOptions struct {
	// Target is the filesystem the stream goes into, "pool/fs". For a
	// full stream it must not exist (its parent must); an incremental
	// stream applies on top of its newest snapshot, which must be the
	// stream's source. The snapshot received keeps the sent one's short
	// name: Target@<name>.
	Target string
	// Resumable (-s) keeps the partial state of an interrupted receive,
	// with a receive_resume_token on Target to resume it from; without it
	// an interruption discards everything received.
	Resumable bool
	// NoMount (-u) leaves the received filesystem unmounted.
	NoMount bool
	// Props are set on the received filesystem (-o name=value), over what
	// the stream carries, e.g. the ownership mark and canmount=noauto.
	Props map[string]string
	// Exclude are properties of the stream not applied (-x name): Target
	// inherits them instead.
	Exclude []string
}

// ReceiveArgs receives a stream from stdin.
func ReceiveArgs(o ReceiveOptions) ([]string, error) {
	if err := ValidateName(o.Target, false); err != nil {
		return nil, err
	}
	args := []string{"receive"}
	if o.Resumable {
		args = append(args, "-s")
	}
	if o.NoMount {
		args = append(args, "-u")
	}
	opts, err := propOptions(o.Props)
	if err != nil {
		return nil, err
	}
	args = append(args, opts...)
	exclude := slices.Sorted(slices.Values(o.Exclude))
	for i, p := range exclude {
		if err := ValidatePropertyName(p); err != nil {
			return nil, err
		}
		if _, set := o.Props[p]; set {
			return nil, fmt.Errorf("receive %s: property %s is both set (-o) and excluded (-x)", o.Target, p)
		}
		if i > 0 && exclude[i-1] == p {
			continue
		}
		args = append(args, "-x", p)
	}
	return append(args, o.Target), nil
}

// ReceiveAbortArgs discards the partial state of an interrupted resumable
// receive into target (-A): a partial full receive destroys target itself.
func ReceiveAbortArgs(target string) ([]string, error) {
	if err := ValidateName(target, false); err != nil {
		return nil, err
	}
	return []string{"receive", "-A", target}, nil
}

// BookmarkArgs bookmarks snapshot snap as bookmark ("pool/fs#name"), of
// the same filesystem. A bookmark keeps what an incremental send needs of
// the snapshot (its guid and txg) without keeping its blocks.
func BookmarkArgs(snap, bookmark string) ([]string, error) {
	if err := ValidateName(snap, true); err != nil {
		return nil, err
	}
	if err := ValidateBookmarkName(bookmark); err != nil {
		return nil, err
	}
	if fsOf(snap) != fsOf(bookmark) {
		return nil, fmt.Errorf("bookmark %q is not of %q's filesystem", bookmark, snap)
	}
	return []string{"bookmark", snap, bookmark}, nil
}

// resumeTokenColumns are the columns of ResumeTokensArgs, in output order.
var resumeTokenColumns = []string{"name", "receive_resume_token"}

// ResumeTokensArgs lists the receive_resume_token of dataset and, if
// recursive, of every filesystem below it: "-" where no interrupted receive
// left one (ParseResumeTokens).
func ResumeTokensArgs(dataset string, recursive bool) ([]string, error) {
	if err := ValidateName(dataset, false); err != nil {
		return nil, err
	}
	args := []string{"list", "-H", "-p"}
	if recursive {
		args = append(args, "-r")
	}
	return append(args, "-t", "filesystem", "-o", strings.Join(resumeTokenColumns, ","), dataset), nil
}

// bookmarkColumns are the columns of ListBookmarksArgs, in output order.
var bookmarkColumns = []string{"name", "guid", "createtxg"}

// ListBookmarksArgs lists the bookmarks of root and everything below it.
func ListBookmarksArgs(root string) ([]string, error) {
	if err := ValidateName(root, false); err != nil {
		return nil, err
	}
	return []string{"list", "-H", "-p", "-r", "-t", "bookmark", "-o", strings.Join(bookmarkColumns, ","), root}, nil
}

// ValidateBookmarkName checks a bookmark name, "pool/fs#name", by the
// rules of ValidateName.
func ValidateBookmarkName(name string) error {
	ds, mark, ok := strings.Cut(name, "#")
	if !ok {
		return fmt.Errorf("%q is not a bookmark name (dataset#bookmark)", name)
	}
	if len(name) > MaxNameLen {
		return fmt.Errorf("bookmark name %q is longer than %d characters", name, MaxNameLen)
	}
	if err := ValidateName(ds, false); err != nil {
		return fmt.Errorf("bookmark name %q: %w", name, err)
	}
	if err := validComponent(mark); err != nil {
		return fmt.Errorf("bookmark name %q: %w", name, err)
	}
	return nil
}

// ValidateSnapshotOrBookmark checks a name that may be either, as an
// incremental source is.
func ValidateSnapshotOrBookmark(name string) error {
	if strings.Contains(name, "#") {
		return ValidateBookmarkName(name)
	}
	return ValidateName(name, true)
}

// maxResumeToken bounds a token: the one of a plain send is about 200
// characters; a token longer than a property value can be is no token.
const maxResumeToken = 8192

// ValidateResumeToken checks a receive_resume_token's shape before it goes
// on a command line: "<version>-<checksum>-<length>-<payload>", decimal
// version, hex fields. This says nothing of what the token names: that is
// CheckResumeToken's, on the contents zfs decodes.
func ValidateResumeToken(token string) error {
	if token == "" {
		return errors.New("empty resume token")
	}
	if len(token) > maxResumeToken {
		return fmt.Errorf("resume token is longer than %d characters", maxResumeToken)
	}
	parts := strings.Split(token, "-")
	if len(parts) != 4 {
		return fmt.Errorf("resume token %q: not four '-'-separated fields (version-checksum-length-payload)", abbreviate(token))
	}
	for i, p := range parts {
		if p == "" {
			return fmt.Errorf("resume token %q: field %d is empty", abbreviate(token), i+1)
		}
		for j := 0; j < len(p); j++ {
			c := p[j]
			if !isDigit(c) && (i == 0 || c < 'a' || c > 'f') {
				return fmt.Errorf("resume token %q: field %d holds %q", abbreviate(token), i+1, string(c))
			}
		}
	}
	return nil
}

// abbreviate keeps an error about a long token readable.
func abbreviate(s string) string {
	if len(s) <= 40 {
		return s
	}
	return s[:37] + "..."
}

// fsOf is the filesystem of a snapshot or bookmark name.
func fsOf(name string) string {
	if i := strings.IndexAny(name, "@#"); i >= 0 {
		return name[:i]
	}
	return name
}
