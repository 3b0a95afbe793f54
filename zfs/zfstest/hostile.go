package zfstest

import (
	"archive/tar"
	"bytes"
	"errors"
	"io"
	"maps"
	"time"
)

// What a hostile sender can make of a stream the fake sent: the same
// snapshot (its name and guid, so a receiver's check of the guid passes),
// carrying what an honest `zfs send` of it would not. Nothing in a stream
// but its payload's checksum binds it, and a sender computes that itself.

// errNotWhole: only a whole stream from its start is rewritten.
var errNotWhole = errors.New("zfstest: not a whole stream from its start")

// StreamWithProps returns stream carrying props as a `zfs send -p` of a
// filesystem that has them set would, values as the fake keeps them (sizes
// in bytes). A receive applies a full stream's properties, less its -x
// ones, under its -o ones.
func StreamWithProps(stream []byte, props map[string]string) ([]byte, error) {
	d, err := wholeStream(stream)
	if err != nil {
		return nil, err
	}
	h := d.h
	h.Props = maps.Clone(h.Props)
	if h.Props == nil {
		h.Props = map[string]string{}
	}
	maps.Copy(h.Props, props)
	return encodeStream(h, d.payload), nil
}

// StreamWithFile returns stream whose snapshot also holds a file name of
// size bytes (zeros): more data than was sent under the same name and guid.
func StreamWithFile(stream []byte, name string, size int) ([]byte, error) {
	d, err := wholeStream(stream)
	if err != nil {
		return nil, err
	}
	var b bytes.Buffer
	tw := tar.NewWriter(&b)
	tr := tar.NewReader(bytes.NewReader(d.payload))
	for {
		hdr, err := tr.Next()
		if err == io.EOF {
			break
		}
		if err != nil {
			return nil, err
		}
		if err := tw.WriteHeader(hdr); err != nil {
			return nil, err
		}
		if _, err := io.Copy(tw, tr); err != nil {
			return nil, err
		}
	}
	hdr := &tar.Header{Name: name, Mode: 0o644, Size: int64(size), Typeflag: tar.TypeReg, ModTime: time.Unix(d.h.Creation, 0)}
	if err := tw.WriteHeader(hdr); err != nil {
		return nil, err
	}
	if _, err := tw.Write(make([]byte, size)); err != nil {
		return nil, err
	}
	if err := tw.Close(); err != nil {
		return nil, err
	}
	h := d.h
	h.Size = int64(b.Len())
	return encodeStream(h, b.Bytes()), nil
}

// wholeStream decodes a stream that is whole and starts at its payload's
// first byte (not a resumed one).
func wholeStream(stream []byte) (decodedStream, error) {
	d, err := decodeStream(stream)
	switch {
	case err != nil:
		return decodedStream{}, err
	case !d.complete || d.h.Offset != 0 || payloadSum(d.payload) != d.sum:
		return decodedStream{}, errNotWhole
	}
	return d, nil
}
