package zfstest

import (
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
	"syscall"
)

// A filesystem's files live in its mountpoint while mounted and in the
// store ("parked") while not: mount and unmount move them, so files survive
// an unmount like on a real pool. A snapshot is a copy in the store.

// holdsMount reports whether p is, or contains, the mountpoint of a mounted
// filesystem.
func holdsMount(p string, mounted map[string]*dataset) bool {
	for mp := range mounted {
		if mp == p || strings.HasPrefix(mp, p+"/") {
			return true
		}
	}
	return false
}

// nestedMounts lists mounted filesystems other than d below d's mountpoint.
func (st *state) nestedMounts(d *dataset) []*dataset {
	mp := st.mountpoint(d)
	var out []*dataset
	for p, x := range st.mountedPaths() {
		if x != d && strings.HasPrefix(p, mp+"/") {
			out = append(out, x)
		}
	}
	sortDatasets(out)
	return out
}

// mountFS moves d's parked files into its mountpoint.
func (st *state) mountFS(d *dataset) error {
	mp := st.mountpoint(d)
	mounted := st.mountedPaths()
	if entries, err := os.ReadDir(mp); err == nil {
		for _, e := range entries {
			p := filepath.Join(mp, e.Name())
			if p != st.StoreDir && !(e.IsDir() && holdsMount(p, mounted)) {
				// A real mount (overlay=on) would hide these files; the fake
				// refuses rather than mix them with the dataset's own.
				return fmt.Errorf("cannot mount '%s': directory is not empty", mp)
			}
		}
	}
	if err := os.MkdirAll(mp, 0o755); err != nil {
		return fmt.Errorf("cannot mount '%s': %v", mp, err)
	}
	src := st.parkedDir(d)
	entries, _ := os.ReadDir(src)
	for _, e := range entries {
		from, to := filepath.Join(src, e.Name()), filepath.Join(mp, e.Name())
		if _, err := os.Lstat(to); err == nil {
			// Only the empty directory a mounted child sits on can clash.
			_ = os.Remove(from)
			continue
		}
		if err := move(from, to); err != nil {
			return fmt.Errorf("cannot mount '%s': %v", mp, err)
		}
	}
	_ = os.RemoveAll(src)
	d.Mounted = true
	return nil
}

// unmountFS parks d's files and removes the mountpoint directory, as libzfs
// does after unmounting. The caller has checked busy and nested mounts.
func (st *state) unmountFS(d *dataset) error {
	mp := st.mountpoint(d)
	dst := st.parkedDir(d)
	_ = os.RemoveAll(dst)
	if err := os.MkdirAll(dst, 0o755); err != nil {
		return err
	}
	entries, _ := os.ReadDir(mp)
	for _, e := range entries {
		from := filepath.Join(mp, e.Name())
		if from == st.StoreDir {
			continue
		}
		if err := move(from, filepath.Join(dst, e.Name())); err != nil {
			return err
		}
	}
	if mp != st.MountRoot {
		_ = os.Remove(mp)
	}
	d.Mounted = false
	return nil
}

// removeData deletes a dataset's files and, for a mounted filesystem, its
// mountpoint directory.
func (st *state) removeData(d *dataset) {
	dir := st.dataDir(d)
	if !d.Snap && d.Mounted {
		mounted := st.mountedPaths()
		clearDir(dir, mounted, st.StoreDir)
		if dir != st.MountRoot {
			_ = os.Remove(dir)
		}
		d.Mounted = false
		return
	}
	_ = os.RemoveAll(dir)
}

// clearDir empties dir, keeping the directories other filesystems are
// mounted on (and the store).
func clearDir(dir string, mounted map[string]*dataset, keep string) {
	entries, _ := os.ReadDir(dir)
	for _, e := range entries {
		p := filepath.Join(dir, e.Name())
		switch {
		case p == keep || mounted[p] != nil:
		case e.IsDir() && holdsMount(p, mounted):
			clearDir(p, mounted, keep)
		default:
			_ = os.RemoveAll(p)
		}
	}
}

// copyTree copies src into dst (created if needed), keeping modes and
// mtimes so the copy shares its files with the original in the space
// accounting. It does not descend into other filesystems' mountpoints.
func copyTree(src, dst string, mounted map[string]*dataset, keep string) error {
	return filepath.WalkDir(src, func(p string, e fs.DirEntry, err error) error {
		if err != nil {
			if p == src && errors.Is(err, fs.ErrNotExist) {
				return os.MkdirAll(dst, 0o755)
			}
			return err
		}
		if p == keep {
			return filepath.SkipDir
		}
		rel, _ := filepath.Rel(src, p)
		to := filepath.Join(dst, rel)
		info, err := e.Info()
		if err != nil {
			return err
		}
		switch {
		case e.IsDir():
			if err := os.MkdirAll(to, info.Mode().Perm()); err != nil {
				return err
			}
			if p != src && mounted[p] != nil {
				return filepath.SkipDir
			}
		case e.Type()&fs.ModeSymlink != 0:
			target, err := os.Readlink(p)
			if err != nil {
				return err
			}
			_ = os.Remove(to)
			return os.Symlink(target, to)
		case e.Type().IsRegular():
			if err := copyFile(p, to, info); err != nil {
				return err
			}
		}
		return nil
	})
}

func copyFile(from, to string, info fs.FileInfo) error {
	in, err := os.Open(from)
	if err != nil {
		return err
	}
	defer in.Close()
	_ = os.Remove(to)
	out, err := os.OpenFile(to, os.O_CREATE|os.O_WRONLY|os.O_TRUNC, info.Mode().Perm())
	if err != nil {
		return err
	}
	if _, err := io.Copy(out, in); err != nil {
		out.Close()
		return err
	}
	if err := out.Close(); err != nil {
		return err
	}
	return os.Chtimes(to, info.ModTime(), info.ModTime())
}

// move renames, or copies and deletes across devices.
func move(from, to string) error {
	err := os.Rename(from, to)
	if err == nil || !errors.Is(err, syscall.EXDEV) {
		return err
	}
	if err := copyTree(from, to, nil, ""); err != nil {
		return err
	}
	return os.RemoveAll(from)
}
