package store

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"syscall"
)

// fileSystem is the few file operations the store writes through, so that
// tests can make any one of them fail. Reads and the dir lock go straight
// to the os package.
type fileSystem interface {
	OpenFile(name string, flag int, perm os.FileMode) (file, error)
	Rename(oldpath, newpath string) error
	Remove(name string) error
}

// file is the part of *os.File the store uses.
type file interface {
	Write(p []byte) (int, error)
	Sync() error
	Close() error
	Stat() (os.FileInfo, error)
	Truncate(size int64) error
}

// osFS is the real file system.
type osFS struct{}

func (osFS) OpenFile(name string, flag int, perm os.FileMode) (file, error) {
	f, err := os.OpenFile(name, flag, perm)
	if err != nil {
		return nil, err // not a typed nil in an interface
	}
	return f, nil
}

func (osFS) Rename(oldpath, newpath string) error { return os.Rename(oldpath, newpath) }
func (osFS) Remove(name string) error             { return os.Remove(name) }

// writeFileAtomic replaces path with data so that a crash at any point
// leaves either the old or the new content: it writes and fsyncs
// path+".tmp", renames it over path, and fsyncs the directory. replaced
// reports whether the rename happened, so that a caller undoing a failed
// write knows whether path still holds the old content.
func writeFileAtomic(fsys fileSystem, path string, data []byte) (replaced bool, err error) {
	tmp := path + ".tmp"
	f, err := fsys.OpenFile(tmp, os.O_WRONLY|os.O_CREATE|os.O_TRUNC, 0o600)
	if err != nil {
		return false, err
	}
	_, err = f.Write(data)
	if err == nil {
		err = f.Sync()
	}
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	if err == nil {
		err = fsys.Rename(tmp, path)
	}
	if err != nil {
		_ = fsys.Remove(tmp)
		return false, err
	}
	return true, syncDir(fsys, filepath.Dir(path))
}

// removeFile removes path and makes the removal durable.
func removeFile(fsys fileSystem, path string) error {
	if err := fsys.Remove(path); err != nil && !errors.Is(err, os.ErrNotExist) {
		return err
	}
	return syncDir(fsys, filepath.Dir(path))
}

// syncDir fsyncs a directory, making the creation, rename or removal of its
// entries durable.
func syncDir(fsys fileSystem, dir string) error {
	d, err := fsys.OpenFile(dir, os.O_RDONLY, 0)
	if err != nil {
		return err
	}
	err = d.Sync()
	if cerr := d.Close(); err == nil {
		err = cerr
	}
	if err != nil {
		return fmt.Errorf("sync dir %s: %w", dir, err)
	}
	return nil
}

// lockDir takes an exclusive, non-blocking flock on dir/LOCK and writes the
// process id into it for operators. The lock lasts until the returned file
// is closed or the process exits (even by kill -9).
func lockDir(dir string) (*os.File, error) {
	path := filepath.Join(dir, lockFileName)
	f, err := os.OpenFile(path, os.O_RDWR|os.O_CREATE, 0o600)
	if err != nil {
		return nil, fmt.Errorf("open lock file: %w", err)
	}
	if err := syscall.Flock(int(f.Fd()), syscall.LOCK_EX|syscall.LOCK_NB); err != nil {
		_ = f.Close() // the Flock error is the one to report
		if errors.Is(err, syscall.EWOULDBLOCK) {
			holder := ""
			if b, rerr := os.ReadFile(path); rerr == nil && len(b) > 0 {
				holder = " (pid " + string(b) + ")"
			}
			return nil, fmt.Errorf("%w: data dir %s is in use by another process%s holding %s; stop it or use another data dir",
				ErrLocked, dir, holder, path)
		}
		return nil, fmt.Errorf("lock %s: %w", path, err)
	}
	// Best effort: the pid only helps an operator find the holder.
	if f.Truncate(0) == nil {
		_, _ = f.WriteAt([]byte(strconv.Itoa(os.Getpid())), 0)
	}
	return f, nil
}
