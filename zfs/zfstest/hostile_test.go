package zfstest

import (
	"errors"
	"strconv"
	"strings"
	"testing"
)

// TestHostileStreams: a stream a hostile sender rewrote is received whole
// under the sent snapshot's name and guid, with the properties it carries
// (less -x, under -o) or the file it added; a cut stream is not rewritten.
func TestHostileStreams(t *testing.T) {
	f := sendScenario(t)
	s1 := send(t, f, "tank/xfer/src@s1")
	guid := strings.TrimSpace(mustRun(t, f, "zfs", "get", "-H", "-p", "-o", "value", "guid", "tank/xfer/src@s1"))

	withProps, err := StreamWithProps(s1, map[string]string{"nomad-device-zfs:generation": "4242",
		"nomad-device-zfs:state": "held", "readonly": "on", "quota": "8589934592"})
	if err != nil {
		t.Fatal(err)
	}
	if r := receive(f, withProps, "-s", "-u", "-o", "nomad-device-zfs:state=receiving", "-x", "readonly", "tank/xfer/props"); r.ExitCode != 0 {
		t.Fatalf("receive: %s", r.Stderr)
	}
	got := mustRun(t, f, "zfs", "get", "-H", "-p", "-o", "property,value", "nomad-device-zfs:generation,nomad-device-zfs:state,readonly,quota",
		"tank/xfer/props")
	want := "nomad-device-zfs:generation\t4242\nnomad-device-zfs:state\treceiving\nreadonly\toff\nquota\t8589934592\n"
	if !sameLines(got, want) {
		t.Errorf("properties received:\n%s\nwant:\n%s", got, want)
	}
	if g := strings.TrimSpace(mustRun(t, f, "zfs", "get", "-H", "-p", "-o", "value", "guid", "tank/xfer/props@s1")); g != guid {
		t.Errorf("received guid %s, sent %s", g, guid)
	}

	bigger, err := StreamWithFile(s1, "pad", 3<<20)
	if err != nil {
		t.Fatal(err)
	}
	if r := receive(f, bigger, "-s", "-u", "tank/xfer/big"); r.ExitCode != 0 {
		t.Fatalf("receive: %s", r.Stderr)
	}
	refer, _ := strconv.ParseUint(strings.TrimSpace(mustRun(t, f, "zfs", "get", "-H", "-p", "-o", "value", "referenced", "tank/xfer/big")), 10, 64)
	if refer < 3<<20 {
		t.Errorf("referenced %d, want above 3 MiB", refer)
	}
	if g := strings.TrimSpace(mustRun(t, f, "zfs", "get", "-H", "-p", "-o", "value", "guid", "tank/xfer/big@s1")); g != guid {
		t.Errorf("received guid %s, sent %s", g, guid)
	}

	if _, err := StreamWithFile(s1[:len(s1)-10], "pad", 1); !errors.Is(err, errNotWhole) {
		t.Errorf("a cut stream rewritten: %v", err)
	}
}

func sameLines(a, b string) bool {
	split := func(s string) map[string]bool {
		m := map[string]bool{}
		for _, l := range strings.Split(strings.TrimSpace(s), "\n") {
			m[l] = true
		}
		return m
	}
	x, y := split(a), split(b)
	if len(x) != len(y) {
		return false
	}
	for l := range x {
		if !y[l] {
			return false
		}
	}
	return true
}
