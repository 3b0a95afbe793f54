package zfstest

import (
	"testing"
)

func TestRenameMount(t *testing.T) {
	tests := []struct {
		name  string
		steps []step
	}{
		{"rename moves the tree", []step{ok("zfs rename tank/a tank/z"),
			{cmd: "zfs list -H -o name,mountpoint,mounted -t all -r tank/z", out: "tank/z\t$ROOT/tank/z\tyes\ntank/z@s\t-\t-\ntank/z/b\t$ROOT/tank/z/b\tyes\n"}}},
		{"rename keeps clones' origin", []step{ok("zfs clone tank/a@s tank/c"), ok("zfs rename tank/a tank/z"),
			{cmd: "zfs get -H -o value origin tank/c", out: "tank/z@s\n"}}},
		{"rename to an existing name", []step{ok("zfs create tank/z"), {cmd: "zfs rename tank/a tank/z", rc: 1, err: "cannot rename 'tank/a': dataset already exists\n"}}},
		{"rename without parent", []step{{cmd: "zfs rename tank/a tank/x/y", rc: 1, err: "cannot create 'tank/x/y': parent does not exist\n"},
			ok("zfs rename -p tank/a tank/x/y"), {cmd: "zfs list -H -o name -r tank/x", out: "tank/x\ntank/x/y\ntank/x/y/b\n"}}},
		{"rename below itself", []step{{cmd: "zfs rename tank/a tank/a/b/c", rc: 1, err: "cannot rename to 'tank/a/b/c': New dataset name cannot be a descendant of current dataset name\n"}}},
		{"rename across pools", []step{{cmd: "zfs rename tank/a pool2/a", rc: 1, err: "cannot rename to 'pool2/a': datasets must be within same pool\n"}}},
		{"rename busy", []step{{cmd: "zfs rename tank/a tank/z", rc: 1, err: "cannot unmount '$ROOT/tank/a/b': pool or dataset is busy\n"}, ok("zfs rename -f tank/a tank/z")}},
		{"rename a snapshot", []step{ok("zfs rename tank/a@s tank/a@t"), ok("zfs rename tank/a@t u"), ok("zfs rename tank/a@u @v"),
			{cmd: "zfs list -H -o name -t snapshot tank/a", out: "tank/a@v\n"},
			{cmd: "zfs rename tank/a@v tank/b@v", rc: 1, err: "cannot rename to 'tank/b@v': snapshots must be part of same dataset\n"}}},
		{"unmount takes children", []step{ok("zfs unmount tank/a"), {cmd: "zfs list -H -o mounted -r tank/a", out: "no\nno\n"},
			{cmd: "zfs unmount tank/a", rc: 1, err: "cannot unmount 'tank/a': not currently mounted\n"},
			ok("zfs mount tank/a"), {cmd: "zfs list -H -o mounted -r tank/a", out: "yes\nno\n"}, ok("zfs mount -a"),
			{cmd: "zfs mount", out: "pool2                           $ROOT/pool2\ntank                            $ROOT/tank\ntank/a                          $ROOT/tank/a\ntank/a/b                        $ROOT/tank/a/b\n"}}},
		{"unmount by path", []step{ok("zfs umount $ROOT/tank/a/b"), {cmd: "zfs umount $ROOT/tank/a/b", rc: 1, err: "cannot unmount '$ROOT/tank/a/b': not currently mounted\n"}}},
		{"unmount busy child", []step{{cmd: "zfs unmount tank/a", rc: 1, err: "cannot unmount '$ROOT/tank/a/b': pool or dataset is busy\n"},
			{cmd: "zfs list -H -o mounted -r tank/a", out: "yes\nyes\n"}, ok("zfs unmount -f tank/a")}},
		{"mount mounted", []step{{cmd: "zfs mount tank/a", rc: 1, err: "cannot mount 'tank/a': filesystem already mounted\n"}}},
		{"mount canmount=off", []step{ok("zfs set canmount=off tank/a"), {cmd: "zfs mount tank/a", rc: 1, err: "cannot mount 'tank/a': 'canmount' property is set to 'off'\n"}}},
		{"mount without mountpoint", []step{ok("zfs set mountpoint=none tank/a"), {cmd: "zfs mount tank/a", rc: 1, err: "cannot mount 'tank/a': no mountpoint set\n"}}},
		{"mount legacy", []step{ok("zfs set mountpoint=legacy tank/a"), {cmd: "zfs mount tank/a", rc: 1, err: "cannot mount 'tank/a': legacy mountpoint\nuse mount(8) to mount this filesystem\n"}}},
		{"mount noauto", []step{ok("zfs create -o canmount=noauto tank/n"), {cmd: "zfs get -H -o value mounted tank/n", out: "no\n"}, ok("zfs mount tank/n")}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			f := newFake(t)
			if err := f.AddPool("pool2", 1<<30); err != nil {
				t.Fatal(err)
			}
			runScript(t, f, []step{ok("zfs create -p tank/a/b"), ok("zfs snapshot tank/a@s")})
			if tc.name == "rename busy" || tc.name == "unmount busy child" {
				if err := f.SetBusy("tank/a/b", true); err != nil {
					t.Fatal(err)
				}
			}
			for i, s := range tc.steps {
				tc.steps[i].cmd = replaceRoot(s.cmd, root(f))
			}
			runScript(t, f, tc.steps)
		})
	}
}

func TestHolds(t *testing.T) {
	ts := zfsDate(captureTime.Unix(), "%H")
	tests := []struct {
		name  string
		steps []step
	}{
		{"hold and list", []step{ok("zfs hold keep tank/a@s"), ok("zfs hold other tank/a@s"),
			{cmd: "zfs holds tank/a@s", out: "NAME      TAG    TIMESTAMP\ntank/a@s  keep   " + ts + "\ntank/a@s  other  " + ts + "\n"},
			{cmd: "zfs get -H -o value userrefs tank/a@s", out: "2\n"}}},
		{"hold twice", []step{ok("zfs hold keep tank/a@s"), {cmd: "zfs hold keep tank/a@s", rc: 1, err: "cannot hold snapshot 'tank/a@s': tag already exists on this dataset\n"}}},
		{"hold -r", []step{ok("zfs hold -r keep tank/a@s"), {cmd: "zfs holds -rH tank/a@s", out: "tank/a@s\tkeep\t" + ts + "\ntank/a/b@s\tkeep\t" + ts + "\n"}}},
		{"hold nothing", []step{{cmd: "zfs hold keep tank/a@nope", rc: 1, err: "cannot hold snapshot 'tank/a@nope': dataset does not exist\n"}}},
		{"hold a filesystem", []step{{cmd: "zfs hold keep tank/a", rc: 1, err: "'tank/a' is not a snapshot\n"}}},
		{"release", []step{ok("zfs hold keep tank/a@s"), ok("zfs release keep tank/a@s"), ok("zfs destroy tank/a@s")}},
		{"release an unknown tag", []step{{cmd: "zfs release keep tank/a@s", rc: 1, err: "cannot release hold from snapshot 'tank/a@s': no such tag on this dataset\n"}}},
		{"release nothing", []step{{cmd: "zfs release keep tank/a@nope", rc: 1, err: "cannot release hold from snapshot 'tank/a@nope': dataset does not exist\n"}}},
		{"holds without holds", []step{{cmd: "zfs holds tank/a@s", out: "NAME  TAG  TIMESTAMP\n"}, {cmd: "zfs holds -H tank/a@s"}}},
		{"holds -p is 2.2", []step{{cmd: "zfs holds -Hp tank/a@s", rc: 2, err: "invalid option 'p'\nusage:\n\tholds [-rH] <snapshot> ...\n..."}}},
		{"holds of nothing", []step{{cmd: "zfs holds tank/a@nope", rc: 1, out: "NAME  TAG  TIMESTAMP\n", err: "cannot open 'tank/a@nope': dataset does not exist\n"}}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			f := newFake(t)
			runScript(t, f, append([]step{ok("zfs create -p tank/a/b"), ok("zfs snapshot -r tank/a@s")}, tc.steps...))
		})
	}
}

func TestMisc(t *testing.T) {
	tests := []struct {
		name string
		step step
	}{
		{"unknown command", step{cmd: "zfs frobnicate", rc: 2, err: "unrecognized command 'frobnicate'\nusage: zfs command args ...\n"}},
		{"no command", step{cmd: "zfs", rc: 2, err: "usage: zfs command args ...\n..."}},
		{"version flag", step{cmd: "zfs --version", out: "zfs-2.1.11-1+deb12u1\nzfs-kmod-2.1.11-1+deb12u1\n"}},
		{"zpool list", step{cmd: "zpool list -o name,size,health,readonly", out: "NAME    SIZE    HEALTH  RO\npool2     1G    ONLINE  off\ntank    960M    ONLINE  off\n"}},
		{"zpool list some missing", step{cmd: "zpool list -H -o name nopool tank", rc: 1, out: "tank\n", err: "cannot open 'nopool': no such pool\n"}},
		{"zpool list bad column", step{cmd: "zpool list -o bogus", rc: 2, err: "bad property list: invalid property 'bogus'\nusage:\n\tlist..."}},
		{"zpool list interval", step{cmd: "zpool list 5", rc: 2, err: "zfstest: interval and count are not emulated\n..."}},
		{"zpool get", step{cmd: "zpool get -H -p health,cap,feature@lz4_compress tank", out: "tank\thealth\tONLINE\t-\ntank\tcapacity\t0\t-\ntank\tfeature@lz4_compress\tactive\tlocal\n"}},
		{"zpool get missing", step{cmd: "zpool get health nopool", rc: 1, err: "cannot open 'nopool': no such pool\n"}},
		{"zpool unknown", step{cmd: "zpool status", rc: 2, err: "unrecognized command 'status'\nusage: zpool command args ...\n"}},
		{"zfs list all pools", step{cmd: "zfs list -H -o name", out: "pool2\ntank\n"}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			f := newFake(t)
			if err := f.AddPool("pool2", 1<<30); err != nil {
				t.Fatal(err)
			}
			runScript(t, f, []step{tc.step})
		})
	}
}

func TestPoolAPI(t *testing.T) {
	f := newFake(t)
	tests := []struct {
		name string
		err  error
	}{
		{"pool exists", f.AddPool("tank", 1<<30)},
		{"bad pool name", f.AddPool("1x", 1<<30)},
		{"health of no pool", f.SetPoolHealth("nope", "DEGRADED")},
		{"remove no pool", f.RemovePool("nope")},
		{"busy no dataset", f.SetBusy("tank/nope", true)},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			if tc.err == nil {
				t.Error("no error")
			}
		})
	}
	mustRun(t, f, "zfs", "create", "tank/a")
	mp := f.Mountpoint("tank/a")
	if err := f.RemovePool("tank"); err != nil {
		t.Fatal(err)
	}
	if exists(mp) || try(f, "zfs", "list", "tank").ExitCode != 1 {
		t.Errorf("pool still there after RemovePool")
	}
}

func TestSetInherit(t *testing.T) {
	tests := []struct {
		name  string
		steps []step
	}{
		{"inheritance and sources", []step{ok("zfs set compression=lz4 atime=off tank/a"), ok("zfs set x:y=1 tank/a"),
			{cmd: "zfs get -H -o name,property,value,source compression,atime,x:y,quota tank/a/b",
				out: "tank/a/b\tcompression\tlz4\tinherited from tank/a\ntank/a/b\tatime\toff\tinherited from tank/a\ntank/a/b\tx:y\t1\tinherited from tank/a\ntank/a/b\tquota\tnone\tdefault\n"}}},
		{"-s filters sources", []step{ok("zfs set compression=lz4 tank/a"), ok("zfs set compression=off tank/a/b"),
			{cmd: "zfs get -H -r -s local -o name,value compression tank/a", out: "tank/a\tlz4\ntank/a/b\toff\n"},
			{cmd: "zfs get -H -r -s default,inherited -o name compression tank", out: "tank\n"}}},
		{"inherit clears", []step{ok("zfs set compression=lz4 tank/a"), ok("zfs set compression=off tank/a/b"), ok("zfs inherit compression tank/a/b"),
			{cmd: "zfs get -H -o value,source compression tank/a/b", out: "lz4\tinherited from tank/a\n"}}},
		{"inherit -r", []step{ok("zfs set x:y=1 tank/a"), ok("zfs set x:y=2 tank/a/b"), ok("zfs inherit -r x:y tank/a"),
			{cmd: "zfs get -H -r -o value x:y tank/a", out: "-\n-\n"}}},
		{"inherit a quota", []step{{cmd: "zfs inherit quota tank/a", rc: 1,
			err: "'quota' property cannot be inherited\nuse 'zfs set quota=none' to clear\nuse 'zfs inherit -S quota' to revert to received value\n"}}},
		{"inherit canmount", []step{{cmd: "zfs inherit canmount tank/a", rc: 1, err: "'canmount' property cannot be inherited\n"}}},
		{"inherit used", []step{{cmd: "zfs inherit used tank/a", rc: 1, err: "used property is read-only\n"}}},
		{"inherit bogus", []step{{cmd: "zfs inherit bogus tank/a", rc: 2, err: "invalid property 'bogus'\nusage:\n\tinherit..."}}},
		{"set bad value", []step{{cmd: "zfs set atime=never tank/a", rc: 1, err: "cannot set property for 'tank/a': 'atime' must be one of 'on | off'\n"}}},
		{"set read-only", []step{{cmd: "zfs set used=1 tank/a", rc: 1, err: "cannot set property for 'tank/a': 'used' is readonly\n"}}},
		{"set once", []step{{cmd: "zfs set utf8only=on tank/a", rc: 1, err: "cannot set property for 'tank/a': 'utf8only' is readonly\n"}}},
		{"set unknown", []step{{cmd: "zfs set bogusprop=1 tank/a", rc: 1, err: "cannot set property for 'tank/a': invalid property 'bogusprop'\n"}}},
		{"set quota below usage", []step{{cmd: "zfs set quota=1K tank/a", rc: 1, err: "cannot set property for 'tank/a': size is less than current used or reserved space\n"}}},
		{"set refquota below usage", []step{{cmd: "zfs set refquota=4K tank/a/b", rc: 1, err: "cannot set property for 'tank/a/b': size is less than current used or reserved space\n"}}},
		{"set quota none", []step{ok("zfs set quota=1G tank/a"), ok("zfs set quota=none tank/a"), {cmd: "zfs get -H -o value,source quota tank/a", out: "none\tdefault\n"}}},
		{"set on a snapshot", []step{ok("zfs snapshot tank/a@s"), ok("zfs set x:y=1 tank/a@s"),
			{cmd: "zfs set compression=lz4 tank/a@s", rc: 1, err: "cannot set property for 'tank/a@s': 'compression' does not apply to datasets of this type\n"},
			{cmd: "zfs set exec=off tank/a@s", rc: 1, err: "cannot set property for 'tank/a@s': this property can not be modified for snapshots\n"}}},
		{"set several datasets", []step{ok("zfs set x:y=1 x:z=2 tank/a tank/a/b"), {cmd: "zfs get -H -s local -o name,property x:y,x:z tank/a tank/a/b",
			out: "tank/a\tx:y\ntank/a\tx:z\ntank/a/b\tx:y\ntank/a/b\tx:z\n"}}},
		{"set one missing dataset", []step{{cmd: "zfs set x:y=1 tank/nope tank/a", rc: 1, err: "cannot open 'tank/nope': dataset does not exist\n"},
			{cmd: "zfs get -H -o value x:y tank/a", out: "1\n"}}},
		{"set argument order", []step{{cmd: "zfs set tank/a x:y=1", rc: 2, err: "invalid argument order\nusage:..."}}},
		{"set no dataset", []step{{cmd: "zfs set x:y=1", rc: 2, err: "missing dataset name(s)\nusage:..."}}},
		{"set mountpoint moves", []step{ok("zfs set mountpoint=/srv/a tank/a"),
			{cmd: "zfs get -H -o name,value,source mountpoint,mounted tank/a/b", out: "tank/a/b\t$ROOT/srv/a/b\tinherited from tank/a\ntank/a/b\tyes\t-\n"}}},
		{"set mountpoint none unmounts", []step{ok("zfs set mountpoint=none tank/a"),
			{cmd: "zfs list -H -o name,mountpoint,mounted -r tank/a", out: "tank/a\tnone\tno\ntank/a/b\tnone\tno\n"},
			ok("zfs inherit mountpoint tank/a"), {cmd: "zfs list -H -o mounted -r tank/a", out: "yes\nyes\n"}}},
		{"set mountpoint below the MountRoot", []step{ok("zfs set mountpoint=$ROOT/x tank/a"), {cmd: "zfs get -H -o value mountpoint tank/a", out: "$ROOT/x\n"}}},
		{"set canmount=off unmounts", []step{ok("zfs set canmount=off tank/a/b"), {cmd: "zfs get -H -o value mounted tank/a/b", out: "no\n"}}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			f := newFake(t)
			runScript(t, f, []step{ok("zfs create -p -o refquota=1G tank/a/b")})
			for i, s := range tc.steps {
				tc.steps[i].cmd = replaceRoot(s.cmd, root(f))
			}
			runScript(t, f, tc.steps)
		})
	}
}

func TestGetList(t *testing.T) {
	setup := []step{ok("zfs create tank/a"), ok("zfs create tank/a-b"), ok("zfs create tank/a/c"), ok("zfs snapshot tank/a@s2"), ok("zfs snapshot tank/a@s1")}
	tests := []struct {
		name string
		step step
	}{
		{"snapshots right after their filesystem, by age", step{cmd: "zfs list -H -o name -t all -r tank", out: "tank\ntank/a\ntank/a@s2\ntank/a@s1\ntank/a-b\ntank/a/c\n"}},
		{"no snapshots without -t", step{cmd: "zfs list -H -o name -r tank/a", out: "tank/a\ntank/a/c\n"}},
		{"a named snapshot is listed", step{cmd: "zfs list -H -o name,used,mountpoint tank/a@s1", out: "tank/a@s1\t0B\t-\n"}},
		{"-t snapshot of a filesystem", step{cmd: "zfs list -H -o name -t snapshot tank/a", out: "tank/a@s2\ntank/a@s1\n"}},
		{"-d 1", step{cmd: "zfs list -H -o name -d 1 tank", out: "tank\ntank/a\ntank/a-b\n"}},
		{"-s name is strcmp", step{cmd: "zfs list -H -o name -s name -t all -r tank/a", out: "tank/a\ntank/a/c\ntank/a@s1\ntank/a@s2\n"}},
		{"-S createtxg", step{cmd: "zfs list -H -o name -S createtxg -t snapshot", out: "tank/a@s1\ntank/a@s2\n"}},
		{"-s by a user property", step{cmd: "zfs list -H -o name,x:k -s x:k -r tank", out: "tank/a-b\t1\ntank/a/c\t2\ntank\t-\ntank/a\t-\n"}},
		{"options after operands, clustered", step{cmd: "zfs list tank/a -Hpo name,refer", out: "tank/a\t24576\n"}},
		{"header", step{cmd: "zfs list -o name,type tank/a", out: "NAME    TYPE\ntank/a  filesystem\n"}},
		{"missing and present", step{cmd: "zfs list -H -o name tank/nope tank/a", rc: 1, out: "tank/a\n", err: "cannot open 'tank/nope': dataset does not exist\n"}},
		{"bad column", step{cmd: "zfs list -o name,bogus", rc: 2, err: "bad property list: invalid property 'bogus'\nusage:\n\tlist..."}},
		{"bad type", step{cmd: "zfs list -t fs", rc: 2, err: "invalid type 'fs'\nusage:..."}},
		{"bad depth", step{cmd: "zfs list -d x", rc: 2, err: "x is not an integer\nusage:..."}},
		{"-t filesystem of a snapshot", step{cmd: "zfs list -t filesystem tank/a@s1", rc: 1, err: "cannot open 'tank/a@s1': snapshot delimiter '@' is not expected here\n"}},
		{"bad name", step{cmd: "zfs list tank/a%b", rc: 1, err: "cannot open 'tank/a%b': dataset does not exist\n"}},
		{"get not applicable", step{cmd: "zfs get -H mountpoint,x:none tank/a@s1", out: "tank/a@s1\tmountpoint\t-\t-\ntank/a@s1\tx:none\t-\t-\n"}},
		{"get -t snapshot of a filesystem", step{cmd: "zfs get -H -o name -t snapshot type tank/a", out: "tank/a@s2\ntank/a@s1\n"}},
		{"get -r includes snapshots", step{cmd: "zfs get -H -o name -r type tank/a", out: "tank/a\ntank/a@s2\ntank/a@s1\ntank/a/c\n"}},
		{"get header", step{cmd: "zfs get type,x:k tank/a-b", out: "NAME      PROPERTY  VALUE       SOURCE\ntank/a-b  type      filesystem  -\ntank/a-b  x:k       1           local\n"}},
		{"get bad property", step{cmd: "zfs get bogus tank", rc: 2, err: "bad property list: invalid property 'bogus'\nusage:\n\tget..."}},
		{"get bad source", step{cmd: "zfs get -s nowhere type tank", rc: 2, err: "invalid source 'nowhere'\nusage:..."}},
		{"get no property", step{cmd: "zfs get", rc: 2, err: "missing property argument\nusage:..."}},
		{"get human", step{cmd: "zfs get -H -o value quota,recordsize,creation,compressratio tank/a", out: "none\n128K\n" + zfsDate(captureTime.Unix(), "%k") + "\n1.00x\n"}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			f := newFake(t)
			runScript(t, f, setup)
			runScript(t, f, []step{ok("zfs set x:k=1 tank/a-b"), ok("zfs set x:k=2 tank/a/c"), tc.step})
		})
	}
}
