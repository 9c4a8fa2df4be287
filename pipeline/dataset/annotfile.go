package dataset

// Annotation files on a local disk (a YOLO dataset's YAML and label
// files, a COCO annotations file) are opened as the images are: without
// blocking (a FIFO never holds the start), regular files only by an fstat
// of the open descriptor (not a stat of the path, which a swap can
// change), read through a limit of their bound and one byte (a file whose
// size lies, as /proc's do, or that grows, cannot take more), and a
// dataset's label files beneath its root (no symbolic link out of it).

import (
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
	"syscall"

	"github.com/stoker-dev/stoker/pipeline/annot"
)

// MaxDatasetYAML bounds a YOLO dataset YAML (data.yaml): a label file's
// bound, thousands of times LVIS's 1,203 class names.
const MaxDatasetYAML = annot.MaxLabelFile

// COCOParseFactor is the most memory a COCO annotations file's parse
// takes at its peak (the process's RSS, Go's default GOGC), in times the
// file's size: measured 5.4 for a compact file of minimal box-only
// annotations (70 bytes each), 3.0-3.4 for box-only ones as COCO writes
// them, 2.5 for polygons (the heap live at the peak: 4.1, 2.2 and 1.5).
// A file whose size times it passes the annotations budget
// (WithAnnotationsBudget) is refused before it is read.
const COCOParseFactor = 6

// WithAnnotationsBudget bounds the memory an annotations file's parse may
// take at its peak: a COCO file over n/COCOParseFactor bytes is refused
// before it is read (0: no bound but annot.MaxAnnotationsFile).
func WithAnnotationsBudget(n int64) SourceOption { return func(o *sourceOptions) { o.annBudget = n } }

// cocoFileBound is the largest COCO annotations file a parse within
// budget (0: none) may read, and the words for a larger one.
func cocoFileBound(budget int64) (int64, string) {
	if budget > 0 && budget/COCOParseFactor < annot.MaxAnnotationsFile {
		return budget / COCOParseFactor, fmt.Sprintf(" a parse within the %d-byte annotations budget may read (a COCO file's parse takes up to %dx its size: raise --memory-budget)", budget, COCOParseFactor)
	}
	return annot.MaxAnnotationsFile, " allowed"
}

// openLocalFile opens the local file at path (named name in messages)
// for one read of at most max bytes: without blocking, a regular file by
// its open descriptor's fstat, of at most max bytes by it; the reader
// fails once it has given max bytes and finds more (over, the words after
// the bound in that message).
func openLocalFile(path, name string, max int64, over string) (io.ReadCloser, error) {
	f, st, err := annot.OpenStat(path)
	if err != nil {
		return nil, err
	}
	switch {
	case !st.Mode().IsRegular():
		err = fmt.Errorf("%w: %s is not a regular file (%s): annotations are read from regular files only", ErrUnsupported, name, fileKind(st.Mode()))
	case st.Size() > max:
		err = fmt.Errorf("%w: %s is %d bytes, over the %d%s", ErrTooLarge, name, st.Size(), max, over)
	}
	if err != nil {
		f.Close()
		return nil, err
	}
	return &boundedFile{f: f, r: io.LimitReader(f, max+1), left: max, name: name, over: over, max: max}, nil
}

// boundedFile reads a file up to its bound, and fails past it.
type boundedFile struct {
	f          *os.File
	r          io.Reader // f, limited to max+1 bytes
	left, max  int64
	name, over string
}

func (b *boundedFile) Read(p []byte) (int, error) {
	n, err := b.r.Read(p)
	b.left -= int64(n)
	if b.left < 0 {
		return n, fmt.Errorf("%w: %s has more than %d bytes, the most%s (it grew, or its size lies)", ErrTooLarge, b.name, b.max, b.over)
	}
	return n, err
}

func (b *boundedFile) Close() error { return b.f.Close() }

// readLocalFile reads the local file at path whole (see openLocalFile).
func readLocalFile(path, name string, max int64) ([]byte, error) {
	rc, err := openLocalFile(path, name, max, " allowed")
	if err != nil {
		return nil, err
	}
	defer rc.Close()
	return io.ReadAll(rc)
}

// fileKind names a file's type for messages.
func fileKind(m fs.FileMode) string {
	switch {
	case m&fs.ModeNamedPipe != 0:
		return "a FIFO"
	case m&fs.ModeDevice != 0:
		return "a device"
	case m&fs.ModeSocket != 0:
		return "a socket"
	case m.IsDir():
		return "a directory"
	}
	return m.Type().String()
}

// labelRoots reads a YOLO dataset's label files beneath the directory
// that holds each image's last "images" component (where ultralytics'
// labels/ is: for DIR/images/train/x.jpg, DIR, and labels/train/x.txt
// beneath it), or beneath dir itself for an image with none (its label
// beside it): no label file, and no labels directory, is read through a
// symbolic link that leads out of that root.
type labelRoots struct {
	dir   string
	roots map[string]*os.Root
}

func newLabelRoots(dir string) *labelRoots {
	return &labelRoots{dir: dir, roots: map[string]*os.Root{}}
}

func (l *labelRoots) close() {
	for _, r := range l.roots {
		r.Close()
	}
}

// locate is where image f's label file is: its root's path and its name
// beneath it.
func (l *labelRoots) locate(f string) (rootDir, rel string) {
	full := filepath.Join(l.dir, filepath.FromSlash(f))
	lp := annot.LabelPath(full)
	sep := string(filepath.Separator)
	i := strings.LastIndex(full, sep+"images"+sep)
	if i < 0 {
		rel, err := filepath.Rel(l.dir, lp)
		if err != nil {
			return l.dir, filepath.Base(lp)
		}
		return l.dir, rel
	}
	// "labels" is as long as "images": lp's "/labels/" is where full's
	// "/images/" was.
	rootDir = full[:i]
	if rootDir == "" {
		rootDir = sep
	}
	return rootDir, lp[i+1:]
}

func (l *labelRoots) root(dir string) (*os.Root, error) {
	if r, ok := l.roots[dir]; ok {
		return r, nil
	}
	r, err := os.OpenRoot(dir)
	if err != nil {
		return nil, err
	}
	l.roots[dir] = r
	return r, nil
}

// checkDirs refuses a labels directory (of any image's label file) that
// is a symbolic link out of its root, or not a directory: every label
// file beneath it would be refused.
func (l *labelRoots) checkDirs(files []string) error {
	seen := map[string]bool{}
	for _, f := range files {
		rd, rel := l.locate(f)
		d := filepath.Dir(rel)
		if d == "." || seen[rd+"\x00"+d] {
			continue
		}
		seen[rd+"\x00"+d] = true
		r, err := l.root(rd)
		if errors.Is(err, fs.ErrNotExist) {
			continue
		}
		if err != nil {
			return fmt.Errorf("labels of %s: %w", f, err)
		}
		st, err := r.Stat(d)
		switch {
		case errors.Is(err, fs.ErrNotExist):
		case err != nil:
			return fmt.Errorf("%w: labels directory %s: %v: label files are read beneath %s, and a symbolic link may not lead out of it",
				ErrUnsupported, filepath.ToSlash(d), stripPath(err), rd)
		case !st.IsDir():
			return fmt.Errorf("%w: labels directory %s is not a directory (%s)", ErrUnsupported, filepath.ToSlash(d), fileKind(st.Mode()))
		}
	}
	return nil
}

// read reads image f's label file (named name in messages): ok false
// where it has none. A file that cannot be taken (a symbolic link out of
// the root, not a regular file, over annot.MaxLabelFile) is an error of
// that image alone, saying why.
func (l *labelRoots) read(f, name string) (data []byte, ok bool, err error) {
	rd, rel := l.locate(f)
	r, err := l.root(rd)
	if errors.Is(err, fs.ErrNotExist) {
		return nil, false, nil
	}
	if err != nil {
		return nil, false, err
	}
	fl, err := r.OpenFile(rel, os.O_RDONLY|syscall.O_NONBLOCK|syscall.O_NOCTTY, 0)
	if errors.Is(err, fs.ErrNotExist) {
		return nil, false, nil
	}
	bad := func(err error) error {
		return &annotationError{&annot.SampleError{File: name, Annotation: "file", Field: "file", Err: err}}
	}
	if err != nil {
		if lst, lerr := r.Lstat(rel); lerr == nil && lst.Mode()&fs.ModeSymlink != 0 {
			return nil, true, bad(fmt.Errorf("a symbolic link that does not resolve beneath the dataset's root (%v): not read", stripPath(err)))
		}
		return nil, true, bad(stripPath(err))
	}
	defer fl.Close()
	st, err := fl.Stat()
	switch {
	case err != nil:
		return nil, true, bad(stripPath(err))
	case !st.Mode().IsRegular():
		return nil, true, bad(fmt.Errorf("not a regular file (%s): not read", fileKind(st.Mode())))
	case st.Size() > annot.MaxLabelFile:
		return nil, true, bad(fmt.Errorf("%d bytes, more than the %d allowed: not read", st.Size(), annot.MaxLabelFile))
	}
	data, err = io.ReadAll(io.LimitReader(fl, annot.MaxLabelFile+1))
	if err != nil {
		return nil, true, bad(stripPath(err))
	}
	// Over the bound (a size that lies): ParseYOLOLabels refuses it.
	return data, true, nil
}
