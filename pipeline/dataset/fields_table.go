package dataset

import (
	"fmt"
	"math"
	"strconv"
)

// fieldTable holds the fields of a WebDataset's samples, column by column
// (a million samples' captions cost tens of bytes each, not a slice
// each): every member of a sample's key other than its image and its
// .cls, as an extension (interned), an offset in the sample's shard and a
// size. Sample i's entries are [end[i-1], end[i]). A dataset whose
// samples have no such member (an image and a label, as ImageNet's
// shards) keeps no column at all.
type fieldTable struct {
	exts  []string
	byExt map[string]int
	// n is the samples added so far; end is nil until one has an entry.
	n    int
	end  []uint32
	ext  []uint16
	off  []int64
	size []int64
}

// intern is ext's id, added when new; an error past maxFieldExts.
func (t *fieldTable) intern(ext string) (int, error) {
	if id, ok := t.byExt[ext]; ok {
		return id, nil
	}
	if len(t.exts) >= maxFieldExts {
		return 0, fmt.Errorf("%w: more than %d distinct member extensions (%s, ...): a dataset's fields are its members' extensions, and so many is not a dataset's layout",
			ErrUnsupported, maxFieldExts, clipField(t.exts[0]))
	}
	if t.byExt == nil {
		t.byExt = map[string]int{}
	}
	t.exts = append(t.exts, ext)
	t.byExt[ext] = len(t.exts) - 1
	return len(t.exts) - 1, nil
}

// add appends an entry to the sample being added (the n-th).
func (t *fieldTable) add(ext string, off, size int64) error {
	id, err := t.intern(ext)
	if err != nil {
		return err
	}
	if t.end == nil {
		t.end = make([]uint32, t.n, t.n+1024)
	}
	if len(t.ext) >= math.MaxUint32 {
		return fmt.Errorf("%w: more than %d fields in a dataset", ErrUnsupported, uint32(math.MaxUint32))
	}
	t.ext = append(t.ext, uint16(id))
	t.off = append(t.off, off)
	t.size = append(t.size, size)
	return nil
}

// next ends the sample being added.
func (t *fieldTable) next() {
	t.n++
	if t.end != nil {
		t.end = append(t.end, uint32(len(t.ext)))
	}
}

// find is sample i's entry of extension id: its offset and size.
func (t *fieldTable) find(i, id int) (off, size int64, ok bool) {
	if t.end == nil {
		return 0, 0, false
	}
	lo := uint32(0)
	if i > 0 {
		lo = t.end[i-1]
	}
	for e := lo; e < t.end[i]; e++ {
		if int(t.ext[e]) == id {
			return t.off[e], t.size[e], true
		}
	}
	return 0, 0, false
}

// entries is how many entries sample i has.
func (t *fieldTable) entries(i int) int {
	if t.end == nil {
		return 0
	}
	if i == 0 {
		return int(t.end[0])
	}
	return int(t.end[i] - t.end[i-1])
}

// entry is sample i's k-th entry.
func (t *fieldTable) entry(i, k int) (ext string, off, size int64) {
	e := int(t.end[i]) - t.entries(i) + k
	return t.exts[t.ext[e]], t.off[e], t.size[e]
}

// A WebDataset's fields, as its samples' own: the ids of the fields of a
// fieldTable are its extensions' (>= 0); these are the ones derived from
// the sample itself, beside the fields every dataset has.
const (
	// fieldIDCls is a labelled sample's "cls": its label as decimal text.
	fieldIDCls = -10
	// fieldIDImage is the sample's image member, under its own extension:
	// the id is fieldIDImage - the extension's id in the table.
	fieldIDImage = -1 << 20
)

// wdsFields answers the Fielded questions of WebDataset samples, local or
// in a store: their table, and how to name each sample's key, image and
// label.
type wdsFields struct {
	t        *fieldTable
	labelled bool
	// imageExts are the extensions images were seen under (each
	// interned in t, which answers it from the image's own range).
	imageExts map[string]bool
}

func (w *wdsFields) fieldID(name string) (int, bool) {
	switch {
	case name == FieldKey:
		return fieldIDKey, true
	case name == "cls" && w.labelled:
		return fieldIDCls, true
	}
	id, ok := w.t.byExt[name]
	if ok && w.imageExts[name] {
		return fieldIDImage - id, true
	}
	return id, ok
}

func (w *wdsFields) fieldNames() []string {
	own := append([]string{}, w.t.exts...)
	if w.labelled {
		own = append(own, "cls")
	}
	return sortFieldNames(own, FieldKey, FieldSource)
}

// size is the size of field id of sample i, whose image member is named
// member (no image: its key alone), of size imgSize, and label label.
func (w *wdsFields) size(i, id int, member string, imgSize, label int64) int64 {
	switch {
	case id == fieldIDKey:
		key, _, ok := keyOfMember(member)
		if !ok {
			return int64(len(member))
		}
		return int64(len(key))
	case id == fieldIDCls:
		return int64(len(strconv.FormatInt(label, 10)))
	case id <= fieldIDImage:
		id = fieldIDImage - id
		if _, ext, ok := keyOfMember(member); ok && ext == w.t.exts[id] {
			return imgSize
		}
	}
	if _, n, ok := w.t.find(i, id); ok {
		return n
	}
	return -1
}

// inline appends a field that is no member's bytes (a key, a label) to
// buf; ok is false for a member's.
func (w *wdsFields) inline(id int, member string, label int64, buf []byte) ([]byte, bool) {
	switch id {
	case fieldIDKey:
		if key, _, ok := keyOfMember(member); ok {
			return append(buf[:0], key...), true
		}
		return append(buf[:0], member...), true
	case fieldIDCls:
		return strconv.AppendInt(buf[:0], label, 10), true
	}
	return buf, false
}

// where is the byte range of field id of sample i in its shard, its
// image at imgOff; ok false when it has none.
func (w *wdsFields) where(i, id int, member string, imgOff, imgSize int64) (off, size int64, ok bool) {
	if id <= fieldIDImage {
		id = fieldIDImage - id
		if _, ext, ok := keyOfMember(member); ok && ext == w.t.exts[id] {
			return imgOff, imgSize, true
		}
	}
	return w.t.find(i, id)
}

// extOf is the extension of member field id.
func (w *wdsFields) extOf(id int) string {
	if id <= fieldIDImage {
		id = fieldIDImage - id
	}
	return w.t.exts[id]
}

// encodeFields writes the fields section (version 3).
func (m *Manifest) encodeFields(e *encoder) {
	t, s := &m.fields, &m.samples
	e.uint(uint64(len(t.exts)))
	for _, x := range t.exts {
		e.str(x)
	}
	for i := range s.obj {
		n := t.entries(i)
		flag := uint64(0)
		if s.noImage[int32(i)] {
			flag = 1
		}
		e.uint(uint64(n)<<1 | flag)
		if n == 0 {
			continue
		}
		first := int(t.end[i]) - n
		for k := first; k < int(t.end[i]); k++ {
			e.uint(uint64(t.ext[k]))
			e.uint(zigzag(t.off[k] - s.off[i]))
			e.uint(uint64(t.size[k]))
		}
	}
}

// fields reads the fields section into m (version 3).
func (d *decoder) fields(m *Manifest) {
	t, s := &m.fields, &m.samples
	nx := d.count("extensions", 1)
	if d.err == nil && nx > maxFieldExts {
		d.fail("%d extensions: the limit is %d", nx, maxFieldExts)
	}
	for i := 0; i < nx && d.err == nil; i++ {
		if _, err := t.intern(d.string()); err != nil && d.err == nil {
			d.fail("%v", err)
		}
	}
	if d.err == nil && len(t.exts) != nx {
		d.fail("an extension named twice")
	}
	for i := 0; i < len(s.obj) && d.err == nil; i++ {
		v := d.int("fields", d.left*2+1)
		if v>>1 > 0 && nx == 0 {
			d.fail("sample %d has fields of no extension", i)
		}
		if v&1 != 0 {
			if s.noImage == nil {
				s.noImage = map[int32]bool{}
			}
			s.noImage[int32(i)] = true
		}
		for k := int64(0); k < v>>1 && d.err == nil; k++ {
			ext := d.int("extension", int64(max(nx-1, 0)))
			off := s.off[i] + unzigzag(d.uint())
			size := d.int("field size", math.MaxInt64)
			if d.err == nil {
				if t.end == nil {
					t.end = make([]uint32, t.n, t.n+1024)
				}
				t.ext = append(t.ext, uint16(ext))
				t.off = append(t.off, off)
				t.size = append(t.size, size)
			}
		}
		t.next()
	}
}
