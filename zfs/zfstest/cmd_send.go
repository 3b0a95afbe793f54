package zfstest

import (
	"fmt"
	"os"
	"path/filepath"
	"sort"
	"strconv"
	"strings"
)

// zfs send, as far as a transfer uses it: one snapshot, full or
// incremental from a snapshot or bookmark, -w -c -L -e -p recorded in the
// stream, -t to resume, -n -v -P to estimate and to decode a token. The
// messages are OpenZFS 2.1.11's (testdata/openzfs-2.1.11/capture-send.sh).
func (s *sess) zfsSend(args []string) int {
	opts, operands, msg := getopt(args, "DnPpRVvLecwhbi:I:t:S")
	if msg != "" {
		return s.usage("send", msg)
	}
	var h streamHeader
	var dry, verbose, parsable, props bool
	var from, token string
	intermediates := false
	for _, o := range opts {
		switch o.c {
		case 'n':
			dry = true
		case 'v':
			verbose = true
		case 'P':
			parsable, verbose = true, true
		case 'p':
			props = true
		case 'w':
			h.Raw = true
		case 'c':
			h.Compressed = true
		case 'L':
			h.Large = true
		case 'e':
			h.Embedded = true
		case 'i':
			from = o.arg
		case 'I':
			from, intermediates = o.arg, true
		case 't':
			token = o.arg
		default:
			s.errf("zfstest: send -%c is not emulated\n", o.c)
			return 2
		}
	}
	if token != "" {
		if from != "" || props {
			return s.usage("send", "invalid flags combined with -t\n")
		}
		if len(operands) > 0 {
			return s.usage("send", "too many arguments\n")
		}
		return s.sendResume(token, h, dry, verbose, parsable)
	}
	switch {
	case len(operands) == 0:
		return s.usage("send", "missing snapshot argument\n")
	case len(operands) > 1:
		return s.usage("send", "too many arguments\n")
	}
	snap := s.openDataset(operands[0], tSnap)
	if snap == nil {
		return 1
	}
	if intermediates {
		if strings.Contains(from, "#") {
			s.errf("Error: multiple snapshots cannot be sent from a bookmark.\n")
			return 1
		}
		s.errf("zfstest: send -I is not emulated\n")
		return 2
	}
	h.ToName, h.ToGUID, h.Creation = snap.Name, snap.GUID, snap.Creation
	if from != "" {
		if strings.HasPrefix(from, "@") || strings.HasPrefix(from, "#") {
			from = fsName(snap.Name) + from
		}
		guid, txg, ok := s.incrementalSource(from, snap.Name)
		if !ok {
			return 1
		}
		if fsOfName(from) != fsName(snap.Name) || txg >= snap.CreateTxg {
			s.errf("warning: cannot send '%s': not an earlier snapshot from the same fs\n", snap.Name)
			return 1
		}
		h.FromGUID, h.FromName = guid, from
	}
	if props {
		h.Props = map[string]string{}
		for k, v := range s.st.Datasets[fsName(snap.Name)].Props {
			h.Props[k] = v
		}
	}
	payload, err := tarDir(s.st.snapDir(snap))
	if err != nil {
		s.errf("warning: cannot send '%s': %v\n", snap.Name, err)
		return 1
	}
	h.Size = int64(len(payload))
	stream := encodeStream(h, payload)
	if verbose && dry {
		s.estimate(h, int64(len(stream)), parsable)
	}
	if !dry {
		s.out.Write(stream)
	}
	return 0
}

// incrementalSource opens a snapshot or bookmark, the source of an
// increment of snap: its guid and txg. A bookmark that is not there is
// reported as OpenZFS 2.1.11 does (capture err-rep-send-from-gone-bookmark),
// a snapshot as any dataset (err-send-from-missing).
func (s *sess) incrementalSource(name, snap string) (guid, txg uint64, ok bool) {
	if strings.Contains(name, "#") {
		if b := s.st.Bookmarks[name]; b != nil {
			return b.GUID, b.CreateTxg, true
		}
		s.errf("warning: cannot send '%s': incremental source (%s) does not exist\n", snap, name)
		return 0, 0, false
	}
	d := s.openDataset(name, tSnap)
	if d == nil {
		return 0, 0, false
	}
	return d.GUID, d.CreateTxg, true
}

// estimate prints what -n -v (-P) prints of a stream.
func (s *sess) estimate(h streamHeader, size int64, parsable bool) {
	switch {
	case parsable && h.FromGUID == 0:
		s.outf("full\t%s\t%d\n", h.ToName, size)
	case parsable:
		s.outf("incremental\t%s\t%s\t%d\n", h.FromName, h.ToName, size)
	case h.FromGUID == 0:
		s.outf("full send of %s estimated size is %s\n", h.ToName, niceNum(uint64(size)))
	default:
		s.outf("send from %s to %s estimated size is %s\n", h.FromName, h.ToName, niceNum(uint64(size)))
	}
	if parsable {
		s.outf("size\t%d\n", size)
	} else {
		s.outf("total estimated size is %s\n", niceNum(uint64(size)))
	}
}

// sendResume is zfs_send_resume_impl: the token says which snapshot (by
// guid, near its name), from which source, and how many bytes the
// receiving side has; -w and the others add to the token's features.
func (s *sess) sendResume(token string, flags streamHeader, dry, verbose, parsable bool) int {
	c, bad := decodeToken(token)
	if bad != "" {
		s.errf("cannot resume send: %s\n", bad)
		return 255
	}
	out := s.errf
	if dry && verbose {
		out = s.outf
	}
	if verbose {
		var b strings.Builder
		printToken(&b, c)
		out("%s", b.String())
	}
	var snap = s.st.Datasets[c.ToName]
	if snap == nil || !snap.Snap || snap.GUID != c.ToGUID {
		snap = nil
		for _, d := range s.st.snapshots(fsName(c.ToName)) {
			if d.GUID == c.ToGUID {
				snap = d
			}
		}
	}
	if snap == nil {
		if s.st.Datasets[c.ToName] != nil {
			s.errf("cannot resume send: '%s' is no longer the same snapshot used in the initial send\n", c.ToName)
		} else {
			s.errf("cannot resume send: '%s' used in the initial send no longer exists\n", c.ToName)
		}
		return 255
	}
	h := streamHeader{ToName: snap.Name, ToGUID: snap.GUID, Creation: snap.Creation,
		Raw: flags.Raw || c.RawOK, Compressed: flags.Compressed || c.CompressOK,
		Large: flags.Large || c.LargeBlockOK, Embedded: flags.Embedded || c.EmbedOK}
	if c.FromGUID != 0 {
		name := s.st.nameOfGUID(fsName(snap.Name), c.FromGUID)
		if name == "" {
			s.errf("cannot resume send: incremental source %#x no longer exists\n", c.FromGUID)
			return 255
		}
		h.FromGUID, h.FromName = c.FromGUID, name
	}
	payload, err := tarDir(s.st.snapDir(snap))
	if err != nil {
		s.errf("warning: cannot send '%s': %v\n", snap.Name, err)
		return 1
	}
	h.Size = int64(len(payload))
	if c.Bytes > uint64(h.Size) {
		s.errf("cannot resume send: resume token is corrupt (offset past the stream)\n")
		return 255
	}
	h.Offset = int64(c.Bytes)
	stream := encodeStream(h, payload)
	if verbose && dry {
		s.estimate(h, int64(len(stream)), parsable)
	}
	if !dry {
		s.out.Write(stream)
	}
	return 0
}

// nameOfGUID finds the snapshot or bookmark of fs with guid.
func (st *state) nameOfGUID(fs string, guid uint64) string {
	for _, d := range st.snapshots(fs) {
		if d.GUID == guid {
			return d.Name
		}
	}
	for _, b := range st.bookmarksOf(fs) {
		if b.GUID == guid {
			return b.Name
		}
	}
	return ""
}

// zfsBookmark is `zfs bookmark <snapshot> <bookmark>`.
func (s *sess) zfsBookmark(args []string) int {
	_, operands, msg := getopt(args, "")
	switch {
	case msg != "":
		return s.usage("bookmark", msg)
	case len(operands) < 1:
		return s.usage("bookmark", "missing source argument\n")
	case len(operands) < 2:
		return s.usage("bookmark", "missing bookmark argument\n")
	}
	src, name := operands[0], operands[1]
	if strings.HasPrefix(name, "#") {
		name = fsName(src) + name
	}
	fsname, mark, ok := strings.Cut(name, "#")
	if !ok || mark == "" || validateName(fsname, tFS, false) != "" || strings.ContainsAny(mark, "@#/ ") {
		s.errf("invalid bookmark name '%s': must contain a '#'\n", name)
		return 1
	}
	snap := s.st.Datasets[src]
	if snap == nil || !snap.Snap {
		// OpenZFS 2.1.11 opens the source first, and a failure there is a
		// usage error (capture err-rep-bookmark-no-snap).
		return s.usage("bookmark", fmt.Sprintf("cannot open '%s': dataset does not exist\n", src))
	}
	if fsname != fsName(src) {
		s.errf("cannot create bookmark '%s': source is not an ancestor of the new bookmark's dataset\n", name)
		return 1
	}
	if s.st.Bookmarks[name] != nil {
		s.errf("cannot create bookmark '%s': bookmark exists\n", name)
		return 1
	}
	s.changed()
	if s.st.Bookmarks == nil {
		s.st.Bookmarks = map[string]*bookmark{}
	}
	s.st.Bookmarks[name] = &bookmark{Name: name, GUID: snap.GUID, CreateTxg: snap.CreateTxg, Creation: snap.Creation}
	return 0
}

// bookmark keeps what an incremental send needs of a snapshot.
type bookmark struct {
	Name      string `json:"name"`
	GUID      uint64 `json:"guid"`
	CreateTxg uint64 `json:"createtxg"`
	Creation  int64  `json:"creation"`
}

// bookmarksOf lists fs's bookmarks, oldest first.
func (st *state) bookmarksOf(fs string) []*bookmark {
	var out []*bookmark
	for _, b := range st.Bookmarks {
		if fsOfName(b.Name) == fs {
			out = append(out, b)
		}
	}
	sort.Slice(out, func(i, j int) bool { return out[i].CreateTxg < out[j].CreateTxg })
	return out
}

// destroyBookmark is `zfs destroy fs#bookmark`.
func (s *sess) destroyBookmark(name string) int {
	if s.st.Bookmarks[name] == nil {
		s.errf("bookmark '%s' does not exist.\n", name)
		return 1
	}
	s.changed()
	delete(s.st.Bookmarks, name)
	return 0
}

// listBookmarks is `zfs list -t bookmark` of the given roots (all pools
// when none): name, guid, createtxg, creation, type; other columns "-".
func (s *sess) listBookmarks(operands []string, cols []column, recurse, scripted bool) int {
	var rows []*bookmark
	for _, b := range s.st.Bookmarks {
		keep := len(operands) == 0
		for _, root := range operands {
			fs := fsOfName(b.Name)
			keep = keep || fs == root || recurse && isDescendant(fs, root)
		}
		if keep {
			rows = append(rows, b)
		}
	}
	for _, root := range operands {
		if s.st.Datasets[root] == nil {
			s.errf("cannot open '%s': dataset does not exist\n", root)
			return 1
		}
	}
	sort.Slice(rows, func(i, j int) bool {
		if a, b := fsOfName(rows[i].Name), fsOfName(rows[j].Name); a != b {
			return a < b
		}
		return rows[i].CreateTxg < rows[j].CreateTxg
	})
	for _, b := range rows {
		vals := make([]string, len(cols))
		for i, c := range cols {
			vals[i] = "-"
			if v := bookmarkValue(b, c, true); v.ok {
				vals[i] = v.val
			}
		}
		sep := "  "
		if scripted {
			sep = "\t"
		}
		s.outf("%s\n", strings.Join(vals, sep))
	}
	return 0
}

// bookmarksUnder reports whether a listing of operands (every pool when
// none; their descendants too when recurse) would show a bookmark.
func (s *sess) bookmarksUnder(operands []string, recurse bool) bool {
	for name := range s.st.Bookmarks {
		fs := fsOfName(name)
		if len(operands) == 0 {
			return true
		}
		for _, root := range operands {
			if fs == root || recurse && isDescendant(fs, root) {
				return true
			}
		}
	}
	return false
}

// fsOfName is the filesystem part of a snapshot or bookmark name.
func fsOfName(name string) string {
	if i := strings.IndexAny(name, "@#"); i >= 0 {
		return name[:i]
	}
	return name
}

// partialFile holds the payload bytes an interrupted resumable receive
// into d kept.
func (st *state) partialFile(d *dataset) string {
	return filepath.Join(st.StoreDir, "partial", strconv.FormatUint(d.GUID, 10))
}

// forgetPartial drops d's partial receive.
func (st *state) forgetPartial(d *dataset) {
	if d.Partial != nil {
		_ = os.Remove(st.partialFile(d))
		d.Partial = nil
	}
}

// resumeToken is d's receive_resume_token, "" if it has none.
func (st *state) resumeToken(d *dataset) string {
	p := d.Partial
	if p == nil {
		return ""
	}
	n := uint64(0)
	if fi, err := os.Stat(st.partialFile(d)); err == nil {
		n = uint64(fi.Size())
	}
	return encodeToken(tokenContents{ToName: p.Header.ToName, ToGUID: p.Header.ToGUID, FromGUID: p.Header.FromGUID,
		Object: 1, Offset: n, Bytes: n, RawOK: p.Header.Raw, CompressOK: p.Header.Compressed || p.Header.Raw,
		LargeBlockOK: p.Header.Large, EmbedOK: p.Header.Embedded})
}

// partialRecv is what an interrupted resumable receive kept of a stream
// (its payload bytes are in partialFile).
type partialRecv struct {
	Header streamHeader `json:"header"`
	// Full: the dataset exists only as this partial receive of a full
	// stream; aborting it destroys the dataset.
	Full bool `json:"full,omitempty"`
}
