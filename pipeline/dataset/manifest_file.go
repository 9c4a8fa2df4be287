package dataset

import (
	"bufio"
	"bytes"
	"compress/gzip"
	"crypto/sha256"
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"math"
	"strings"
)

// A Manifest on disk (Manifest.Encode, DecodeManifest):
//
//	"STOKERMF"             8 bytes
//	version                u32 (manifestVersion)
//	body length            u64: the gzip-compressed body's bytes, C
//	uncompressed length    u64: the body's bytes once uncompressed, U
//	checksum               32 bytes, SHA-256 of the compressed body
//	body                   C bytes, gzip; the file ends with it
//
// little-endian, and the body, uncompressed, is a sequence of unsigned
// varints and strings (a varint length, then its bytes):
//
//	root, layout
//	classes: count, then each name
//	objects: count, then each: key, size, version, mtime (Unix ns, 0: none)
//	samples: count, then each: object, offset, size, label, member name
//	hashes: count (0, or the samples'), then each sample's SHA-256, 32
//	        bytes (all zeros: none); not in version 1
//	fields (version 3): the extensions: count, then each name; then for
//	        each sample: its entries' count times 2, plus 1 when it has
//	        no image, then each entry: extension (its index), offset
//	        (zigzag, from the sample's), size
//	cls (version 4): count (0, or the samples'), then each sample's .cls
//	        member: offset (zigzag, from the sample's), size (0: none)
//	annotations (version 5, a COCO manifest's alone): the hex SHA-256 of
//	        its annotations file
//
// A WebDataset with records of several images (KEY.0.jpg, KEY.1.jpg, ...:
// webdataset_records.go) is written as version 8, version 7's body whose
// sizes section may be empty (count 0: none recorded): its records are
// its members' names, and an older stoker refuses the version rather
// than serve a record's images as samples of their own.
//
// In version 3 a label is written plus one (0: none, an unlabelled
// WebDataset's). A manifest of an earlier version records no fields: a
// server reading one serves its samples' keys and labels, and asks for a
// new index when a job asks for other fields.
//
// A manifest is outside input. Nothing of it is parsed before the whole
// body is read and its checksum verified; U may be at most maxInflate
// times C, decompression stops at U, and no table is sized by a count
// before the bytes that would fill it have arrived: what a file can make
// this process allocate is bounded by its size.
const (
	manifestMagic   = "STOKERMF"
	manifestVersion = 4
	// manifestVersionCOCO is a COCO manifest's version (its annotations'
	// hash after the rest); the others are written as version 4, byte for
	// byte as before.
	manifestVersionCOCO = 5
	manifestHeader      = 8 + 4 + 8 + 8 + sha256.Size
	// DefaultMaxManifestSize bounds a manifest file read (1 GiB: tens of
	// millions of samples).
	DefaultMaxManifestSize = 1 << 30
	// maxInflate bounds the body's compression ratio (gzip of these
	// tables is 3-10x; a decompression bomb is 1000x).
	maxInflate = 32
	// maxManifestString bounds one string in a manifest: object keys
	// (S3's limit is 1 KiB), paths, tar member names.
	maxManifestString = 64 << 10
)

// ErrManifest is wrapped by the errors DecodeManifest returns for a file
// that is not a valid manifest (corrupt, truncated, another version), and
// by OpenSource's for a manifest of another dataset or one gone stale.
var ErrManifest = errors.New("manifest not valid")

// Encode writes m in the manifest file format.
func (m *Manifest) Encode(w io.Writer) error {
	var body bytes.Buffer
	zw, _ := gzip.NewWriterLevel(&body, gzip.DefaultCompression)
	cw := &countWriter{w: zw}
	bw := bufio.NewWriterSize(cw, 1<<16)
	e := encoder{w: bw}
	e.str(m.Root)
	e.str(m.Layout)
	classes := m.Classes
	if m.Layout == LayoutWebDataset {
		classes = nil // derived from the labels
	}
	e.uint(uint64(len(classes)))
	for _, c := range classes {
		e.str(c)
	}
	o := &m.objs
	e.uint(uint64(len(o.sizes)))
	for i := range o.sizes {
		e.str(cut(&o.keys, o.keyEnd, i))
		e.uint(uint64(o.sizes[i]))
		e.str(cut(&o.vers, o.verEnd, i))
		e.uint(uint64(o.mtimes[i]))
	}
	s := &m.samples
	e.uint(uint64(len(s.obj)))
	for i := range s.obj {
		e.uint(uint64(s.obj[i]))
		e.uint(uint64(s.off[i]))
		e.uint(uint64(s.size[i]))
		e.uint(uint64(int64(s.label[i]) + 1))
		e.str(cut(&s.mems, s.memEnd, i))
	}
	e.uint(uint64(len(s.hashes) / sha256.Size))
	bw.Write(s.hashes)
	m.encodeFields(&e)
	e.uint(uint64(len(s.clsSize)))
	for i := range s.clsSize {
		e.uint(zigzag(s.clsOff[i] - s.off[i]))
		e.uint(uint64(s.clsSize[i]))
	}
	version := uint32(manifestVersion)
	if m.annotated() {
		version = manifestVersionCOCO
		e.str(m.AnnotationsSHA256)
	}
	if m.Layout == LayoutYOLO {
		version = manifestVersionYOLO
		m.encodeLabels(&e)
	}
	if m.sizes != nil || m.hasRecords() {
		version = manifestVersionSizes
		e.uint(uint64(len(m.sizes) / 2))
		for _, v := range m.sizes {
			e.uint(uint64(v))
		}
	}
	if m.hasRecords() {
		// Its records are grouped from its members' names: no section of
		// their own, but an older stoker, which would serve their images
		// as samples of their own, must refuse it.
		version = manifestVersionRecords
	}
	if err := errors.Join(bw.Flush(), zw.Close()); err != nil {
		return err
	}
	var hdr [manifestHeader]byte
	copy(hdr[:], manifestMagic)
	binary.LittleEndian.PutUint32(hdr[8:], version)
	binary.LittleEndian.PutUint64(hdr[12:], uint64(body.Len()))
	binary.LittleEndian.PutUint64(hdr[20:], uint64(cw.n))
	sum := sha256.Sum256(body.Bytes())
	copy(hdr[28:], sum[:])
	if _, err := w.Write(hdr[:]); err != nil {
		return err
	}
	_, err := w.Write(body.Bytes())
	return err
}

type countWriter struct {
	w io.Writer
	n int64
}

func (c *countWriter) Write(p []byte) (int, error) {
	n, err := c.w.Write(p)
	c.n += int64(n)
	return n, err
}

type encoder struct {
	w   *bufio.Writer
	buf [binary.MaxVarintLen64]byte
}

func (e *encoder) uint(v uint64) { e.w.Write(binary.AppendUvarint(e.buf[:0], v)) }

func (e *encoder) str(s string) {
	e.uint(uint64(len(s)))
	e.w.WriteString(s)
}

// DecodeManifest reads a manifest file of at most maxSize bytes (0:
// DefaultMaxManifestSize) from r. An error about the file's content wraps
// ErrManifest.
func DecodeManifest(r io.Reader, maxSize int64) (*Manifest, error) {
	if maxSize <= 0 {
		maxSize = DefaultMaxManifestSize
	}
	var hdr [manifestHeader]byte
	if _, err := io.ReadFull(r, hdr[:]); err != nil {
		if errors.Is(err, io.EOF) || errors.Is(err, io.ErrUnexpectedEOF) {
			return nil, fmt.Errorf("%w: %d-byte header cut short", ErrManifest, manifestHeader)
		}
		return nil, err
	}
	if string(hdr[:8]) != manifestMagic {
		return nil, fmt.Errorf("%w: not a stoker manifest (magic %q)", ErrManifest, hdr[:8])
	}
	version := binary.LittleEndian.Uint32(hdr[8:])
	if version < 1 || version > manifestVersionRecords {
		return nil, fmt.Errorf("%w: format version %d, this stoker reads 1 to %d (run stoker index again)", ErrManifest, version, manifestVersionRecords)
	}
	clen, ulen := binary.LittleEndian.Uint64(hdr[12:]), binary.LittleEndian.Uint64(hdr[20:])
	if clen > uint64(maxSize-manifestHeader) {
		return nil, fmt.Errorf("%w: body of %d bytes, over the %d-byte limit", ErrManifest, clen, maxSize)
	}
	if ulen > maxInflate*clen+1<<20 {
		return nil, fmt.Errorf("%w: body of %d bytes claims %d uncompressed", ErrManifest, clen, ulen)
	}
	// Read the body in pieces, so that a header claiming more than the
	// file holds costs what the file holds.
	var body bytes.Buffer
	if n, err := io.Copy(&body, io.LimitReader(r, int64(clen))); err != nil {
		return nil, err
	} else if uint64(n) != clen {
		return nil, fmt.Errorf("%w: body cut short at %d of %d bytes", ErrManifest, n, clen)
	}
	if n, _ := io.Copy(io.Discard, io.LimitReader(r, 1)); n != 0 {
		return nil, fmt.Errorf("%w: bytes after the body", ErrManifest)
	}
	if sum := sha256.Sum256(body.Bytes()); !bytes.Equal(sum[:], hdr[28:]) {
		return nil, fmt.Errorf("%w: checksum mismatch (corrupt or truncated)", ErrManifest)
	}
	zr, err := gzip.NewReader(&body)
	if err != nil {
		return nil, fmt.Errorf("%w: %v", ErrManifest, err)
	}
	zr.Multistream(false)
	d := &decoder{r: bufio.NewReaderSize(io.LimitReader(zr, int64(ulen)), maxManifestString), left: int64(ulen), version: version}
	m, err := d.manifest()
	if err != nil {
		return nil, err
	}
	if d.left != 0 {
		return nil, fmt.Errorf("%w: %d bytes of the body left over", ErrManifest, d.left)
	}
	if n, err := io.Copy(io.Discard, zr); err != nil || n != 0 {
		return nil, fmt.Errorf("%w: body longer than declared, or bad: %v", ErrManifest, err)
	}
	if err := m.check(); err != nil {
		return nil, err
	}
	return m, nil
}

// decoder reads the body, counting what is left of its declared length.
type decoder struct {
	r       *bufio.Reader
	left    int64
	err     error
	version uint32
}

func (d *decoder) fail(format string, a ...any) {
	if d.err == nil {
		d.err = fmt.Errorf("%w: "+format, append([]any{ErrManifest}, a...)...)
	}
}

func (d *decoder) uint() uint64 {
	if d.err != nil {
		return 0
	}
	v, err := binary.ReadUvarint(d)
	if err != nil {
		d.fail("body cut short: %v", err)
	}
	return v
}

// ReadByte implements io.ByteReader for ReadUvarint.
func (d *decoder) ReadByte() (byte, error) {
	b, err := d.r.ReadByte()
	if err == nil {
		d.left--
	}
	return b, err
}

// int is a varint that must fit an int64 and be at most max.
func (d *decoder) int(what string, max int64) int64 {
	v := d.uint()
	if v > uint64(max) {
		d.fail("%s %d over its limit %d", what, v, max)
		return 0
	}
	return int64(v)
}

// str appends a string to b.
func (d *decoder) str(b *strings.Builder) {
	n := d.int("string length", maxManifestString)
	if d.err != nil {
		return
	}
	if n > d.left {
		d.fail("string of %d bytes, %d left", n, d.left)
		return
	}
	// The buffer holds a whole string (maxManifestString): peek and copy,
	// no allocation of its own.
	p, err := d.r.Peek(int(n))
	if err != nil {
		d.fail("body cut short: %v", err)
		return
	}
	b.Write(p)
	d.r.Discard(int(n))
	d.left -= n
}

func (d *decoder) string() string {
	var b strings.Builder
	d.str(&b)
	return b.String()
}

// count is a table's length: at most what the bytes left could hold at
// minBytes each, so that a table sized by it costs no more than the body.
func (d *decoder) count(what string, minBytes int64) int {
	return int(d.int(what, d.left/minBytes))
}

func (d *decoder) manifest() (*Manifest, error) {
	m := &Manifest{Root: d.string(), Layout: d.string()}
	nc := d.count("classes", 1)
	if nc > 0 && m.Layout == LayoutWebDataset {
		d.fail("a webdataset manifest names no classes (they are its labels)")
	}
	if d.err == nil {
		m.Classes = make([]string, 0, nc)
		for range nc {
			if m.Classes = append(m.Classes, d.string()); d.err != nil {
				break
			}
		}
	}
	no := d.count("objects", 4) // key, size, version, mtime: a byte each at least
	o := &m.objs
	if d.err == nil && no > math.MaxInt32 {
		d.fail("%d objects", no)
	}
	if d.err == nil {
		o.keyEnd, o.sizes, o.verEnd, o.mtimes = make([]uint32, 0, no), make([]int64, 0, no), make([]uint32, 0, no), make([]int64, 0, no)
	}
	for i := 0; i < no && d.err == nil; i++ {
		d.str(&o.keys)
		o.keyEnd = append(o.keyEnd, uint32(o.keys.Len()))
		o.sizes = append(o.sizes, d.int("object size", math.MaxInt64))
		d.str(&o.vers)
		o.verEnd = append(o.verEnd, uint32(o.vers.Len()))
		o.mtimes = append(o.mtimes, int64(d.uint()))
	}
	ns := d.count("samples", 5)
	s := &m.samples
	if d.err == nil {
		s.obj, s.off, s.size, s.label, s.memEnd = make([]int32, 0, ns), make([]int64, 0, ns), make([]int64, 0, ns), make([]int32, 0, ns), make([]uint32, 0, ns)
	}
	for i := 0; i < ns && d.err == nil; i++ {
		ob := d.int("object", math.MaxInt32)
		if d.err == nil && ob >= int64(no) {
			d.fail("sample %d in object %d of %d", i, ob, no)
		}
		off := d.int("offset", math.MaxInt64)
		size := d.int("size", math.MaxInt64)
		label := d.int("label", maxClasses-1)
		if d.version >= 3 {
			label-- // -1: none
		}
		if label < 0 {
			s.unlabelled++
		}
		s.obj = append(s.obj, int32(ob))
		s.off = append(s.off, off)
		s.size = append(s.size, size)
		s.label = append(s.label, int32(label))
		s.maxLabel = max(s.maxLabel, label)
		d.str(&s.mems)
		s.memEnd = append(s.memEnd, uint32(s.mems.Len()))
	}
	if d.version >= 2 {
		d.hashes(s, ns)
	}
	if d.version >= 3 {
		d.fields(m)
	} else {
		m.noFields = true
		for range ns {
			m.fields.next()
		}
	}
	if d.version >= 4 {
		d.cls(s, ns)
	}
	// From version 7 a layout's own sections are there for it alone.
	annotated := m.annotated() || d.version < manifestVersionSizes
	if d.version >= 5 && annotated {
		m.AnnotationsSHA256 = d.string()
	}
	if d.version >= 6 && (m.Layout == LayoutYOLO || d.version < manifestVersionSizes) {
		d.labels(m)
	}
	if d.version >= manifestVersionSizes {
		d.sizes(m, ns)
	}
	if d.err != nil {
		return nil, d.err
	}
	return m, nil
}

// hashes reads the samples' hashes: none, or one for each of the ns
// samples.
func (d *decoder) hashes(s *sampleTable, ns int) {
	nh := d.count("hashes", sha256.Size)
	switch {
	case d.err != nil || nh == 0:
		return
	case nh != ns:
		d.fail("%d hashes for %d samples", nh, ns)
		return
	}
	s.hashes = make([]byte, nh*sha256.Size)
	if _, err := io.ReadFull(d.r, s.hashes); err != nil {
		d.fail("body cut short: %v", err)
		return
	}
	d.left -= int64(len(s.hashes))
}

// cls reads the samples' .cls members (version 4): none, or one (size 0:
// none) for each of the ns samples.
func (d *decoder) cls(s *sampleTable, ns int) {
	nc := d.count("cls members", 2)
	switch {
	case d.err != nil || nc == 0:
		return
	case nc != ns:
		d.fail("%d .cls members for %d samples", nc, ns)
		return
	}
	s.clsOff, s.clsSize = make([]int64, 0, ns), make([]int64, 0, ns)
	for i := 0; i < ns && d.err == nil; i++ {
		s.clsOff = append(s.clsOff, s.off[i]+unzigzag(d.uint()))
		s.clsSize = append(s.clsSize, d.int("cls size", maxClsBytes))
	}
}

func zigzag(v int64) uint64   { return uint64(v<<1) ^ uint64(v>>63) }
func unzigzag(u uint64) int64 { return int64(u>>1) ^ -int64(u&1) }
