package sim

import (
	"bytes"
	"context"
	"errors"
	"io"
	"net/http"
	"strconv"
	"strings"
	"time"

	"github.com/nomad-device-zfs/nomad-device-zfs/model"
	"github.com/nomad-device-zfs/nomad-device-zfs/zfs/zfstest"
)

// A hostile sender (XHostile) and a stalling one (XStall). Unlike a lie
// (xlink.go), a hostile stream is the snapshot the headers name, guid and
// all, so the transfer's verification passes: what it carries beyond the
// data is what the receiver's own rules must refuse (model.ReceiveProps
// and ReceiveExclude, CopyNotOneFilesystem, CopyOverLimits), checked as
// X8-X10 (xclaim.go). The fake zfs underneath makes such streams
// (zfstest.StreamWithProps, StreamWithFile); it emulates no replication
// stream (send -R), so the dataset one brings below the copy is made on
// the receiving node when its receive returns, as that receive would have
// made it; and no volume, so a zvol in the stream is not modelled.

// hostileKind is what a hostile sender's stream carries.
type hostileKind int

const (
	// hostileProps: a full stream carrying every property of the plugin's
	// own, with values no plugin writes, readonly=on and another class's
	// limits (as zfs send -p of a dataset that has them).
	hostileProps hostileKind = iota
	// hostileChild: a stream that brings a dataset below the copy (a
	// replication stream, zfs send -R).
	hostileChild
	// hostileOversize: the final snapshot holding more than the receiving
	// class's refquota and quota.
	hostileOversize
)

func (h hostileKind) String() string {
	return [...]string{"the plugin's own properties, readonly and another class's limits",
		"a dataset below the sent filesystem", "more data than the class's quota"}[h]
}

// What a hostile sender's stream carries (hostileProps): each property of
// the plugin's own set to make the copy something else (held, by an
// allocation no one knows, retained as another dataset), with values no
// plugin writes where the value is free (a generation, an index, a time, a
// name), so that X9 tells them from the receiver's own; readonly=on (a
// copy its replacement could not write); and another class's limits.
var peerProps = map[string]string{
	model.PropOwner:       parent + "/pg/pg-1",
	model.PropState:       string(model.StateHeld),
	model.PropHolder:      "00000000-0000-4000-8bad-00000000beef",
	model.PropGeneration:  "4242",
	model.PropSince:       "4242424242",
	model.PropHolderIndex: "4242424242",
	model.PropOutcome:     model.OutcomeMigrated,
	model.PropRetainAs:    parent + "/pg/from-a-peer",
	model.PropExpires:     "4242424242",
	"readonly":            "on",
	"quota":               strconv.Itoa(8 << 30),
	"refquota":            strconv.Itoa(8 << 30),
	"compression":         "off",
}

// xOversize is what an oversized final snapshot holds beyond the data:
// more than the class's refquota and quota (xClassProps).
const xOversize = 3 << 20

// hostile is the stream body from node from, of copy target (h its
// headers), as a hostile sender sends it while XHostile lasts: one of the
// kinds the stream fits, drawn; else body unchanged. Each fits a stream
// that arrives whole (tamper); the properties a full one (a receive
// applies a full stream's); the oversized data a final one (each
// increment replaces the copy's files).
func (w *XWorld) hostile(from *xnode, target string, h http.Header, body []byte) []byte {
	if !w.now.Before(w.hostileTill) || h.Get("Ndz-Resumed") == "true" {
		return body
	}
	kinds := []hostileKind{hostileChild}
	if h.Get("Ndz-From-Guid") == "0" {
		kinds = append(kinds, hostileProps)
	}
	if snapName(h.Get("Ndz-Snapshot")) == model.MigrateFinal {
		kinds = append(kinds, hostileOversize)
	}
	kind := kinds[w.rng.IntN(len(kinds))]
	out, err := body, error(nil)
	switch kind {
	case hostileProps:
		out, err = zfstest.StreamWithProps(body, peerProps)
	case hostileChild:
		w.replicating[target] = true
	case hostileOversize:
		out, err = zfstest.StreamWithFile(body, "from-a-peer", xOversize)
	}
	if err != nil {
		return body // not a whole stream: the send failed (seed 9280844: the plugin died before it)
	}
	w.counts.Hostile++
	w.logf("  link: %s is hostile: %s sends %s", from.name, h.Get("Ndz-Snapshot"), kind)
	return out
}

// replicate makes, below copy target on node n, the dataset a replication
// stream would have brought there (the fake emulates no send -R): as a
// receive of a hostile sender's stream (hostileChild) succeeds, before
// anything lists the copy (xrunner.Stream). When
// an earlier one brought it already (the receiving plugin died before its
// check of the copy, and its next pull received the increment into the
// same copy: seed 7740581), the increment updates it.
func (n *xnode) replicate(target string) {
	// A replica's first snapshot, and a whole stream when the holder lost
	// its base, are received beside it (model.ReplicaBeside).
	key := target
	if !n.w.replicating[key] {
		key = strings.TrimSuffix(target, ".whole")
	}
	if !n.w.replicating[key] {
		return
	}
	delete(n.w.replicating, key)
	child := target + "/from-a-peer"
	if _, err := n.fake.Run(context.Background(), "zfs", "list", "-H", "-o", "name", child); err == nil {
		n.replicated[target] = true
		n.w.logf("  link: the stream updated %s on %s", child, n.name)
		return
	}
	if _, err := n.fake.Run(context.Background(), "zfs", "create", "-o", "canmount=off", child); err != nil {
		n.w.violate("harness", "%s: the dataset a replication stream brings: %v", n.name, err)
		return
	}
	n.replicated[target] = true
	n.w.logf("  link: the stream brought %s on %s", child, n.name)
}

// stalled is a stream body that stops after its first at bytes, for d of
// simulated time, then goes on: the pull receiving it pauses there, its
// copy's lock held, and the world goes on meanwhile. A stream whose
// sending plugin died, or whose link went down, during the stall is cut
// there instead.
func (w *XWorld) stalled(from, by *xnode, body []byte) io.Reader {
	at := w.rng.IntN(len(body) + 1)
	d := time.Duration(10+w.rng.IntN(170)) * time.Second
	w.counts.Stalls++
	w.logf("  link: the stream from %s stops at byte %d of %d for %s", from.name, at, len(body), d)
	s := &xstall{w: w, from: from, by: by, sender: from.p, receiver: by.p, d: d}
	return io.MultiReader(bytes.NewReader(body[:at]), s, bytes.NewReader(body[at:]))
}

// xstall is the pause of a stalled stream.
type xstall struct {
	w                *XWorld
	from, by         *xnode
	sender, receiver *xplugin
	d                time.Duration
	done             bool
}

func (s *xstall) Read([]byte) (int, error) {
	if s.done {
		return 0, io.EOF
	}
	s.done = true
	w := s.w
	if x := w.turn; x != nil && s.receiver != nil {
		w.stalling++
		x.stall(s.receiver.ctx, w.now.Add(s.d))
		w.stalling--
		w.rx.calmSince = latest(w.rx.calmSince, w.now) // the fault ends here: XR6's calm begins
	}
	switch {
	case s.from.p != s.sender || s.sender == nil || s.sender.run.dead:
		w.logf("  link: the stalled stream from %s ends with its plugin", s.from.name)
		return 0, errors.New("read tcp: connection reset by peer")
	case !s.from.connected || !s.by.connected || w.now.Before(w.link.downTill):
		w.logf("  link: the stalled stream from %s is cut off", s.from.name)
		return 0, errors.New("read tcp: i/o timeout")
	}
	w.logf("  link: the stream from %s goes on", s.from.name)
	return 0, io.EOF
}

// stall is a pause of a pull inside its receive, until its turn comes at
// until: it hands the turn back, and waits for the next, or for its
// plugin's end (stopped: ctx, the plugin's own, is done). A pass that
// cancels the pull meanwhile does not wake it: the pull goes on, and
// fails, in its own turn, not beside the world's goroutine.
func (x *xpull) stall(ctx context.Context, until time.Time) {
	pk := &xpark{until: until, wake: make(chan struct{})}
	select {
	case x.parks <- pk:
	case <-ctx.Done():
		return
	}
	select {
	case <-pk.wake:
	case <-ctx.Done():
	}
}
