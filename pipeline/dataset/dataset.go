package dataset

import (
	"crypto/sha256"
	"encoding/binary"
	"encoding/hex"
	"errors"
	"fmt"
	"hash"
	"io"
	"io/fs"
	"os"
	"path"
	"slices"
	"strings"
	"syscall"

	"github.com/stoker-dev/stoker/pipeline/internal/beneath"
)

// DefaultMaxFileSize is the per-file size cap: larger files are refused
// before they are read.
const DefaultMaxFileSize = 64 << 20

// Dataset is an indexed, read-only set of labelled encoded images. Index
// order is the same on every machine that sees the same files.
// Implementations are safe for concurrent use.
type Dataset interface {
	// Len is the number of samples.
	Len() int
	// Label is sample i's class index.
	Label(i int) int64
	// Classes names the classes, by label index.
	Classes() []string
	// Read returns sample i's encoded bytes, reusing buf when it is large
	// enough.
	Read(i int, buf []byte) ([]byte, error)
	// Name is where sample i comes from, for error messages (relative to the
	// dataset root; never an absolute path).
	Name(i int) string
	// Fingerprint is a hash of the index (names, sizes, labels): two
	// machines with the same fingerprint see the same data.
	Fingerprint() string
	// Close releases open files.
	Close() error
}

// Sharded is a Dataset whose samples are stored in shards (tar files,
// objects) that are cheapest to read in long runs: the block shuffle
// permutes whole shards and mixes samples only within a few of them.
// Samples of shard s are indices [ShardStarts()[s], ShardStarts()[s+1])
// (the last shard ends at Len()).
type Sharded interface {
	// ShardStarts is the first index of each shard, ascending, the first 0;
	// the caller must not modify it.
	ShardStarts() []int
}

// Prefetcher is a Dataset whose reads are slow to start (object storage):
// told which samples will be read soon, it may start fetching their bytes
// in the background, within its own bounds. The pipeline's Executor tells
// it, when a Fill is queued, the batch's indices in the order they will be
// read; the Dataset keeps no reference to the slice.
type Prefetcher interface {
	Prefetch(indices []int64)
}

// ShardPrefetcher is a Prefetcher of shards: told that a job reads the
// shards of these samples whole, over its next batches (the block
// shuffle), it may fetch each of those shards in a few long reads instead
// of a read per sample. The Dataset keeps no reference to the slice.
type ShardPrefetcher interface {
	PrefetchShards(indices []int64)
}

// FieldPrefetcher is a Prefetcher that reads samples' fields ahead with
// their images: the pipeline's Executor filling a Batch with a FieldSet
// calls it instead of Prefetch.
type FieldPrefetcher interface {
	PrefetchFields(indices []int64, fs *FieldSet)
}

// ShardFieldPrefetcher is a ShardPrefetcher that reads the fields of fs
// with the shards (nil: none).
type ShardFieldPrefetcher interface {
	PrefetchShardFields(indices []int64, fs *FieldSet)
}

// imageExts are the file extensions ImageFolder indexes: torchvision's
// IMG_EXTENSIONS less .ppm and .pgm, which no decoder here reads (indexing
// them would only turn each into a per-sample error).
var imageExts = []string{".jpg", ".jpeg", ".png", ".bmp", ".tif", ".tiff", ".gif", ".webp"}

func isImage(name string) bool {
	return slices.Contains(imageExts, strings.ToLower(path.Ext(name)))
}

// Open opens the dataset at dir: WebDataset shards when dir holds *.tar
// files (or is one), an ImageFolder tree otherwise. Compressed shards
// (*.tar.gz, *.tgz, ...) are refused with ErrUnsupported, saying why and
// how to decompress them: samples are read in place, by offset.
func Open(dir string) (Dataset, error) { return open(dir, nil) }

// open is Open, reporting how far its walk or its reads of the shards have
// come to progress (when not nil).
func open(dir string, progress func(IndexProgress)) (Dataset, error) {
	st, err := os.Stat(dir)
	if err != nil {
		return nil, err
	}
	if !st.IsDir() {
		switch {
		case strings.HasSuffix(dir, ".tar"):
			return openWebDataset(dir, progress)
		case compressedTool(dir) != "":
			return nil, errCompressedShards(dir, []string{path.Base(dir)})
		}
		return nil, fmt.Errorf("%w: dataset %s is neither a directory nor a .tar shard", ErrUnsupported, dir)
	}
	ents, err := os.ReadDir(dir)
	if err != nil {
		return nil, err
	}
	var names []string
	for _, e := range ents {
		if e.Type().IsRegular() {
			names = append(names, e.Name())
		}
	}
	if z := compressedShards(names); len(z) > 0 {
		return nil, errCompressedShards(dir, z)
	}
	for _, n := range names {
		if strings.HasSuffix(n, ".tar") {
			return openWebDataset(dir, progress)
		}
	}
	return openImageFolder(dir, progress)
}

// ImageFolder is a tree root/<class>/<file>, torchvision's ImageFolder:
// classes sorted by name give the label indices, files sorted within each
// class. Files are read through an os.Root, so neither ".." nor symbolic
// links can reach outside the root, and only regular files are read.
type ImageFolder struct {
	root    *os.Root
	fast    *beneath.Reader // reads below root in fewer system calls (nil: none)
	classes []string
	files   []string // relative to root
	labels  []int32
	sizes   []int64
	maxSize int64
	fp      string
}

// OpenImageFolder indexes the tree at dir. A class folder without an
// image is refused (ErrUnsupported), as torchvision refuses it.
func OpenImageFolder(dir string) (*ImageFolder, error) { return openImageFolder(dir, nil) }

func openImageFolder(dir string, progress func(IndexProgress)) (*ImageFolder, error) {
	root, err := os.OpenRoot(dir)
	if err != nil {
		return nil, err
	}
	var found func(int)
	if progress != nil {
		found = func(n int) { progress(IndexProgress{Phase: "list", Done: n}) }
	}
	ix, err := scanFolder(root, dir, false, found)
	if err != nil {
		root.Close()
		return nil, err
	}
	d := &ImageFolder{root: root, fast: beneath.New(root), maxSize: DefaultMaxFileSize, classes: ix.classes, files: ix.files, labels: ix.labels, sizes: ix.sizes}
	h := newIndexHash("imagefolder", d.classes)
	for i, f := range d.files {
		h.add(f, d.sizes[i], int64(d.labels[i]))
	}
	d.fp = h.sum()
	return d, nil
}

// folderIndex is what a walk of an ImageFolder finds: its classes, and
// its files in index order with their labels, sizes and (when asked)
// modification times.
type folderIndex struct {
	classes []string
	files   []string
	labels  []int32
	sizes   []int64
	mtimes  []int64 // Unix nanoseconds, when asked for
}

// scanFolder walks the ImageFolder at root (opened from dir, which
// messages name), as torchvision's ImageFolder does, calling progress (if
// not nil) with the count of files found now and then.
func scanFolder(root *os.Root, dir string, withTimes bool, progress func(files int)) (*folderIndex, error) {
	d := &folderIndex{}
	ents, err := fs.ReadDir(root.FS(), ".")
	if err != nil {
		return nil, err
	}
	for _, e := range ents { // ReadDir sorts by name
		if e.IsDir() && !strings.HasPrefix(e.Name(), ".") {
			d.classes = append(d.classes, e.Name())
		}
	}
	var empty []string // classes without an image
	for label, class := range d.classes {
		start := len(d.files)
		err := fs.WalkDir(root.FS(), class, func(p string, e fs.DirEntry, err error) error {
			if err != nil {
				return err
			}
			if e.IsDir() {
				if p != class && strings.HasPrefix(e.Name(), ".") {
					return fs.SkipDir
				}
				return nil
			}
			if !isImage(p) || strings.HasPrefix(e.Name(), ".") {
				return nil
			}
			info, err := e.Info()
			if err != nil {
				return err
			}
			// Symbolic links are indexed with their target's size (so the
			// fingerprint follows the target); whether they stay inside the
			// root is checked again when they are opened.
			if info.Mode()&fs.ModeSymlink != 0 {
				if t, err := root.Stat(p); err == nil {
					info = t
				}
			}
			if !info.Mode().IsRegular() && info.Mode()&fs.ModeSymlink == 0 {
				return nil
			}
			d.files = append(d.files, p)
			d.labels = append(d.labels, int32(label))
			d.sizes = append(d.sizes, info.Size())
			if withTimes {
				d.mtimes = append(d.mtimes, info.ModTime().UnixNano())
			}
			if progress != nil && len(d.files)%4096 == 0 {
				progress(len(d.files))
			}
			return nil
		})
		if err != nil {
			return nil, err
		}
		sortLikeOSWalk(d.files[start:], d.sizes[start:], d.mtimes[min(start, len(d.mtimes)):])
		if len(d.files) == start {
			empty = append(empty, class)
		}
	}
	if len(d.files) == 0 {
		return nil, fmt.Errorf("%w: no images in %s (want root/<class>/<image>)", ErrUnsupported, dir)
	}
	if len(empty) > 0 {
		return nil, errEmptyClasses(dir, empty)
	}
	return d, nil
}

// errEmptyClasses refuses class folders without an image, as torchvision's
// ImageFolder does ("Found no valid file for the classes …"): such a class
// would still take a label, which no sample has, and is most often a copy
// that went wrong.
func errEmptyClasses(dir string, empty []string) error {
	names := strings.Join(empty[:min(len(empty), 5)], ", ")
	if len(empty) > 5 {
		names += fmt.Sprintf(" and %d more", len(empty)-5)
	}
	return fmt.Errorf("%w: dataset %s: no images in the class folder(s) %s (images are %s files, hidden ones not counted; "+
		"torchvision's ImageFolder refuses such folders too): add images to them, or remove them",
		ErrUnsupported, dir, names, strings.Join(imageExts, " "))
}

// sortLikeOSWalk puts one class's files (and their sizes and, when there
// are any, times) in torchvision's order, sorted(os.walk(class)) then
// sorted file names: by directory, then by name. WalkDir's order differs
// once a class has subdirectories: it visits a subdirectory in place,
// between the files around its name.
func sortLikeOSWalk(files []string, sizes, times []int64) {
	idx := make([]int, len(files))
	for i := range idx {
		idx[i] = i
	}
	slices.SortFunc(idx, func(a, b int) int {
		if c := strings.Compare(path.Dir(files[a]), path.Dir(files[b])); c != 0 {
			return c
		}
		return strings.Compare(path.Base(files[a]), path.Base(files[b]))
	})
	f, s, t := slices.Clone(files), slices.Clone(sizes), slices.Clone(times)
	for i, j := range idx {
		files[i], sizes[i] = f[j], s[j]
		if len(t) > 0 {
			times[i] = t[j]
		}
	}
}

// SetMaxFileSize sets the per-file size cap (default DefaultMaxFileSize).
func (d *ImageFolder) SetMaxFileSize(n int64) { d.maxSize = n }

// Len implements Dataset.
func (d *ImageFolder) Len() int { return len(d.files) }

// Label implements Dataset.
func (d *ImageFolder) Label(i int) int64 { return int64(d.labels[i]) }

// Classes implements Dataset.
func (d *ImageFolder) Classes() []string { return d.classes }

// Name implements Dataset.
func (d *ImageFolder) Name(i int) string { return d.files[i] }

// Fingerprint implements Dataset.
func (d *ImageFolder) Fingerprint() string { return d.fp }

// Close implements Dataset.
func (d *ImageFolder) Close() error {
	d.fast.Close()
	return d.root.Close()
}

// Read implements Dataset.
func (d *ImageFolder) Read(i int, buf []byte) ([]byte, error) {
	if i < 0 || i >= len(d.files) {
		return nil, fmt.Errorf("%w: sample index %d out of range [0, %d)", ErrUnsupported, i, len(d.files))
	}
	if b, ok := d.fast.Read(d.files[i], d.sizes[i], d.maxSize, buf); ok {
		return b, nil
	}
	// Non-blocking: opening a FIFO for reading blocks until a writer comes,
	// so the regular-file check below would never run. It has no effect on
	// regular files.
	f, err := d.root.OpenFile(d.files[i], os.O_RDONLY|syscall.O_NONBLOCK, 0)
	if err != nil {
		return nil, openError(d.root, d.files[i], "dataset root", err)
	}
	defer f.Close()
	st, err := f.Stat()
	if err != nil {
		return nil, fmt.Errorf("%s: %w", d.files[i], stripPath(err))
	}
	if !st.Mode().IsRegular() {
		return nil, fmt.Errorf("%w: %s is not a regular file", ErrUnsupported, d.files[i])
	}
	// The index (and so the fingerprint) promises these bytes: a file
	// that grew or shrank since is refused, not read as it is now.
	if st.Size() != d.sizes[i] {
		return nil, fmt.Errorf("%w: %s changed since the dataset was indexed: %d bytes, indexed at %d (reopen the dataset to take the change)", ErrCorrupt, d.files[i], st.Size(), d.sizes[i])
	}
	return readCapped(f, st.Size(), d.maxSize, d.files[i], buf)
}

// openError explains why name could not be opened through root: a
// symbolic link that does not resolve inside it (it leads out, loops) is
// ErrUnsupported; anything else (a missing file, no permission) is the
// I/O error, which wraps fs.ErrNotExist, fs.ErrPermission and so on and is
// not bad input. Messages name the file relative to the root, never the
// root's own path.
func openError(root *os.Root, name, what string, err error) error {
	if !errors.Is(err, fs.ErrNotExist) && !errors.Is(err, fs.ErrPermission) {
		if st, lerr := root.Lstat(name); lerr == nil && st.Mode()&fs.ModeSymlink != 0 {
			return fmt.Errorf("%w: %s is a symbolic link that does not resolve inside the %s (%v)", ErrUnsupported, name, what, stripPath(err))
		}
	}
	return fmt.Errorf("%s: %w", name, stripPath(err))
}

// stripPath drops the path from an *fs.PathError, keeping its operation
// and cause (which errors.Is still finds): files opened from a root carry
// the root's absolute path, and errors travel to clients.
func stripPath(err error) error {
	var pe *fs.PathError
	if errors.As(err, &pe) {
		return fmt.Errorf("%s: %w", pe.Op, pe.Err)
	}
	return err
}

// readCapped reads exactly size bytes of r into buf (grown as needed),
// refusing sizes over max before reading.
func readCapped(r io.Reader, size, max int64, name string, buf []byte) ([]byte, error) {
	if size > max {
		return nil, fmt.Errorf("%w: %s is %d bytes, over the %d-byte file cap", ErrTooLarge, name, size, max)
	}
	if int64(cap(buf)) < size {
		buf = make([]byte, size, size+size/4)
	}
	buf = buf[:size]
	if _, err := io.ReadFull(r, buf); err != nil {
		if errors.Is(err, io.ErrUnexpectedEOF) || errors.Is(err, io.EOF) {
			return nil, fmt.Errorf("%w: %s: shorter than its size %d", ErrCorrupt, name, size)
		}
		return nil, fmt.Errorf("%s: %w", name, stripPath(err))
	}
	return buf, nil
}

// indexHash builds a dataset fingerprint from its index.
type indexHash struct{ h hash.Hash }

func newIndexHash(kind string, classes []string) indexHash {
	h := indexHash{sha256.New()}
	h.str(kind)
	for _, c := range classes {
		h.str(c)
	}
	return h
}

func (h indexHash) str(s string) {
	var n [8]byte
	binary.LittleEndian.PutUint64(n[:], uint64(len(s)))
	h.h.Write(n[:])
	io.WriteString(h.h, s)
}

func (h indexHash) add(name string, size, label int64) {
	h.str(name)
	var n [16]byte
	binary.LittleEndian.PutUint64(n[:], uint64(size))
	binary.LittleEndian.PutUint64(n[8:], uint64(label))
	h.h.Write(n[:])
}

func (h indexHash) sum() string { return hex.EncodeToString(h.h.Sum(nil)[:16]) }

var _ Fielded = (*ImageFolder)(nil)

// FieldID implements Fielded: "path", the file relative to the root, and
// "__key__", that path without its extension.
func (d *ImageFolder) FieldID(name string) (int, bool) {
	switch name {
	case FieldPath:
		return fieldIDPath, true
	case FieldKey:
		return fieldIDKey, true
	}
	return 0, false
}

// FieldNames implements Fielded.
func (d *ImageFolder) FieldNames() []string { return []string{FieldPath, FieldKey, FieldSource} }

// FieldSize implements Fielded.
func (d *ImageFolder) FieldSize(i, id int) int64 {
	switch id {
	case fieldIDPath:
		return int64(len(d.files[i]))
	case fieldIDKey:
		return int64(len(keyOfPath(d.files[i])))
	}
	return -1
}

// ReadField implements Fielded: names only, nothing is read.
func (d *ImageFolder) ReadField(i, id int, buf []byte) ([]byte, error) {
	switch id {
	case fieldIDPath:
		return append(buf[:0], d.files[i]...), nil
	case fieldIDKey:
		return append(buf[:0], keyOfPath(d.files[i])...), nil
	}
	return nil, fmt.Errorf("%w: sample %s has no such field", ErrUnsupported, d.files[i])
}

// FileSizer is a Dataset that knows the size of a sample's file before it
// reads it (its index's, which Read holds the file to): the memory budget
// reserves a read's buffer before the read (pipeline/scratch.go).
type FileSizer interface {
	// FileSize is sample i's file size and whether it is known; a file
	// over the dataset's file cap is 0 (Read refuses it unread).
	FileSize(i int) (int64, bool)
}

// capped is size, or 0 over the file cap max (Read refuses it unread).
func capped(size, max int64) int64 {
	if size > max {
		return 0
	}
	return size
}

// FileSize implements FileSizer: the indexed size.
func (d *ImageFolder) FileSize(i int) (int64, bool) {
	if i < 0 || i >= len(d.sizes) {
		return 0, false
	}
	return capped(d.sizes[i], d.maxSize), true
}
