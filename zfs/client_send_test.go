package zfs

import (
	"bytes"
	"context"
	"errors"
	"io"
	"reflect"
	"strings"
	"testing"
)

// streamingRunner is recordingRunner that also streams: it records each
// stream's argv, copies stdin into in and out into stdout.
type streamingRunner struct {
	recordingRunner
	streams [][]string
	out     []byte
	in      bytes.Buffer
	err     error
}

func (r *streamingRunner) Stream(_ context.Context, cmd string, args []string, stdin io.Reader, stdout io.Writer) error {
	r.streams = append(r.streams, append([]string{cmd}, args...))
	if stdin != nil {
		if _, err := io.Copy(&r.in, stdin); err != nil {
			return err
		}
	}
	if stdout != nil {
		if _, err := stdout.Write(r.out); err != nil {
			return err
		}
	}
	return r.err
}

func TestClientStreams(t *testing.T) {
	r := &streamingRunner{out: []byte("stream")}
	c := NewClient(r)
	var got bytes.Buffer
	if err := c.Send(t.Context(), SendOptions{Snapshot: "tank/a@s2", From: "tank/a#s1", Raw: true}, &got); err != nil {
		t.Fatal(err)
	}
	if err := c.SendResume(t.Context(), "1-ab-c0-789c", true, &got); err != nil {
		t.Fatal(err)
	}
	if err := c.Receive(t.Context(), ReceiveOptions{Target: "tank/b", Resumable: true}, bytes.NewReader([]byte("data"))); err != nil {
		t.Fatal(err)
	}
	want := [][]string{
		{"zfs", "send", "-w", "-i", "tank/a#s1", "tank/a@s2"},
		{"zfs", "send", "-w", "-t", "1-ab-c0-789c"},
		{"zfs", "receive", "-s", "tank/b"},
	}
	if !reflect.DeepEqual(r.streams, want) {
		t.Fatalf("streams %q, want %q", r.streams, want)
	}
	if got.String() != "streamstream" || r.in.String() != "data" {
		t.Fatalf("streamed out %q, in %q", got.String(), r.in.String())
	}
}

func TestClientStreamsRefuse(t *testing.T) {
	cases := []struct {
		name string
		call func(c *Client) error
		want error
	}{
		{"a runner that cannot stream", func(c *Client) error {
			return NewClient(&recordingRunner{}).Send(t.Context(), SendOptions{Snapshot: "tank/a@s"}, io.Discard)
		}, ErrCannotStream},
		{"send with nowhere to write", func(c *Client) error {
			return c.Send(t.Context(), SendOptions{Snapshot: "tank/a@s"}, nil)
		}, ErrInvalid},
		{"receive with nothing to read", func(c *Client) error {
			return c.Receive(t.Context(), ReceiveOptions{Target: "tank/b"}, nil)
		}, ErrInvalid},
		{"a forged token's shape", func(c *Client) error {
			return c.SendResume(t.Context(), "1-ab-c0-789c -R tank", false, io.Discard)
		}, ErrInvalid},
		{"decoding a token that is none", func(c *Client) error {
			_, err := c.DecodeResumeToken(t.Context(), "--help")
			return err
		}, ErrBadResumeToken},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			r := &streamingRunner{}
			if err := tc.call(NewClient(r)); !errors.Is(err, tc.want) {
				t.Fatalf("got %v, want %v", err, tc.want)
			}
			if len(r.streams)+len(r.calls) != 0 {
				t.Fatalf("ran %q %q", r.streams, r.calls)
			}
		})
	}
}

func TestClientReplicationQueries(t *testing.T) {
	t.Run("decode a captured token", func(t *testing.T) {
		r := &recordingRunner{out: readCapture(t, "send-dry-token-incr").stdout}
		tok, err := NewClient(r).DecodeResumeToken(t.Context(), "1-cbe1e5361-e8-789c6360")
		if err != nil {
			t.Fatal(err)
		}
		if tok.ToName != "tank/xfer/src@s2" || tok.FromGUID != guidS1 {
			t.Fatalf("token %+v", tok)
		}
		if want := []string{"zfs", "send", "-n", "-v", "-P", "-t", "1-cbe1e5361-e8-789c6360"}; !reflect.DeepEqual(r.calls[0], want) {
			t.Fatalf("ran %q", r.calls[0])
		}
	})
	t.Run("no token is empty", func(t *testing.T) {
		r := &recordingRunner{out: []byte("tank/b\t-\n")}
		tok, err := NewClient(r).ResumeToken(t.Context(), "tank/b")
		if err != nil || tok != "" {
			t.Fatalf("token %q, %v", tok, err)
		}
	})
	t.Run("a copy's listing carries its resume token, none as empty", func(t *testing.T) {
		row := func(name, typ, token string) string {
			return strings.Join([]string{name, typ, "1", "2", "3", "-", "no", "0", "0", "0", "lz4", "1.00", "131072", "off", "-", "7", token, "o"}, "\t")
		}
		r := &recordingRunner{out: []byte(row("tank/b", "filesystem", "1-abc-e8") + "\n" + row("tank/b@s1", "snapshot", "-") + "\n")}
		rows, err := NewClient(r).ListAll(t.Context(), "tank/b", []string{"a:owner"})
		if err != nil {
			t.Fatal(err)
		}
		if len(rows) != 2 || rows[0].ResumeToken != "1-abc-e8" || rows[1].ResumeToken != "" || rows[0].User.Get("a:owner") != "o" {
			t.Fatalf("rows %+v", rows)
		}
	})
	t.Run("aborting nothing is success", func(t *testing.T) {
		for _, capture := range []string{"err-recv-abort-none", "err-recv-abort-missing"} {
			c := readCapture(t, capture)
			r := &recordingRunner{err: NewError("zfs", nil, string(c.stderr), c.rc)}
			if err := NewClient(r).ReceiveAbort(t.Context(), "tank/xfer/part"); err != nil {
				t.Errorf("%s: %v", capture, err)
			}
		}
	})
	t.Run("a bookmark already there is not success", func(t *testing.T) {
		c := readCapture(t, "bookmark-exists")
		r := &recordingRunner{err: NewError("zfs", nil, string(c.stderr), c.rc)}
		if err := NewClient(r).Bookmark(t.Context(), "tank/a@s1", "tank/a#b1"); !errors.Is(err, ErrExists) {
			t.Fatalf("got %v, want ErrExists", err)
		}
	})
	t.Run("an estimate", func(t *testing.T) {
		r := &recordingRunner{out: readCapture(t, "send-dry-incr").stdout}
		est, err := NewClient(r).SendEstimate(t.Context(), SendOptions{Snapshot: "tank/xfer/src@s2", From: "tank/xfer/src@s1"})
		if err != nil || est.Size != 2109424 {
			t.Fatalf("estimate %+v, %v", est, err)
		}
	})
}
