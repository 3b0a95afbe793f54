package zfstest

import (
	"archive/tar"
	"bufio"
	"bytes"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"hash/crc32"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"sort"
	"strconv"
	"strings"

	"github.com/nomad-device-zfs/nomad-device-zfs/zfs"
)

// The fake's send stream. It is not OpenZFS's format; it behaves like it
// where a transfer can tell: a stream names its snapshot and source by
// guid, carries the snapshot's files, ends with a checksum, and a receive
// that stops early knows how far it got. An incremental stream carries
// every file of its snapshot (not only the changed blocks): what is
// received is the same.
//
//	ZFSTEST-STREAM 1\n
//	<header, one line of JSON>\n
//	<payload bytes from header.Offset on: a tar of the snapshot's files>
//	END <sha256 of the whole payload>\n

const streamMagic = "ZFSTEST-STREAM 1\n"

// streamHeader says what a stream is.
type streamHeader struct {
	ToName   string `json:"toname"`
	ToGUID   uint64 `json:"toguid"`
	FromGUID uint64 `json:"fromguid,omitempty"`
	FromName string `json:"fromname,omitempty"`
	// Size is the whole payload's length; a resumed stream carries it from
	// Offset on.
	Size   int64 `json:"size"`
	Offset int64 `json:"offset,omitempty"`
	// The features the stream uses, as zfs send's -w -c -L -e.
	Raw        bool `json:"raw,omitempty"`
	Compressed bool `json:"compressed,omitempty"`
	Large      bool `json:"large,omitempty"`
	Embedded   bool `json:"embedded,omitempty"`
	// Props are the snapshot's filesystem's local properties (-p).
	Props    map[string]string `json:"props,omitempty"`
	Creation int64             `json:"creation"`
}

// encodeStream writes a stream: header, the payload from h.Offset, and the
// checksum of the whole payload.
func encodeStream(h streamHeader, payload []byte) []byte {
	var b bytes.Buffer
	b.WriteString(streamMagic)
	hj, _ := json.Marshal(h)
	b.Write(hj)
	b.WriteByte('\n')
	b.Write(payload[h.Offset:])
	sum := sha256.Sum256(payload)
	fmt.Fprintf(&b, "END %x\n", sum)
	return b.Bytes()
}

// decodedStream is what a receive read: the header, the payload bytes that
// came, and whether the stream was whole.
type decodedStream struct {
	h        streamHeader
	payload  []byte // the bytes from h.Offset on that arrived
	complete bool   // all of them, and an END line
	sum      string // the END line's checksum, if complete
}

// errBadMagic and errNoHeader are what a receive says of input that is no
// stream, or too little of one to know what it is.
var (
	errBadMagic = errors.New("invalid stream (bad magic number)")
	errNoHeader = errors.New("failed to read from stream")
)

func decodeStream(in []byte) (decodedStream, error) {
	if len(in) == 0 {
		return decodedStream{}, errNoHeader
	}
	if !bytes.HasPrefix(in, []byte(streamMagic)) {
		if bytes.HasPrefix([]byte(streamMagic), in) {
			return decodedStream{}, errNoHeader
		}
		return decodedStream{}, errBadMagic
	}
	rest := in[len(streamMagic):]
	line, rest, ok := bytes.Cut(rest, []byte{'\n'})
	var d decodedStream
	if !ok || json.Unmarshal(line, &d.h) != nil {
		return decodedStream{}, errNoHeader
	}
	want := d.h.Size - d.h.Offset
	if int64(len(rest)) < want {
		d.payload = rest
		return d, nil
	}
	d.payload = rest[:want]
	end := string(rest[want:])
	if sum, ok := strings.CutPrefix(end, "END "); ok && strings.HasSuffix(sum, "\n") && len(sum) == 65 {
		d.complete, d.sum = true, strings.TrimSuffix(sum, "\n")
	}
	return d, nil
}

// payloadSum is the checksum an END line carries.
func payloadSum(payload []byte) string {
	sum := sha256.Sum256(payload)
	return hex.EncodeToString(sum[:])
}

// tarDir makes the payload of a snapshot: its files in name order, so the
// same snapshot always gives the same bytes (a resumed send continues
// exactly where the first one stopped).
func tarDir(dir string) ([]byte, error) {
	var paths []string
	err := filepath.WalkDir(dir, func(p string, e fs.DirEntry, err error) error {
		if err != nil {
			if p == dir && errors.Is(err, fs.ErrNotExist) {
				return filepath.SkipAll
			}
			return err
		}
		if p != dir {
			paths = append(paths, p)
		}
		return nil
	})
	if err != nil {
		return nil, err
	}
	sort.Strings(paths)
	var b bytes.Buffer
	tw := tar.NewWriter(&b)
	for _, p := range paths {
		info, err := os.Lstat(p)
		if err != nil {
			return nil, err
		}
		link := ""
		if info.Mode()&fs.ModeSymlink != 0 {
			if link, err = os.Readlink(p); err != nil {
				return nil, err
			}
		}
		hdr, err := tar.FileInfoHeader(info, link)
		if err != nil {
			return nil, err
		}
		rel, _ := filepath.Rel(dir, p)
		hdr.Name = filepath.ToSlash(rel)
		hdr.Uname, hdr.Gname = "", ""
		if err := tw.WriteHeader(hdr); err != nil {
			return nil, err
		}
		if info.Mode().IsRegular() {
			f, err := os.Open(p)
			if err != nil {
				return nil, err
			}
			_, err = io.Copy(tw, f)
			f.Close()
			if err != nil {
				return nil, err
			}
		}
	}
	if err := tw.Close(); err != nil {
		return nil, err
	}
	return b.Bytes(), nil
}

// untarDir writes a payload's files into dir, which must be empty.
func untarDir(payload []byte, dir string) error {
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return err
	}
	tr := tar.NewReader(bytes.NewReader(payload))
	for {
		hdr, err := tr.Next()
		if err == io.EOF {
			return nil
		}
		if err != nil {
			return err
		}
		to := filepath.Join(dir, filepath.FromSlash(hdr.Name))
		if !strings.HasPrefix(to, dir+string(filepath.Separator)) {
			return fmt.Errorf("stream entry %q is outside the dataset", hdr.Name)
		}
		switch hdr.Typeflag {
		case tar.TypeDir:
			if err := os.MkdirAll(to, hdr.FileInfo().Mode().Perm()); err != nil {
				return err
			}
		case tar.TypeSymlink:
			if err := os.Symlink(hdr.Linkname, to); err != nil {
				return err
			}
		case tar.TypeReg:
			f, err := os.OpenFile(to, os.O_CREATE|os.O_WRONLY|os.O_TRUNC, hdr.FileInfo().Mode().Perm())
			if err != nil {
				return err
			}
			_, err = io.Copy(f, tr)
			if cerr := f.Close(); err == nil {
				err = cerr
			}
			if err != nil {
				return err
			}
			if err := os.Chtimes(to, hdr.ModTime, hdr.ModTime); err != nil {
				return err
			}
		}
	}
}

// The fake's resume tokens have the real ones' shape, "1-<checksum>-<length>-<payload>"
// in lower-case hex, so zfs.ValidateResumeToken accepts them; the payload
// is the JSON of tokenContents instead of a compressed nvlist, and the
// checksum a CRC-32 instead of fletcher-4. Like a real one, anyone can make
// one that decodes: the checksum only catches accidents.
type tokenContents struct {
	ToName       string `json:"toname"`
	ToGUID       uint64 `json:"toguid"`
	FromGUID     uint64 `json:"fromguid,omitempty"`
	Object       uint64 `json:"object"`
	Offset       uint64 `json:"offset"`
	Bytes        uint64 `json:"bytes"`
	CompressOK   bool   `json:"compressok,omitempty"`
	RawOK        bool   `json:"rawok,omitempty"`
	LargeBlockOK bool   `json:"largeblockok,omitempty"`
	EmbedOK      bool   `json:"embedok,omitempty"`
	SavedOK      bool   `json:"savedok,omitempty"`
	// Other entries, as a forged token may carry; zfs would print them.
	Other map[string]string `json:"other,omitempty"`
}

// EncodeResumeToken makes a token the fake's zfs send -t accepts, saying
// what t says: what a receive_resume_token of the fake holds, or what a
// hostile receiver forges.
func EncodeResumeToken(t zfs.ResumeToken) string {
	return encodeToken(tokenContents{ToName: t.ToName, ToGUID: t.ToGUID, FromGUID: t.FromGUID, Object: t.Object,
		Offset: t.Offset, Bytes: t.Bytes, CompressOK: t.CompressOK, RawOK: t.RawOK, LargeBlockOK: t.LargeBlockOK,
		EmbedOK: t.EmbedOK, SavedOK: t.SavedOK, Other: t.Other})
}

func encodeToken(c tokenContents) string {
	js, _ := json.Marshal(c)
	return fmt.Sprintf("1-%x-%x-%s", crc32.ChecksumIEEE(js), len(js), hex.EncodeToString(js))
}

// decodeToken is zfs_send_resume_token_to_nvlist: the libzfs message for
// a token it cannot read.
func decodeToken(token string) (tokenContents, string) {
	parts := strings.Split(token, "-")
	if len(parts) != 4 || parts[0] != "1" {
		return tokenContents{}, "resume token is corrupt (invalid format)"
	}
	// libzfs's order: the checksum of the payload first, then its length.
	js, err := hex.DecodeString(parts[3])
	n, lerr := strconv.ParseUint(parts[2], 16, 32)
	if err != nil || lerr != nil {
		return tokenContents{}, "resume token is corrupt (invalid format)"
	}
	if fmt.Sprintf("%x", crc32.ChecksumIEEE(js)) != parts[1] {
		return tokenContents{}, "resume token is corrupt (incorrect checksum)"
	}
	if uint64(len(js)) != n {
		return tokenContents{}, "resume token is corrupt (payload is not the stated length)"
	}
	var c tokenContents
	if json.Unmarshal(js, &c) != nil || c.ToName == "" || c.ToGUID == 0 {
		return tokenContents{}, "resume token is corrupt"
	}
	return c, ""
}

// printToken writes a token's contents as `zfs send -v -t` does
// (nvlist_print: numbers in hex, booleans as 1).
func printToken(w *strings.Builder, c tokenContents) {
	w.WriteString("resume token contents:\nnvlist version: 0\n")
	if c.FromGUID != 0 {
		fmt.Fprintf(w, "\tfromguid = 0x%x\n", c.FromGUID)
	}
	fmt.Fprintf(w, "\tobject = 0x%x\n\toffset = 0x%x\n\tbytes = 0x%x\n\ttoguid = 0x%x\n\ttoname = %s\n",
		c.Object, c.Offset, c.Bytes, c.ToGUID, c.ToName)
	for _, f := range []struct {
		on   bool
		name string
	}{{c.LargeBlockOK, "largeblockok"}, {c.EmbedOK, "embedok"}, {c.CompressOK, "compressok"}, {c.RawOK, "rawok"}, {c.SavedOK, "savedok"}} {
		if f.on {
			fmt.Fprintf(w, "\t%s = 1\n", f.name)
		}
	}
	keys := make([]string, 0, len(c.Other))
	for k := range c.Other {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	for _, k := range keys {
		fmt.Fprintf(w, "\t%s = %s\n", k, c.Other[k])
	}
}

// readAll reads a stream's input as a zfs process reads its stdin: up to
// its end or the first error, which then ends the input there.
func readAll(r io.Reader) ([]byte, error) {
	var b bytes.Buffer
	_, err := b.ReadFrom(bufio.NewReader(r))
	return b.Bytes(), err
}

// readsStream reports whether zfs args read a stream from stdin: a
// receive that is not -A.
func readsStream(args []string) bool {
	if len(args) == 0 || args[0] != "receive" && args[0] != "recv" {
		return false
	}
	opts, _, _ := getopt(args[1:], "AdehMnuvFsx:o:c")
	for _, o := range opts {
		if o.c == 'A' {
			return false
		}
	}
	return true
}
