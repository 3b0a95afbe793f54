package zfstest

import (
	"strings"
	"testing"
)

// step is one command of a script: its argv (split on spaces) and what it
// must print. "$ROOT" in out and err stands for the MountRoot; an err
// ending in "..." is a prefix (the usage text follows).
type step struct {
	cmd      string
	rc       int
	out, err string
}

// ok is a step that must succeed silently.
func ok(cmd string) step { return step{cmd: cmd} }

func runScript(t *testing.T, f *Fake, steps []step) {
	t.Helper()
	for _, s := range steps {
		argv := strings.Fields(s.cmd)
		r := try(f, argv[0], argv[1:]...)
		out, errOut := strings.ReplaceAll(r.Stdout, root(f), "$ROOT"), strings.ReplaceAll(r.Stderr, root(f), "$ROOT")
		errOK := errOut == s.err
		if p, cut := strings.CutSuffix(s.err, "..."); cut {
			errOK = strings.HasPrefix(errOut, p)
		}
		if r.ExitCode != s.rc || out != s.out || !errOK {
			t.Fatalf("%s\n got rc=%d stdout=%q stderr=%q\nwant rc=%d stdout=%q stderr=%q", s.cmd, r.ExitCode, out, errOut, s.rc, s.out, s.err)
		}
	}
}

func TestCreate(t *testing.T) {
	tests := []struct {
		name  string
		steps []step
	}{
		{"-p creates parents", []step{ok("zfs create -p tank/a/b/c"), {cmd: "zfs list -H -o name -r tank/a", out: "tank/a\ntank/a/b\ntank/a/b/c\n"}}},
		{"-p of an existing dataset is fine", []step{ok("zfs create tank/a"), ok("zfs create -p tank/a")}},
		{"pool only", []step{{cmd: "zfs create tank", rc: 1, err: "cannot create 'tank': missing dataset name\n"}}},
		{"no such pool", []step{{cmd: "zfs create nopool/x", rc: 1, err: "cannot create 'nopool/x': no such pool 'nopool'\n"}}},
		{"bad character", []step{{cmd: "zfs create tank/a$b", rc: 1, err: "cannot create 'tank/a$b': invalid character '$' in name\n"}}},
		{"snapshot name", []step{{cmd: "zfs create tank/a@b", rc: 1, err: "cannot create 'tank/a@b': snapshot delimiter '@' is not expected here\n"}}},
		{"trailing slash", []step{{cmd: "zfs create tank/a/", rc: 1, err: "cannot create 'tank/a/': trailing slash in name\n"}}},
		{"dot component", []step{{cmd: "zfs create tank/..", rc: 1, err: "cannot create 'tank/..': parent reference, '..' is found in name\n"}}},
		{"no argument", []step{{cmd: "zfs create", rc: 2, err: "missing filesystem argument\nusage:\n\tcreate [-Pnpv]..."}}},
		{"two arguments", []step{{cmd: "zfs create tank/a tank/b", rc: 2, err: "too many arguments\nusage:..."}}},
		{"unknown flag", []step{{cmd: "zfs create -x tank/a", rc: 2, err: "invalid option 'x'\nusage:..."}}},
		{"-o needs a value", []step{{cmd: "zfs create tank/a -o", rc: 2, err: "missing argument for 'o' option\nusage:..."}}},
		{"-o without =", []step{{cmd: "zfs create -o quota tank/a", rc: 1, err: "missing '=' for property=value argument\n"}}},
		{"-o twice", []step{{cmd: "zfs create -o a:b=1 -o a:b=2 tank/a", rc: 1, err: "property 'a:b' specified multiple times\n"}}},
		{"recordsize not a power of 2", []step{{cmd: "zfs create -o recordsize=1000 tank/a", rc: 1, err: "cannot create 'tank/a': 'recordsize' must be power of 2 from 512B to 16M\n"}}},
		{"recordsize too big", []step{{cmd: "zfs create -o recordsize=32M tank/a", rc: 1, err: "cannot create 'tank/a': 'recordsize' must be power of 2 from 512B to 16M\n"}}},
		{"recordsize with suffix", []step{ok("zfs create -o recordsize=1M tank/a"), {cmd: "zfs get -H -p -o value recordsize tank/a", out: "1048576\n"}}},
		{"atime", []step{{cmd: "zfs create -o atime=maybe tank/a", rc: 1, err: "cannot create 'tank/a': 'atime' must be one of 'on | off'\n"}}},
		{"readonly", []step{{cmd: "zfs create -o readonly=yes tank/a", rc: 1, err: "cannot create 'tank/a': 'readonly' must be one of 'on | off'\n"}}},
		{"canmount", []step{{cmd: "zfs create -o canmount=yes tank/a", rc: 1, err: "cannot create 'tank/a': 'canmount' must be one of 'on | off | noauto'\n"}}},
		{"relative mountpoint", []step{{cmd: "zfs create -o mountpoint=srv tank/a", rc: 1, err: "cannot create 'tank/a': 'mountpoint' must be an absolute path, 'none', or 'legacy'\n"}}},
		{"bad number", []step{{cmd: "zfs create -o quota=abc tank/a", rc: 1, err: "cannot create 'tank/a': bad numeric value 'abc'\n"}}},
		{"sizes with suffixes", []step{
			ok("zfs create -o quota=1.5G -o refquota=10GiB -o reservation=1m -o refreservation=none tank/a"),
			{cmd: "zfs get -H -p -o property,value,source quota,refquota,reservation,refreservation tank/a",
				out: "quota\t1610612736\tlocal\nrefquota\t10737418240\tlocal\nreservation\t1048576\tlocal\nrefreservation\t0\tdefault\n"},
		}},
		{"readonly property", []step{{cmd: "zfs create -o used=1 tank/a", rc: 1, err: "cannot create 'tank/a': 'used' is readonly\n"}}},
		{"snapshot-only property", []step{{cmd: "zfs create -o userrefs=1 tank/a", rc: 1, err: "cannot create 'tank/a': 'userrefs' does not apply to datasets of this type\n"}}},
		{"upper case user property", []step{{cmd: "zfs create -o Foo:bar=1 tank/a", rc: 1, err: "cannot create 'tank/a': invalid property 'Foo:bar'\n"}}},
		{"gzip-6 is gzip", []step{ok("zfs create -o compression=gzip-6 tank/a"), {cmd: "zfs get -H -o value compression tank/a", out: "gzip\n"}}},
		{"column names as properties", []step{ok("zfs create tank/a"), {cmd: "zfs list -H -o name,avail,refer,recsize tank/a", out: "tank/a\t832M\t24K\t128K\n"}}},
		{"canmount=off is not mounted", []step{ok("zfs create -o canmount=off tank/a"), {cmd: "zfs get -H -o value mounted tank/a", out: "no\n"}}},
		{"suspended pool", []step{{cmd: "zfs create tank/a", rc: 1, err: "cannot create 'tank/a': pool I/O is currently suspended\n"}}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			f := newFake(t)
			if tc.name == "suspended pool" {
				if err := f.SetPoolHealth("tank", "SUSPENDED"); err != nil {
					t.Fatal(err)
				}
			}
			runScript(t, f, tc.steps)
		})
	}
}

func TestUserPropertyLimits(t *testing.T) {
	f := newFake(t)
	r := try(f, "zfs", "create", "-o", "x:y="+strings.Repeat("v", 8191), "tank/a")
	if r.ExitCode != 0 {
		t.Fatalf("8191 bytes: %s", r.Stderr)
	}
	long := strings.Repeat("v", 8192)
	r = try(f, "zfs", "set", "x:y="+long, "tank/a")
	if want := "cannot set property for 'tank/a': property value '" + long + "' is too long\n"; r.ExitCode != 1 || r.Stderr != want {
		t.Errorf("8192 bytes: rc=%d %.80q", r.ExitCode, r.Stderr)
	}
	r = try(f, "zfs", "create", "-o", "a:"+strings.Repeat("n", 300)+"=1", "tank/b")
	if r.ExitCode != 1 || !strings.Contains(r.Stderr, "is too long") {
		t.Errorf("long name: rc=%d %.80q", r.ExitCode, r.Stderr)
	}
}

func TestDestroy(t *testing.T) {
	base := []step{ok("zfs create -p tank/a/b"), ok("zfs snapshot -r tank/a@s"), ok("zfs clone tank/a@s tank/c")}
	tests := []struct {
		name  string
		steps []step
	}{
		{"pool", []step{{cmd: "zfs destroy tank", rc: 1, err: "cannot destroy 'tank': operation does not apply to pools\n" +
			"use 'zfs destroy -r tank' to destroy all datasets in the pool\nuse 'zpool destroy tank' to destroy the pool itself\n"}}},
		{"children", []step{{cmd: "zfs destroy tank/a", rc: 1, err: "cannot destroy 'tank/a': filesystem has children\n" +
			"use '-r' to destroy the following datasets:\ntank/a/b@s\ntank/a/b\ntank/a@s\n"}}},
		{"-r with clones elsewhere", []step{{cmd: "zfs destroy -r tank/a", rc: 1, err: "cannot destroy 'tank/a': filesystem has dependent clones\n" +
			"use '-R' to destroy the following datasets:\ntank/c\n"}}},
		{"-R takes the clones", []step{ok("zfs destroy -R tank/a"), {cmd: "zfs list -H -o name -t all", out: "tank\n"}}},
		{"-nv lists, keeps", []step{{cmd: "zfs destroy -nvR tank/a", out: "would destroy tank/a/b@s\nwould destroy tank/a/b\nwould destroy tank/c\nwould destroy tank/a@s\nwould destroy tank/a\n"},
			{cmd: "zfs list -H -o name -r tank/a", out: "tank/a\ntank/a/b\n"}}},
		{"-r of the pool keeps the pool", []step{ok("zfs destroy -R tank"), {cmd: "zfs list -H -o name -t all", out: "tank\n"}}},
		{"snapshot -r", []step{ok("zfs destroy tank/c"), {cmd: "zfs destroy -rv tank/a@s", out: "will destroy tank/a@s\nwill destroy tank/a/b@s\nwill reclaim 0B\n"},
			{cmd: "zfs list -H -o name -t snapshot", out: ""}}},
		{"snapshot list", []step{ok("zfs snapshot tank/a/b@t"), ok("zfs destroy tank/a/b@s,t"), {cmd: "zfs list -H -o name -t snapshot -r tank/a/b", out: ""}}},
		{"no such snapshot", []step{{cmd: "zfs destroy tank/a@nope", rc: 1, err: "could not find any snapshots to destroy; check snapshot names.\n"}}},
		{"snapshot of no filesystem", []step{{cmd: "zfs destroy tank/nope@s", rc: 1, err: "cannot open 'tank/nope': dataset does not exist\n"}}},
		{"-p", []step{{cmd: "zfs destroy -p tank/c", out: "destroy\ttank/c\n"}}},
		{"busy -f", []step{ok("zfs destroy -f tank/c")}},
		{"no argument", []step{{cmd: "zfs destroy", rc: 2, err: "missing dataset argument\nusage:..."}}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			f := newFake(t)
			runScript(t, f, base)
			if tc.name == "busy -f" {
				if err := f.SetBusy("tank/c", true); err != nil {
					t.Fatal(err)
				}
			}
			runScript(t, f, tc.steps)
		})
	}
}

func TestSnapshotRollbackClone(t *testing.T) {
	tests := []struct {
		name  string
		steps []step
	}{
		{"snapshot exists", []step{ok("zfs snapshot tank/a@s"), {cmd: "zfs snapshot tank/a@s", rc: 1, err: "cannot create snapshot 'tank/a@s': dataset already exists\n"}}},
		{"snapshot of nothing", []step{{cmd: "zfs snapshot tank/nope@s", rc: 2, err: "cannot open 'tank/nope': dataset does not exist\nusage:\n\tsnapshot..."}}},
		{"snapshot without @", []step{{cmd: "zfs snapshot tank/a", rc: 2, err: "usage:\n\tsnapshot..."}}},
		{"empty snapshot name", []step{{cmd: "zfs snapshot tank/a@", rc: 1, err: "cannot create snapshot 'tank/a@': empty component or misplaced '@' or '#' delimiter in name\n"}}},
		{"snapshot -r, same txg", []step{ok("zfs create tank/a/b"), ok("zfs snapshot -r -o x:y=1 tank/a@s"),
			{cmd: "zfs get -H -o name,value,source -t snapshot -r x:y tank/a", out: "tank/a@s\t1\tlocal\ntank/a/b@s\t1\tlocal\n"}}},
		{"rollback -r", []step{ok("zfs snapshot tank/a@1"), ok("zfs snapshot tank/a@2"), ok("zfs snapshot tank/a@3"), ok("zfs rollback -r tank/a@1"),
			{cmd: "zfs list -H -o name -t snapshot tank/a", out: "tank/a@1\n"}}},
		{"rollback past a clone", []step{ok("zfs snapshot tank/a@1"), ok("zfs snapshot tank/a@2"), ok("zfs clone tank/a@2 tank/c"),
			{cmd: "zfs rollback -r tank/a@1", rc: 1, err: "cannot rollback to 'tank/a@1': clones of previous snapshots exist\nuse '-R' to force deletion of the following clones and dependents:\ntank/c\n"},
			ok("zfs rollback -R tank/a@1"), {cmd: "zfs list -H -o name -r tank", out: "tank\ntank/a\n"}}},
		{"rollback past a hold", []step{ok("zfs snapshot tank/a@1"), ok("zfs snapshot tank/a@2"), ok("zfs hold k tank/a@2"),
			{cmd: "zfs rollback -r tank/a@1", rc: 1, err: "cannot destroy 'tank/a@2': dataset is busy\n"}}},
		{"rollback a filesystem", []step{{cmd: "zfs rollback tank/a", rc: 1, err: "cannot open 'tank/a': missing '@' delimiter in snapshot name\n"}}},
		{"rollback to nothing", []step{{cmd: "zfs rollback tank/a@nope", rc: 1, err: "cannot open 'tank/a@nope': dataset does not exist\n"}}},
		{"clone origin", []step{ok("zfs snapshot tank/a@s"), ok("zfs clone -o x:y=z tank/a@s tank/c"),
			{cmd: "zfs get -H -o property,value origin,x:y tank/c", out: "origin\ttank/a@s\nx:y\tz\n"},
			{cmd: "zfs get -H -o value clones tank/a@s", out: "tank/c\n"}}},
		{"clone needs parents", []step{ok("zfs snapshot tank/a@s"), {cmd: "zfs clone tank/a@s tank/x/c", rc: 1, err: "cannot create 'tank/x/c': parent does not exist\n"},
			ok("zfs clone -p tank/a@s tank/x/c")}},
		{"clone exists", []step{ok("zfs snapshot tank/a@s"), {cmd: "zfs clone tank/a@s tank/a", rc: 1, err: "cannot create 'tank/a': dataset already exists\n"}}},
		{"clone other pool", []step{ok("zfs snapshot tank/a@s"), {cmd: "zfs clone tank/a@s pool2/c", rc: 1, err: "cannot create 'pool2/c': source and target pools differ\n"}}},
		{"clone a filesystem", []step{{cmd: "zfs clone tank/a tank/c", rc: 1, err: "cannot open 'tank/a': missing '@' delimiter in snapshot name\n"}}},
		{"clone one argument", []step{{cmd: "zfs clone tank/a@s", rc: 2, err: "missing target dataset argument\nusage:..."}}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			f := newFake(t)
			if err := f.AddPool("pool2", 1<<30); err != nil {
				t.Fatal(err)
			}
			runScript(t, f, append([]step{ok("zfs create tank/a")}, tc.steps...))
		})
	}
}

func replaceRoot(s, root string) string { return strings.ReplaceAll(s, "$ROOT", root) }
