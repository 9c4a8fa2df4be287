package dataset

// A StoreDataset's reads: a sample's bytes checked against its manifest
// (size, SHA-256, version), its label against the shard's own; and a COCO
// or YOLO dataset's images in a store, at their listed versions.

import (
	"bytes"
	"context"
	"crypto/sha256"
	"errors"
	"fmt"
	"strings"

	"github.com/stoker-dev/stoker/pipeline/errs"
	"github.com/stoker-dev/stoker/pipeline/source"
)

// Read implements Dataset. A sample over the size cap is refused before it
// is read; an object that is not the one indexed is an error wrapping
// ErrCorrupt and source.ErrChanged; a store that did not answer within
// its retry policy, one wrapping source.ErrUnavailable. A key without an
// image (an unlabelled WebDataset's) fails, naming what it has.
func (d *StoreDataset) Read(i int, buf []byte) ([]byte, error) {
	if i < 0 || i >= d.m.Len() {
		return nil, fmt.Errorf("%w: sample index %d out of range [0, %d)", ErrUnsupported, i, d.m.Len())
	}
	t := &d.m.samples
	if t.noImage[int32(i)] {
		var exts []string
		for k := range d.m.fields.entries(i) {
			e, _, _ := d.m.fields.entry(i, k)
			exts = append(exts, e)
		}
		return nil, errNoImage(d.Name(i), exts)
	}
	member := cut(&t.mems, t.memEnd, i)
	data, checked, err := d.readHashed(i, member, buf)
	if err != nil {
		return nil, err
	}
	if err := d.checkLabel(i, member); err != nil {
		return nil, err
	}
	if checked {
		return data, nil
	}
	return data, d.checkHash(i, data)
}

// readHashed is readMember for sample i's image. Where the sample has a
// content hash and the dataset reads through a byte cache
// (source.CheckedRanges), the cache checks it: bytes are hashed once,
// when read from the store (or first served from the cache), and those
// served from memory again are not hashed again; bytes whose hash is not
// the manifest's are never cached. checked says it did.
func (d *StoreDataset) readHashed(i int, member string, buf []byte) (data []byte, checked bool, err error) {
	t := &d.m.samples
	want := d.m.hash(i)
	cr, ok := d.rd.(source.CheckedRanges)
	if want == nil || !ok {
		data, err = d.readMember(i, member, t.off[i], t.size[i], buf)
		return data, false, err
	}
	size := t.size[i]
	check := func(b []byte) error {
		if int64(len(b)) > size && d.m.Layout == LayoutWebDataset {
			b = b[len(b)-int(size):] // after the tar header
		}
		if int64(len(b)) != size {
			return errNotIndexed
		}
		if got := sha256.Sum256(b); !bytes.Equal(got[:], want) {
			return errNotIndexed
		}
		return nil
	}
	read := func(ctx context.Context, r source.Range, buf []byte) ([]byte, error) {
		return cr.ReadChecked(ctx, r, buf, check)
	}
	data, err = d.readMemberWith(read, i, member, t.off[i], size, buf)
	if errors.Is(err, errNotIndexed) {
		return nil, false, d.notIndexed(i)
	}
	return data, err == nil, err
}

// errNotIndexed is readHashed's check refusing a sample's bytes.
var errNotIndexed = errors.New("bytes not those indexed")

// checkLabel reads labelled WebDataset sample i's .cls member (the tar
// header before it must name the key's .cls, of its size) and checks the
// manifest's label against it: a manifest is believed for where a label
// is, never for what it is.
func (d *StoreDataset) checkLabel(i int, image string) error {
	off, size := d.m.cls(i)
	if size == 0 {
		return nil
	}
	key, _, _ := keyOfMember(image)
	cls := key + ".cls"
	r := d.memberRange(i, off, size)
	var b [tarBlock + maxClsBytes]byte
	data, err := d.rd.Read(d.ctx, r, b[:r.Len])
	if err != nil {
		if errors.Is(err, source.ErrChanged) {
			return fmt.Errorf("%w: %w: %s", ErrCorrupt, err, d.stale)
		}
		return err
	}
	if int64(len(data)) != r.Len || r.Len != tarBlock+size {
		return fmt.Errorf("%w: %w: %s: its .cls at bytes [%d, +%d) of the shard, where no member's data can be", ErrCorrupt, ErrManifest, errs.Clip(d.Name(i), 1024), off, size)
	}
	if n := tarName(data[:tarBlock]); strings.EqualFold(n, cls) {
		cls = n // .CLS is a label too, as the scan takes it
	}
	if err := checkTarHeader(data[:tarBlock], cls, size); err != nil {
		return fmt.Errorf("%w: %w: %s: the manifest gives its label bytes [%d, +%d) of the shard, but %v: %s",
			ErrCorrupt, ErrManifest, errs.Clip(d.Name(i), 1024), off, size, err, d.stale)
	}
	got, err := parseCls(data[tarBlock:])
	if err != nil {
		return fmt.Errorf("%w: %s: %s: %v", ErrUnsupported, errs.Clip(d.Name(i), 1024), errs.Clip(cls, 1024), err)
	}
	if want := d.Label(i); got != want {
		return fmt.Errorf("%w: %w: %s: the manifest labels it %d, but its shard's %s says %d: the manifest was not made from these shards (stale, or made up): %s",
			ErrCorrupt, ErrManifest, errs.Clip(d.Name(i), 1024), want, errs.Clip(cls, 1024), got, d.stale)
	}
	return nil
}

// readMember reads bytes [off, off+size) of sample i's object, member
// (its name in a shard; "" for an ImageFolder's whole object): a shard's
// member with the tar header before it, which must name it and its size.
func (d *StoreDataset) readMember(i int, member string, off, size int64, buf []byte) ([]byte, error) {
	return d.readMemberWith(nil, i, member, off, size, buf)
}

// readMemberWith is readMember reading through read (nil: the dataset's
// Ranges' Read).
func (d *StoreDataset) readMemberWith(read func(context.Context, source.Range, []byte) ([]byte, error), i int, member string, off, size int64, buf []byte) ([]byte, error) {
	if size > d.maxSize {
		return nil, fmt.Errorf("%w: %s is %d bytes, over the %d-byte file cap", ErrTooLarge, d.Name(i), size, d.maxSize)
	}
	r := d.memberRange(i, off, size)
	var data []byte
	var err error
	if read == nil {
		data, err = d.rd.Read(d.ctx, r, buf)
	} else {
		data, err = read(d.ctx, r, buf)
	}
	if err != nil {
		if errors.Is(err, source.ErrChanged) {
			return nil, fmt.Errorf("%w: %w: %s", ErrCorrupt, err, d.stale)
		}
		return nil, err
	}
	if int64(len(data)) != r.Len {
		return nil, fmt.Errorf("%w: %s: read %d bytes of %d", ErrCorrupt, d.Name(i), len(data), r.Len)
	}
	if d.m.Layout != LayoutWebDataset {
		return data, nil
	}
	if r.Len == size {
		return nil, fmt.Errorf("%w: %w: %s starts at byte %d of its shard, where no member's data can", ErrCorrupt, ErrManifest, errs.Clip(member, 1024), r.Off)
	}
	if err := checkTarHeader(data[:tarBlock], member, size); err != nil {
		return nil, fmt.Errorf("%w: %w: %s: the manifest gives it bytes [%d, +%d) of the shard, but %v: %s",
			ErrCorrupt, ErrManifest, errs.Clip(d.m.key(int(d.m.samples.obj[i]))+"/"+member, 1024), r.Off+tarBlock, size, err, d.stale)
	}
	// The member's bytes where its caller wants them: at the buffer's
	// start (a copy of the sample, under a decode's cost).
	n := copy(data, data[tarBlock:])
	return data[:n], nil
}

// checkHash checks sample i's bytes against its content hash, where it
// has one (its object has no version).
func (d *StoreDataset) checkHash(i int, data []byte) error {
	want := d.m.hash(i)
	if want == nil {
		return nil
	}
	if got := sha256.Sum256(data); !bytes.Equal(got[:], want) {
		return d.notIndexed(i)
	}
	return nil
}

// notIndexed is the error of sample i whose bytes' SHA-256 is not its
// manifest's.
func (d *StoreDataset) notIndexed(i int) error {
	return fmt.Errorf("%w: %w: %s: its bytes are not those indexed (their SHA-256 differs; the store gives it no version to ask for): %s",
		ErrCorrupt, source.ErrChanged, errs.Clip(d.Name(i), 1024), d.stale)
}

// storeImages are a COCO or YOLO dataset's images in a store, an object
// each, read at their listed versions.
type storeImages struct {
	st    source.Store
	rd    source.Ranges
	objs  []source.Object
	stale string
	// ctx ends the reads in flight when the dataset closes.
	ctx    context.Context
	cancel context.CancelFunc
}

// newStoreImages reads objs from st through rd. An object without a
// version is refused: nothing would tell its bytes from another's.
func newStoreImages(st source.Store, rd source.Ranges, objs []source.Object) (*storeImages, error) {
	for _, o := range objs {
		if o.Version == "" {
			return nil, fmt.Errorf("%w: %s gives the image %s no version (ETag or generation): nothing would tell other bytes from its", ErrUnsupported, st, o.Key)
		}
	}
	s := &storeImages{st: st, rd: rd, objs: objs,
		stale: "the dataset changed since it was listed; restart to list it again"}
	s.ctx, s.cancel = context.WithCancel(context.Background())
	return s, nil
}

// read reads image i (named name), refused over max bytes.
func (s *storeImages) read(i int, name string, max int64, buf []byte) ([]byte, error) {
	o := s.objs[i]
	if o.Size > max {
		return nil, fmt.Errorf("%w: %s is %d bytes, over the %d-byte file cap", ErrTooLarge, name, o.Size, max)
	}
	data, err := s.rd.Read(s.ctx, source.Range{Obj: o, Len: o.Size}, buf)
	switch {
	case errors.Is(err, source.ErrChanged):
		return nil, fmt.Errorf("%w: %w: %s", ErrCorrupt, err, s.stale)
	case err != nil:
		return nil, err
	case int64(len(data)) != o.Size:
		return nil, fmt.Errorf("%w: %s: read %d bytes of %d", ErrCorrupt, name, len(data), o.Size)
	}
	return data, nil
}

// prefetch hints the images at indices (within max bytes) to the Ranges.
func (s *storeImages) prefetch(indices []int64, max int64) {
	if _, direct := s.rd.(source.Direct); direct {
		return
	}
	rs := make([]source.Range, 0, len(indices))
	for _, i := range indices {
		if i >= 0 && i < int64(len(s.objs)) && s.objs[i].Size <= max {
			rs = append(rs, source.Range{Obj: s.objs[i], Len: s.objs[i].Size})
		}
	}
	if len(rs) > 0 {
		s.rd.Prefetch(rs)
	}
}

func (s *storeImages) close() error {
	s.cancel()
	return s.st.Close()
}

var (
	_ Prefetcher = (*COCODataset)(nil)
	_ Prefetcher = (*YOLODataset)(nil)
)

// Prefetch implements Prefetcher: images in a store are hinted to its
// read-ahead; a directory's are not.
func (d *COCODataset) Prefetch(indices []int64) {
	if d.imgs != nil {
		d.imgs.prefetch(indices, d.maxSize)
	}
}

// Prefetch implements Prefetcher, as COCODataset's.
func (d *YOLODataset) Prefetch(indices []int64) {
	if d.imgs != nil {
		d.imgs.prefetch(indices, d.maxSize)
	}
}
