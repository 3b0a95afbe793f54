package zfs

import (
	"context"
	"errors"
	"fmt"
	"io"
)

// The Client's replication methods. Send and Receive stream through the
// runner's Streamer; the others are one short command each, like the
// rest of the Client.

// Send streams o.Snapshot (incrementally from o.From) into w. It returns
// once zfs has exited and everything it wrote is in w.
func (c *Client) Send(ctx context.Context, o SendOptions, w io.Writer) error {
	args, err := SendArgs(o)
	if err != nil {
		return invalid(err)
	}
	return c.stream(ctx, args, nil, w)
}

// SendResume resumes an interrupted send from a receive_resume_token into
// w. The token must have passed CheckResumeToken against what this side
// meant to send; raw as in SendResumeArgs.
func (c *Client) SendResume(ctx context.Context, token string, raw bool, w io.Writer) error {
	args, err := SendResumeArgs(token, raw)
	if err != nil {
		return invalid(err)
	}
	return c.stream(ctx, args, nil, w)
}

// SendEstimate is the size a Send with o would stream, by zfs's estimate.
func (c *Client) SendEstimate(ctx context.Context, o SendOptions) (SendEstimate, error) {
	args, err := SendEstimateArgs(o)
	if err != nil {
		return SendEstimate{}, invalid(err)
	}
	out, err := c.r.Run(ctx, "zfs", args...)
	if err != nil {
		return SendEstimate{}, err
	}
	return ParseSendEstimate(out)
}

// DecodeResumeToken asks zfs what a resume token holds, sending nothing.
// A token zfs cannot decode is ErrBadResumeToken.
func (c *Client) DecodeResumeToken(ctx context.Context, token string) (ResumeToken, error) {
	args, err := SendResumeEstimateArgs(token)
	if err != nil {
		return ResumeToken{}, fmt.Errorf("%w: %w", ErrBadResumeToken, err)
	}
	out, err := c.r.Run(ctx, "zfs", args...)
	if err != nil {
		return ResumeToken{}, err
	}
	return ParseResumeToken(out)
}

// Receive stores the stream read from r as o says. An interrupted
// resumable receive is ErrInterrupted and leaves a token on o.Target
// (ResumeToken).
func (c *Client) Receive(ctx context.Context, o ReceiveOptions, r io.Reader) error {
	args, err := ReceiveArgs(o)
	if err != nil {
		return invalid(err)
	}
	if r == nil {
		return invalid(errors.New("receive: no stream to read"))
	}
	return c.stream(ctx, args, r, nil)
}

// ReceiveAbort discards the partial state an interrupted resumable receive
// left on target. Nothing to discard (or no target) is success, so a
// cleanup can be retried.
func (c *Client) ReceiveAbort(ctx context.Context, target string) error {
	err := c.zfs(ctx)(ReceiveAbortArgs(target))
	if errors.Is(err, ErrNotExist) {
		return nil
	}
	return err
}

// ResumeToken returns dataset's receive_resume_token, "" if it has none.
func (c *Client) ResumeToken(ctx context.Context, dataset string) (string, error) {
	states, err := c.resumeTokens(ctx, dataset, false)
	if err != nil {
		return "", err
	}
	if len(states) != 1 || states[0].Dataset != dataset {
		return "", fmt.Errorf("resume token of %s: the listing has %d rows", dataset, len(states))
	}
	return states[0].Token, nil
}

// ResumeTokens lists the resume tokens of root and every filesystem below.
func (c *Client) ResumeTokens(ctx context.Context, root string) ([]ResumeState, error) {
	return c.resumeTokens(ctx, root, true)
}

func (c *Client) resumeTokens(ctx context.Context, root string, recursive bool) ([]ResumeState, error) {
	args, err := ResumeTokensArgs(root, recursive)
	if err != nil {
		return nil, invalid(err)
	}
	out, err := c.r.Run(ctx, "zfs", args...)
	if err != nil {
		return nil, err
	}
	return ParseResumeTokens(out)
}

// Bookmark bookmarks snapshot snap as bookmark. One of that name already
// there is ErrExists: it may be another snapshot's.
func (c *Client) Bookmark(ctx context.Context, snap, bookmark string) error {
	return c.zfs(ctx)(BookmarkArgs(snap, bookmark))
}

// Bookmarks lists the bookmarks of root and everything below it.
func (c *Client) Bookmarks(ctx context.Context, root string) ([]Bookmark, error) {
	args, err := ListBookmarksArgs(root)
	if err != nil {
		return nil, invalid(err)
	}
	out, err := c.r.Run(ctx, "zfs", args...)
	if err != nil {
		return nil, err
	}
	return ParseBookmarks(out)
}

// ErrCannotStream: the Client's runner has no Stream method.
var ErrCannotStream = errors.New("the zfs runner cannot stream (no Stream method)")

func (c *Client) stream(ctx context.Context, args []string, stdin io.Reader, stdout io.Writer) error {
	s, ok := c.r.(Streamer)
	if !ok {
		return fmt.Errorf("zfs %s: %w (%T)", args[0], ErrCannotStream, c.r)
	}
	if stdin == nil && stdout == nil {
		return invalid(fmt.Errorf("zfs %s: neither a stream to read nor one to write", args[0]))
	}
	if args[0] == "send" && stdout == nil {
		return invalid(errors.New("send: no writer for the stream"))
	}
	return s.Stream(ctx, "zfs", args, stdin, stdout)
}
