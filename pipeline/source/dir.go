package source

import (
	"context"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path"
	"slices"
	"strings"
	"syscall"
)

// dirStore is a local directory read through an os.Root, so that neither
// ".." nor a symbolic link reaches outside it, and only regular files are
// read. It has no versions: an object is its size and modification time.
type dirStore struct {
	dir  string
	root *os.Root
}

func openDir(dir string) (*dirStore, error) {
	root, err := os.OpenRoot(dir)
	if err != nil {
		return nil, err
	}
	return &dirStore{dir: dir, root: root}, nil
}

func (d *dirStore) String() string { return d.dir }

func (d *dirStore) Close() error { return d.root.Close() }

// List walks the tree: regular files, and symbolic links to regular files
// inside the root (listed with the target's size), in lexical key order.
// Names starting with a dot are left out, as are their subtrees.
func (d *dirStore) List(ctx context.Context, prefix string, fn func(Object) error) error {
	var objs []Object
	err := fs.WalkDir(d.root.FS(), ".", func(p string, e fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if err := ctx.Err(); err != nil {
			return err
		}
		if p != "." && strings.HasPrefix(e.Name(), ".") {
			if e.IsDir() {
				return fs.SkipDir
			}
			return nil
		}
		if e.IsDir() {
			// A directory whose subtree cannot hold the prefix is skipped.
			if p != "." && !strings.HasPrefix(prefix, p+"/") && !strings.HasPrefix(p+"/", prefix) {
				return fs.SkipDir
			}
			return nil
		}
		if !strings.HasPrefix(p, prefix) {
			return nil
		}
		st, err := d.root.Stat(p) // follows a link, inside the root only
		if err != nil || !st.Mode().IsRegular() {
			return nil
		}
		objs = append(objs, Object{Key: p, Size: st.Size(), ModTime: st.ModTime()})
		return nil
	})
	if err != nil {
		return fmt.Errorf("%s: list: %w", d.dir, stripPath(err))
	}
	slices.SortFunc(objs, func(a, b Object) int { return strings.Compare(a.Key, b.Key) })
	for _, o := range objs {
		if err := fn(o); err != nil {
			return err
		}
	}
	return nil
}

func (d *dirStore) Stat(ctx context.Context, key string) (Object, error) {
	st, err := d.root.Stat(key)
	if err != nil {
		if errors.Is(err, fs.ErrNotExist) {
			return Object{}, fmt.Errorf("%s: %w", key, ErrNotExist)
		}
		return Object{}, fmt.Errorf("%s: %w", key, stripPath(err))
	}
	if !st.Mode().IsRegular() {
		return Object{}, fmt.Errorf("%s: not a regular file", key)
	}
	return Object{Key: key, Size: st.Size(), ModTime: st.ModTime()}, nil
}

// open opens obj for reading and checks it is still obj.
func (d *dirStore) open(obj Object) (*os.File, error) {
	// Non-blocking: a FIFO would otherwise block the open until a writer
	// came; it is refused below as not a regular file.
	f, err := d.root.OpenFile(obj.Key, os.O_RDONLY|syscall.O_NONBLOCK, 0)
	if err != nil {
		if errors.Is(err, fs.ErrNotExist) {
			return nil, fmt.Errorf("%w: %s is gone", ErrChanged, obj.Key)
		}
		return nil, fmt.Errorf("%s: %w", obj.Key, stripPath(err))
	}
	st, err := f.Stat()
	if err == nil && !st.Mode().IsRegular() {
		err = fmt.Errorf("%s is not a regular file", obj.Key)
	}
	if err == nil {
		err = CheckSame(obj, Object{Key: obj.Key, Size: st.Size(), ModTime: st.ModTime()})
	}
	if err != nil {
		f.Close()
		return nil, err
	}
	return f, nil
}

func (d *dirStore) ReadRange(ctx context.Context, obj Object, off int64, p []byte) error {
	if off < 0 || off+int64(len(p)) > obj.Size {
		return fmt.Errorf("%s: range [%d, %d) outside its %d bytes", obj.Key, off, off+int64(len(p)), obj.Size)
	}
	f, err := d.open(obj)
	if err != nil {
		return err
	}
	defer f.Close()
	if _, err := f.ReadAt(p, off); err != nil {
		if errors.Is(err, io.EOF) {
			return fmt.Errorf("%w: %s is shorter than indexed", ErrChanged, obj.Key)
		}
		return fmt.Errorf("%s: %w", obj.Key, stripPath(err))
	}
	return nil
}

func (d *dirStore) NewReader(ctx context.Context, obj Object, off int64) (io.ReadCloser, error) {
	f, err := d.open(obj)
	if err != nil {
		return nil, err
	}
	return struct {
		io.Reader
		io.Closer
	}{io.NewSectionReader(f, off, obj.Size-off), f}, nil
}

// Put writes key through a temporary file renamed into place, so that a
// reader never sees half of it.
func (d *dirStore) Put(ctx context.Context, key string, data []byte) error {
	if dir := path.Dir(key); dir != "." {
		if err := d.root.MkdirAll(dir, 0o755); err != nil {
			return fmt.Errorf("%s: %w", key, stripPath(err))
		}
	}
	tmp := key + ".tmp"
	if err := d.root.WriteFile(tmp, data, 0o644); err != nil {
		return fmt.Errorf("%s: %w", key, stripPath(err))
	}
	if err := d.root.Rename(tmp, key); err != nil {
		d.root.Remove(tmp)
		return fmt.Errorf("%s: %w", key, stripPath(err))
	}
	return nil
}

// stripPath drops the path from an *fs.PathError, keeping its operation
// and cause: files opened from a root carry the root's absolute path, and
// errors travel to clients.
func stripPath(err error) error {
	var pe *fs.PathError
	if errors.As(err, &pe) {
		return fmt.Errorf("%s: %w", pe.Op, pe.Err)
	}
	return err
}
