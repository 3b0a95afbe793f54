package zfstest

import (
	"os"
	"path/filepath"
	"strings"
)

// zfs receive of the fake's streams into one named filesystem: -s keeps an
// interrupted receive's partial state (a resume token on the target), -u
// leaves it unmounted, -o and -x set and exclude properties, -A aborts a
// partial receive. -F, -d, -e and recursive streams are not emulated.
// Messages are OpenZFS 2.1.11's (testdata/openzfs-2.1.11/capture-send.sh).
func (s *sess) zfsReceive(args []string) int {
	opts, operands, msg := getopt(args, "AdehMnuvFsx:o:c")
	if msg != "" {
		return s.usage("receive", msg)
	}
	var resumable, noMount, abort bool
	var props []kv
	var exclude []string
	for _, o := range opts {
		switch o.c {
		case 's':
			resumable = true
		case 'u':
			noMount = true
		case 'A':
			abort = true
		case 'o':
			if props, msg = parseprop(props, o.arg); msg != "" {
				s.errf("%s", msg)
				return 1
			}
		case 'x':
			exclude = append(exclude, o.arg)
		default:
			s.errf("zfstest: receive -%c is not emulated\n", o.c)
			return 2
		}
	}
	switch {
	case len(operands) == 0:
		return s.usage("receive", "missing snapshot argument\n")
	case len(operands) > 1:
		return s.usage("receive", "too many arguments\n")
	}
	target := operands[0]
	if abort {
		return s.receiveAbort(target)
	}
	if strings.ContainsAny(target, "@#") {
		s.errf("zfstest: receive into a snapshot name is not emulated\n")
		return 2
	}
	in, err := decodeStream(s.stdin)
	if err != nil {
		s.errf("cannot receive: %v\n", err)
		return 1
	}
	kind := "new filesystem"
	switch {
	case in.h.Offset > 0:
		kind = "resume"
	case in.h.FromGUID != 0:
		kind = "incremental"
	}
	fail := func(format string, a ...any) int {
		s.errf("cannot receive "+kind+" stream: "+format, a...)
		return 1
	}
	d := s.st.Datasets[target]
	resuming := in.h.Offset > 0
	switch {
	case s.poolSuspended("receive", target):
		return 1
	case resuming && (d == nil || d.Partial == nil || d.Partial.Header.ToGUID != in.h.ToGUID):
		// The kernel's EINVAL, which 2.1 words so for a receive with -s.
		return fail("kernel modules must be upgraded to receive this stream.\n")
	case resuming:
	case in.h.FromGUID == 0 && d != nil:
		return fail("destination '%s' exists\nmust specify -F to overwrite it\n", target)
	case in.h.FromGUID == 0 && s.st.Datasets[parentName(target)] == nil:
		s.errf("cannot open '%s': dataset does not exist\n", parentName(target))
		return fail("unable to restore to destination\n")
	case in.h.FromGUID != 0 && d == nil:
		return fail("destination '%s' does not exist\n", target)
	case in.h.FromGUID != 0 && d.Partial != nil:
		return fail("destination %s contains partially-complete state from \"zfs receive -s\".\n", target)
	case in.h.FromGUID != 0:
		if s.hasSnapshotGUID(target, in.h.ToGUID) {
			return 0 // already there (err-recv-snap-exists exits 0)
		}
		snaps := s.st.snapshots(target)
		if len(snaps) == 0 || snaps[len(snaps)-1].GUID != in.h.FromGUID {
			return fail("most recent snapshot of %s does not\nmatch incremental source\n", target)
		}
		if s.modified(d, snaps[len(snaps)-1]) {
			return fail("destination %s has been modified\nsince most recent snapshot\n", target)
		}
	}
	propsIn, msg := s.validProps(props, true, false)
	if msg != "" {
		return fail("%s", msg)
	}

	// What has arrived of the payload, counting a partial receive's bytes.
	var payload []byte
	if resuming {
		saved, err := os.ReadFile(s.st.partialFile(d))
		if err != nil || int64(len(saved)) != in.h.Offset {
			return fail("checksum mismatch or incomplete stream.\n")
		}
		payload = append(saved, in.payload...)
	} else {
		payload = in.payload
	}
	complete := in.complete && int64(len(payload)) == in.h.Size && payloadSum(payload) == in.sum
	if complete && int64(len(payload)) > s.poolFree(target) {
		complete = false
		in.h.Size = -1 // not resumable into this pool either; remembered as a partial below
		s.errf("cannot receive %s stream: out of space\n", kind)
		return s.keepPartial(target, d, in.h, payload, resumable, propsIn, exclude, kind, true)
	}
	if !complete {
		if !resumable {
			return fail("checksum mismatch or incomplete stream.\n")
		}
		return s.keepPartial(target, d, in.h, payload, resumable, propsIn, exclude, kind, false)
	}

	s.changed()
	if d == nil {
		d = s.st.newDataset(target, false, s.now.Unix())
	} else if d.Mounted {
		if err := s.st.unmountFS(d); err != nil {
			return fail("%v\n", err)
		}
		defer func() {
			if !noMount && s.st.canMount(d) {
				_ = s.st.mountFS(d)
			}
		}()
	}
	s.st.forgetPartial(d)
	full := in.h.FromGUID == 0
	if full {
		applyProps(d, in.h.Props, propsIn, exclude)
	}
	dir := s.st.parkedDir(d)
	_ = os.RemoveAll(dir)
	if err := untarDir(payload, dir); err != nil {
		return fail("%v\n", err)
	}
	snap := s.st.newDataset(target+"@"+shortSnap(in.h.ToName), true, in.h.Creation)
	snap.GUID = in.h.ToGUID
	if err := copyTree(dir, s.st.snapDir(snap), nil, ""); err != nil {
		return fail("%v\n", err)
	}
	if full && !noMount && s.st.canMount(d) && s.st.canmount(d) == "on" {
		if err := s.st.mountFS(d); err != nil {
			s.errf("%v\n", err)
			return 1
		}
	}
	return 0
}

// keepPartial ends an interrupted receive: with -s what came is kept (a
// full stream's target exists, unmountable, with the -o properties), and
// zfs prints how to resume it.
func (s *sess) keepPartial(target string, d *dataset, h streamHeader, payload []byte, resumable bool,
	props []kv, exclude []string, kind string, noSpace bool) int {
	if !resumable {
		return 1
	}
	s.changed()
	full := d == nil
	if full {
		d = s.st.newDataset(target, false, s.now.Unix())
		applyProps(d, nil, props, exclude)
		_ = os.MkdirAll(s.st.parkedDir(d), 0o755)
	}
	if d.Partial == nil {
		d.Partial = &partialRecv{Header: h, Full: full}
	}
	d.Partial.Header.Offset = 0
	if noSpace {
		d.Partial.Header.Size = h.Size
	}
	if err := os.MkdirAll(filepath.Dir(s.st.partialFile(d)), 0o755); err != nil ||
		os.WriteFile(s.st.partialFile(d), payload, 0o644) != nil {
		s.errf("cannot receive %s stream: cannot save the partial state\n", kind)
		return 1
	}
	if !noSpace {
		s.errf("cannot receive %s stream: checksum mismatch or incomplete stream.\n"+
			"Partially received snapshot is saved.\n"+
			"A resuming stream can be generated on the sending system by running:\n"+
			"    zfs send -t %s\n", kind, s.st.resumeToken(d))
	}
	return 1
}

// receiveAbort is `zfs receive -A`.
func (s *sess) receiveAbort(target string) int {
	d := s.openDataset(target, tFS)
	if d == nil {
		return s.usage("receive", "")
	}
	if d.Partial == nil {
		s.errf("'%s' does not have any resumable receive state to abort\n", target)
		return 1
	}
	s.changed()
	if d.Partial.Full {
		s.st.forgetPartial(d)
		s.dropDataset(d)
		return 0
	}
	s.st.forgetPartial(d)
	return 0
}

// applyProps gives a received filesystem the stream's properties (-p), then
// the receive's -o, without the -x ones.
func applyProps(d *dataset, stream map[string]string, set []kv, exclude []string) {
	for k, v := range stream {
		d.setLocal(k, v)
	}
	for _, k := range exclude {
		delete(d.Props, k)
	}
	for _, p := range set {
		d.setLocal(p.k, p.v)
	}
}

// hasSnapshotGUID reports whether fs has a snapshot of that guid.
func (s *sess) hasSnapshotGUID(fs string, guid uint64) bool {
	for _, x := range s.st.snapshots(fs) {
		if x.GUID == guid {
			return true
		}
	}
	return false
}

// modified reports whether d's files differ from its newest snapshot's.
func (s *sess) modified(d, newest *dataset) bool {
	mounted := s.st.mountedPaths()
	a, b := scan(s.st.dataDir(d), mounted), scan(s.st.snapDir(newest), nil)
	if len(a.files) != len(b.files) {
		return true
	}
	for k := range a.files {
		if !b.files[k] {
			return true
		}
	}
	return false
}

// poolFree is what the target's pool can still take.
func (s *sess) poolFree(target string) int64 {
	p := s.st.Pools[poolOf(target)]
	if p == nil {
		return 0
	}
	_, free := s.poolUsage(p)
	return int64(free)
}

// shortSnap is the part of a snapshot name after '@'.
func shortSnap(name string) string {
	_, snap, _ := strings.Cut(name, "@")
	return snap
}
