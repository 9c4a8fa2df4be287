package dataset

import (
	"context"
	"crypto/sha256"
	"encoding/binary"
	"fmt"
	"io"
	"os"
	"sync"
	"sync/atomic"

	"github.com/stoker-dev/stoker/pipeline/source"
)

// A manifest that records its images' sizes (stoker index --sizes) is
// of version 7: its layout's sections, then
//
//	sizes: count (the samples'), then each sample's image width and
//	       height as its header declares them (0 0: unknown)
const manifestVersionSizes = 7

// maxImageSide bounds a recorded width or height.
const maxImageSide = 1 << 30

// sizes reads the sizes section (version 7).
func (d *decoder) sizes(m *Manifest, ns int) {
	n := d.count("sizes", 2)
	if d.err == nil && n == 0 && d.version >= manifestVersionRecords {
		return // none recorded (a WebDataset's records without --sizes)
	}
	if d.err == nil && n != ns {
		d.fail("%d sizes for %d samples", n, ns)
	}
	if d.err != nil {
		return
	}
	m.sizes = make([]uint32, 0, 2*ns)
	for i := 0; i < 2*ns && d.err == nil; i++ {
		m.sizes = append(m.sizes, uint32(d.int("image side", maxImageSide)))
	}
}

// SetImageSize records sample i's image size (w, h > 0), as its header
// declares it, once every sample is added: a plan cut by vision tokens
// reads the sizes without decoding (ImageSize).
func (m *Manifest) SetImageSize(i, w, h int) {
	if m.sizes == nil {
		m.sizes = make([]uint32, 2*m.Len())
	}
	if w <= 0 || h <= 0 || w > maxImageSide || h > maxImageSide {
		m.bad = true
		return
	}
	m.sizes[2*i], m.sizes[2*i+1] = uint32(w), uint32(h)
}

// ImageSize is sample i's image size as the manifest records it; ok is
// false where it records none.
func (m *Manifest) ImageSize(i int) (w, h int, ok bool) {
	if m.sizes == nil {
		return 0, 0, false
	}
	w, h = int(m.sizes[2*i]), int(m.sizes[2*i+1])
	return w, h, w > 0
}

// HasImageSizes says whether the manifest records its images' sizes.
func (m *Manifest) HasImageSizes() bool { return m.sizes != nil }

// SizesFingerprint is a hash of the recorded sizes ("" when none): a plan
// cut by vision tokens is a function of them, so servers that share such
// a job compare it beside Fingerprint, which, as Open's scan of the same
// files, holds no size.
func (m *Manifest) SizesFingerprint() string {
	if m.sizes == nil {
		return ""
	}
	h := sha256.New()
	buf := make([]byte, 0, 4*len(m.sizes))
	for _, v := range m.sizes {
		buf = binary.LittleEndian.AppendUint32(buf, v)
	}
	h.Write(buf)
	return fmt.Sprintf("%x", h.Sum(nil)[:16])
}

// checkSizes holds the sizes to one a sample, both sides known or none.
func (m *Manifest) checkSizes() error {
	if m.sizes == nil {
		return nil
	}
	if len(m.sizes) != 2*m.Len() {
		return fmt.Errorf("%w: %d image sizes for %d samples", ErrManifest, len(m.sizes)/2, m.Len())
	}
	for i := 0; i < len(m.sizes); i += 2 {
		if (m.sizes[i] == 0) != (m.sizes[i+1] == 0) {
			return fmt.Errorf("%w: sample %d's image is %dx%d", ErrManifest, i/2, m.sizes[i], m.sizes[i+1])
		}
	}
	return nil
}

// sizeHead is what of an image is read first for its header: a JPEG's
// frame header comes after its APPn segments (EXIF with a thumbnail, ICC
// profiles), most often within the first few KiB; an image whose header
// is not within it is read whole (up to its size) and parsed again.
const sizeHead = 256 << 10

// opener reads object obj from byte off.
type opener func(ctx context.Context, obj source.Object, off int64) (io.ReadCloser, error)

// recordSizes reads the header of every sample's image of m (a sample
// without one, or whose header o.ImageSize refuses, is recorded as of
// unknown size: a plan by vision tokens fails it alone), o.Concurrency at
// a time, and records their sizes. A read that fails ends the index.
func recordSizes(ctx context.Context, m *Manifest, open opener, o IndexOptions) error {
	n := m.Len()
	sizes := make([]uint32, 2*n)
	ctx, cancel := context.WithCancelCause(ctx)
	defer cancel(nil)
	var next atomic.Int64
	var wg sync.WaitGroup
	for range min(o.concurrency(), max(n, 1)) {
		wg.Go(func() {
			for {
				i := int(next.Add(1) - 1)
				if i >= n || ctx.Err() != nil {
					return
				}
				w, h, err := sampleSize(ctx, m, i, open, o.ImageSize)
				if err != nil {
					cancel(err)
					return
				}
				sizes[2*i], sizes[2*i+1] = uint32(w), uint32(h)
			}
		})
	}
	wg.Wait()
	if err := context.Cause(ctx); err != nil {
		return err
	}
	m.sizes = sizes
	return nil
}

// sampleSize is sample i's image size by its header, (0, 0) where it
// has none or parse refuses it; an error only where the bytes cannot be
// read.
func sampleSize(ctx context.Context, m *Manifest, i int, open opener, parse func([]byte) (int, int, error)) (int, int, error) {
	s := m.Sample(i)
	if s.NoImage || s.Size == 0 {
		return 0, 0, nil
	}
	obj := m.Object(s.Object)
	read := func(limit int64) ([]byte, error) {
		rc, err := open(ctx, obj, s.Off)
		if err != nil {
			return nil, err
		}
		defer rc.Close()
		b, err := io.ReadAll(io.LimitReader(rc, min(limit, s.Size)))
		if err != nil {
			return nil, fmt.Errorf("reading the header of %s: %w", m.name(i), err)
		}
		return b, nil
	}
	head, err := read(sizeHead)
	if err != nil {
		return 0, 0, err
	}
	w, h, perr := parse(head)
	if perr != nil && s.Size > sizeHead {
		if head, err = read(s.Size); err != nil {
			return 0, 0, err
		}
		w, h, perr = parse(head)
	}
	if perr != nil || w <= 0 || h <= 0 || w > maxImageSide || h > maxImageSide {
		return 0, 0, nil
	}
	return w, h, nil
}

// rootOpener reads a local dataset's files through root.
func rootOpener(root *os.Root) opener {
	return func(_ context.Context, obj source.Object, off int64) (io.ReadCloser, error) {
		f, err := root.Open(obj.Key)
		if err != nil {
			return nil, err
		}
		if _, err := f.Seek(off, io.SeekStart); err != nil {
			f.Close()
			return nil, err
		}
		return f, nil
	}
}

// sizeIndexed records the sizes of an annotated dataset's manifest
// (IndexAnnotated) when its index options ask for them, its images read
// through open.
func sizeIndexed(ctx context.Context, m *Manifest, opts []SourceOption, open opener) error {
	var o sourceOptions
	for _, f := range opts {
		f(&o)
	}
	if o.index.ImageSize == nil {
		return nil
	}
	return recordSizes(ctx, m, open, o.index)
}
