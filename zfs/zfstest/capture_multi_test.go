package zfstest

import (
	"strings"
	"testing"
)

// TestCaptureSeveralSnapshots replays capture-multi.sh, in its order:
// several snapshots of one filesystem in one zfs release (each in turn:
// one without the tag or missing fails alone, the others are released)
// and one zfs destroy (a@x,y: all or none; one held fails it whole,
// missing ones are skipped unless all are), and several properties in one
// zfs set. The fake must do what OpenZFS 2.1.11 did.
func TestCaptureSeveralSnapshots(t *testing.T) {
	f := newFake(t)
	zfs := func(args ...string) { t.Helper(); mustRun(t, f, "zfs", args...) }
	zfs("create", "tank/b")
	zfs("create", "tank/b/d")
	for _, s := range []string{"a", "b", "c"} {
		zfs("snapshot", "tank/b/d@"+s)
	}
	zfs("hold", "nomad-device-zfs", "tank/b/d@a")
	zfs("hold", "nomad-device-zfs", "tank/b/d@b")
	steps := []struct {
		name  string
		setup [][]string
		cmd   string
		after [][]string
	}{
		{name: "set-multi", cmd: "set nomad-device-zfs:state=releasing nomad-device-zfs:holder=x nomad-device-zfs:retain_as=tank/b/e tank/b/d"},
		{name: "get-multi", cmd: "get -H -p -o name,property,value,source nomad-device-zfs:state,nomad-device-zfs:holder,nomad-device-zfs:retain_as tank/b/d"},
		{name: "release-multi", cmd: "release nomad-device-zfs tank/b/d@a tank/b/d@b"},
		{name: "holds-after-release", cmd: "holds -H tank/b/d@a tank/b/d@b"},
		{name: "release-multi-first-unheld", setup: [][]string{{"hold", "nomad-device-zfs", "tank/b/d@c"}},
			cmd: "release nomad-device-zfs tank/b/d@a tank/b/d@c"},
		{name: "holds-after-first-unheld", cmd: "holds -H tank/b/d@c"},
		{name: "release-multi-first-missing", setup: [][]string{{"hold", "nomad-device-zfs", "tank/b/d@a"}},
			cmd: "release nomad-device-zfs tank/b/d@nope tank/b/d@a"},
		{name: "holds-after-first-missing", cmd: "holds -H tank/b/d@a"},
		{name: "release-multi-none-held", cmd: "release nomad-device-zfs tank/b/d@b tank/b/d@c"},
		{name: "destroy-multi-one-held", setup: [][]string{{"hold", "keep", "tank/b/d@b"}},
			cmd: "destroy tank/b/d@a,b,c"},
		{name: "list-after-one-held", cmd: "list -H -o name -t snapshot -r tank/b/d", after: [][]string{{"release", "keep", "tank/b/d@b"}}},
		{name: "destroy-multi-one-missing", cmd: "destroy tank/b/d@a,nope"},
		{name: "list-after-one-missing", cmd: "list -H -o name -t snapshot -r tank/b/d"},
		{name: "destroy-multi-all-missing", cmd: "destroy tank/b/d@nope,nope2"},
		{name: "destroy-multi", setup: [][]string{{"snapshot", "tank/b/d@x"}, {"snapshot", "tank/b/d@y"}},
			cmd: "destroy tank/b/d@b,c,x"},
		{name: "list-after-multi", cmd: "list -H -o name -t snapshot -r tank/b/d"},
		{name: "destroy-multi-no-dataset", cmd: "destroy tank/b/nods@a,b"},
		{name: "release-multi-no-dataset", cmd: "release nomad-device-zfs tank/b/nods@a tank/b/nods@b"},
	}
	for _, st := range steps {
		for _, s := range st.setup {
			zfs(s...)
		}
		want := readCapture(t, "multi-"+st.name)
		r := try(f, "zfs", strings.Fields(st.cmd)...)
		if r.ExitCode != want.rc || r.Stderr != want.stderr || r.Stdout != want.stdout {
			t.Errorf("%s: zfs %s\ngot  rc=%d stdout %q stderr %q\nwant rc=%d stdout %q stderr %q",
				st.name, st.cmd, r.ExitCode, r.Stdout, r.Stderr, want.rc, want.stdout, want.stderr)
		}
		for _, s := range st.after {
			zfs(s...)
		}
	}
}
