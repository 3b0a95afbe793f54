package zfstest

import (
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
)

// listFiles is every file below dir with its content, "" for directories.
func listFiles(t *testing.T, dir string) map[string]string {
	t.Helper()
	out := map[string]string{}
	err := filepath.Walk(dir, func(p string, info os.FileInfo, err error) error {
		if err != nil || p == dir {
			return err
		}
		rel, _ := filepath.Rel(dir, p)
		if info.IsDir() {
			out[rel] = ""
		} else {
			out[rel] = readFile(t, p)
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	return out
}

func sameFiles(t *testing.T, got, want map[string]string) {
	t.Helper()
	if len(got) != len(want) {
		t.Fatalf("files %v, want %v", got, want)
	}
	for k, v := range want {
		if got[k] != v {
			t.Fatalf("files %v, want %v", got, want)
		}
	}
}

func TestFiles(t *testing.T) {
	tests := []struct {
		name string
		run  func(t *testing.T, f *Fake, mp string)
	}{
		{"rollback restores exactly", func(t *testing.T, f *Fake, mp string) {
			writeFile(t, filepath.Join(mp, "keep"), "v1")
			os.Mkdir(filepath.Join(mp, "dir"), 0o755)
			writeFile(t, filepath.Join(mp, "dir/gone"), "old")
			mustRun(t, f, "zfs", "snapshot", "tank/a@s")
			want := listFiles(t, mp)
			writeFile(t, filepath.Join(mp, "keep"), "v2 longer")
			os.Remove(filepath.Join(mp, "dir/gone"))
			writeFile(t, filepath.Join(mp, "new"), "secret")
			mustRun(t, f, "zfs", "rollback", "tank/a@s")
			sameFiles(t, listFiles(t, mp), want)
		}},
		{"a clone starts with the snapshot only", func(t *testing.T, f *Fake, mp string) {
			writeFile(t, filepath.Join(mp, "seed"), "seed")
			mustRun(t, f, "zfs", "snapshot", "tank/a@s")
			writeFile(t, filepath.Join(mp, "later"), "later")
			mustRun(t, f, "zfs", "clone", "tank/a@s", "tank/c")
			// b is tank/a/b's mountpoint directory, which belongs to tank/a.
			sameFiles(t, listFiles(t, f.Mountpoint("tank/c")), map[string]string{"seed": "seed", "b": ""})
			writeFile(t, filepath.Join(f.Mountpoint("tank/c"), "mine"), "x")
			sameFiles(t, listFiles(t, mp), map[string]string{"seed": "seed", "later": "later", "b": ""})
		}},
		{"a new holder never sees the old one's files", func(t *testing.T, f *Fake, mp string) {
			writeFile(t, filepath.Join(mp, "b/secret"), "previous holder")
			mustRun(t, f, "zfs", "destroy", "tank/a/b")
			if exists(filepath.Join(mp, "b")) {
				t.Fatal("mountpoint left behind by destroy")
			}
			mustRun(t, f, "zfs", "create", "tank/a/b")
			sameFiles(t, listFiles(t, filepath.Join(mp, "b")), map[string]string{})
		}},
		{"unmount keeps the files, mount brings them back", func(t *testing.T, f *Fake, mp string) {
			writeFile(t, filepath.Join(mp, "b/data"), "kept")
			mustRun(t, f, "zfs", "unmount", "tank/a")
			if exists(mp) {
				t.Fatal("mountpoint left behind by unmount")
			}
			mustRun(t, f, "zfs", "mount", "-a")
			sameFiles(t, listFiles(t, mp), map[string]string{"b": "", "b/data": "kept"})
		}},
		{"a snapshot does not take a child's files", func(t *testing.T, f *Fake, mp string) {
			writeFile(t, filepath.Join(mp, "b/child"), "child")
			writeFile(t, filepath.Join(mp, "own"), "own")
			mustRun(t, f, "zfs", "snapshot", "tank/a@s")
			os.Remove(filepath.Join(mp, "own"))
			mustRun(t, f, "zfs", "rollback", "tank/a@s")
			sameFiles(t, listFiles(t, mp), map[string]string{"b": "", "b/child": "child", "own": "own"})
		}},
		{"rename and set mountpoint move the files", func(t *testing.T, f *Fake, mp string) {
			writeFile(t, filepath.Join(mp, "b/data"), "moved")
			mustRun(t, f, "zfs", "rename", "tank/a", "tank/z")
			mustRun(t, f, "zfs", "set", "mountpoint=/elsewhere", "tank/z")
			if got := readFile(t, filepath.Join(root(f), "elsewhere/b/data")); got != "moved" || exists(mp) {
				t.Fatalf("data %q, old mountpoint there: %v", got, exists(mp))
			}
		}},
		{"mounting over files fails", func(t *testing.T, f *Fake, mp string) {
			mustRun(t, f, "zfs", "set", "canmount=noauto", "tank/a/b")
			mustRun(t, f, "zfs", "unmount", "tank/a/b")
			os.Mkdir(filepath.Join(mp, "b"), 0o755)
			writeFile(t, filepath.Join(mp, "b/stale"), "in the way")
			r := try(f, "zfs", "mount", "tank/a/b")
			if r.ExitCode != 1 || r.Stderr != "cannot mount '"+mp+"/b': directory is not empty\n" {
				t.Fatalf("rc=%d %q", r.ExitCode, r.Stderr)
			}
		}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			f := newFake(t)
			mustRun(t, f, "zfs", "create", "-p", "tank/a/b")
			tc.run(t, f, f.Mountpoint("tank/a"))
		})
	}
}

func TestSpace(t *testing.T) {
	f := newFake(t)
	mustRun(t, f, "zfs", "create", "-o", "refquota=10M", "tank/a")
	mp := f.Mountpoint("tank/a")
	get := func(name string) map[string]uint64 {
		t.Helper()
		out := mustRun(t, f, "zfs", "get", "-H", "-p", "-o", "property,value", "used,available,referenced,written,usedbysnapshots,usedbydataset", name)
		m := map[string]uint64{}
		for _, l := range lines(out) {
			k, v, _ := strings.Cut(l, "\t")
			m[k], _ = strconv.ParseUint(v, 10, 64)
		}
		return m
	}
	empty := get("tank/a")
	writeFile(t, filepath.Join(mp, "f"), strings.Repeat("x", 1<<20))
	full := get("tank/a")
	tests := []struct {
		name      string
		got, want uint64
	}{
		{"empty refers to 24K", empty["referenced"], 24576},
		{"a 1 MiB file", full["referenced"] - empty["referenced"], 1 << 20},
		{"available is what the refquota leaves", full["available"], 10<<20 - full["referenced"]},
		{"written without snapshots", full["written"], full["referenced"]},
	}
	mustRun(t, f, "zfs", "snapshot", "tank/a@s")
	snap := get("tank/a")
	tests = append(tests, []struct {
		name      string
		got, want uint64
	}{
		{"written after a snapshot", snap["written"], 0},
		{"snapshot shares", snap["usedbysnapshots"], 0},
	}...)
	os.Remove(filepath.Join(mp, "f"))
	gone := get("tank/a")
	s := get("tank/a@s")
	tests = append(tests, []struct {
		name      string
		got, want uint64
	}{
		{"deleted file held by the snapshot", gone["usedbysnapshots"], 1 << 20},
		{"snapshot used", s["used"], 1 << 20},
		{"used is dataset plus snapshots", gone["used"], gone["usedbydataset"] + gone["usedbysnapshots"]},
		{"parent counts children", get("tank")["used"], get("tank")["usedbydataset"] + gone["used"]},
	}...)
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			if tc.got != tc.want {
				t.Errorf("got %d, want %d", tc.got, tc.want)
			}
		})
	}
}
