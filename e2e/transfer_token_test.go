//go:build e2e

package e2e

import (
	"bytes"
	"compress/zlib"
	"encoding/binary"
	"encoding/hex"
	"fmt"
	"io"
	"strconv"
	"strings"
)

// What a hostile receiver does with a genuine receive_resume_token: it
// rewrites the token's contents and re-makes it the way OpenZFS 2.1 makes
// one (dsl_dataset.c get_receive_resume_stats_impl): the nvlist packed in
// native encoding, zlib-compressed, hex-encoded, behind
// "1-<first word of its fletcher-4>-<packed length>-". Nothing in it is a
// secret, so zfs send -t takes the forgery as it takes the original
// (OpenZFS #14153); these helpers let a test show it on real zfs.

// tokenPair is one nvpair of a token: its name, data type (1 boolean, 8
// uint64, 9 string), element count and value bytes.
type tokenPair struct {
	name  string
	typ   int32
	nelem int32
	value []byte
}

// parsedToken is a token's nvlist: the packed header (encoding, endian,
// version, flags) and its pairs.
type parsedToken struct {
	header []byte
	pairs  []tokenPair
}

// parseToken undoes a token's framing and walks its native nvpairs:
// int32 size, int16 name size, int16 reserved, int32 elements, int32 type,
// the name (NUL-terminated, padded to 8), the value (padded to 8).
func parseToken(token string) (*parsedToken, error) {
	parts := strings.Split(token, "-")
	if len(parts) != 4 {
		return nil, fmt.Errorf("token %q: not four fields", token)
	}
	compressed, err := hex.DecodeString(parts[3])
	if err != nil {
		return nil, err
	}
	zr, err := zlib.NewReader(bytes.NewReader(compressed))
	if err != nil {
		return nil, err
	}
	packed, err := io.ReadAll(zr)
	if err != nil {
		return nil, err
	}
	if n, _ := strconv.ParseUint(parts[2], 16, 32); int(n) != len(packed) {
		return nil, fmt.Errorf("token: packed length %d, header says %s", len(packed), parts[2])
	}
	le := binary.LittleEndian
	if len(packed) < 12 || packed[0] != 0 || packed[1] != 1 {
		return nil, fmt.Errorf("token: not a native little-endian nvlist (%x)", packed[:min(4, len(packed))])
	}
	t := &parsedToken{header: packed[:12]}
	for off := 12; ; {
		if off+4 > len(packed) {
			return nil, fmt.Errorf("token: truncated at %d", off)
		}
		size := int(int32(le.Uint32(packed[off:])))
		if size == 0 {
			return t, nil
		}
		if size < 16 || off+size > len(packed) {
			return nil, fmt.Errorf("token: pair of size %d at %d", size, off)
		}
		p := packed[off : off+size]
		nameSize := int(int16(le.Uint16(p[4:])))
		pair := tokenPair{nelem: int32(le.Uint32(p[8:])), typ: int32(le.Uint32(p[12:]))}
		pair.name = string(p[16 : 16+nameSize-1])
		pair.value = append([]byte(nil), p[align8(16+nameSize):]...)
		t.pairs = append(t.pairs, pair)
		off += size
	}
}

func align8(n int) int { return (n + 7) &^ 7 }

// set replaces or adds a pair.
func (t *parsedToken) set(p tokenPair) {
	for i := range t.pairs {
		if t.pairs[i].name == p.name {
			t.pairs[i] = p
			return
		}
	}
	t.pairs = append(t.pairs, p)
}

// drop removes a pair.
func (t *parsedToken) drop(name string) {
	var keep []tokenPair
	for _, p := range t.pairs {
		if p.name != name {
			keep = append(keep, p)
		}
	}
	t.pairs = keep
}

func uint64Pair(name string, v uint64) tokenPair {
	b := make([]byte, 8)
	binary.LittleEndian.PutUint64(b, v)
	return tokenPair{name: name, typ: 8, nelem: 1, value: b}
}

func stringPair(name, v string) tokenPair {
	return tokenPair{name: name, typ: 9, nelem: 1, value: append([]byte(v), 0)}
}

// encode packs, compresses and frames the token as OpenZFS does.
func (t *parsedToken) encode() string {
	le := binary.LittleEndian
	var packed bytes.Buffer
	packed.Write(t.header)
	for _, p := range t.pairs {
		nameSize := len(p.name) + 1
		head := align8(16 + nameSize)
		size := head + align8(len(p.value))
		b := make([]byte, size)
		le.PutUint32(b[0:], uint32(size))
		le.PutUint16(b[4:], uint16(nameSize))
		le.PutUint32(b[8:], uint32(p.nelem))
		le.PutUint32(b[12:], uint32(p.typ))
		copy(b[16:], p.name)
		copy(b[head:], p.value)
		packed.Write(b)
	}
	packed.Write(make([]byte, 4)) // the end: a pair of size 0
	var compressed bytes.Buffer
	zw := zlib.NewWriter(&compressed)
	_, _ = zw.Write(packed.Bytes())
	_ = zw.Close()
	c := compressed.Bytes()
	var word0 uint64 // fletcher-4's first word: the sum of the 32-bit words
	for i := 0; i+4 <= len(c); i += 4 {
		word0 += uint64(le.Uint32(c[i:]))
	}
	return fmt.Sprintf("1-%x-%x-%s", word0, packed.Len(), hex.EncodeToString(c))
}
