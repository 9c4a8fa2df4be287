package dataset

import (
	"errors"
	"fmt"
	"path"
	"slices"
	"strings"
)

// Fields are bytes that travel with a sample beside its pixels, as they
// are in the dataset: a WebDataset sample's other members by extension
// (KEY.txt is its "txt" field, KEY.json its "json"), an ImageFolder
// sample's relative path ("path"), and on every dataset the sample's key
// ("__key__") and the name its dataset is served under ("__source__").
// A job asks for fields by name (FieldSet); each sample's are read by the
// executor's worker that makes the sample, after its image, bounded per
// field (FieldSet.MaxBytes: a larger one fails the sample, named, before
// it is read), and a sample without a field has none (Field.Has false).
const (
	// FieldKey is a sample's key: a WebDataset member's path up to the
	// first dot of its file name (webdataset's __key__), an ImageFolder
	// file's relative path without its extension.
	FieldKey = "__key__"
	// FieldSource is the name of the dataset a sample comes from: the
	// name a server serves it under, or in a mix the component's.
	FieldSource = "__source__"
	// FieldPath is an ImageFolder sample's file, relative to its root.
	FieldPath = "path"
)

// Field bounds.
const (
	// MaxFields bounds the fields one job asks for.
	MaxFields = 16
	// MaxFieldName bounds a field's name.
	MaxFieldName = 64
	// maxFieldExts bounds the distinct member extensions a WebDataset
	// indexes as fields: each costs a name kept for the dataset's life.
	maxFieldExts = 1024
)

// The ids a Fielded dataset gives the fields every dataset has; a
// dataset's own fields are ids >= 0.
const (
	fieldIDKey    = -1
	fieldIDPath   = -2
	fieldIDSource = -3
	// fieldIDTargets is FieldTargets' id: made by the worker after the
	// image (it needs the sample's drawn geometry), never read from the
	// dataset.
	fieldIDTargets = -4
)

// Fielded is a Dataset whose samples have fields. FieldID resolves a name
// once; FieldSize and ReadField take the id, sample by sample.
// Implementations are safe for concurrent use.
type Fielded interface {
	// FieldID is the id of the field name, false when no sample of the
	// dataset can have it.
	FieldID(name string) (int, bool)
	// FieldNames lists the fields the dataset's samples have (its own,
	// then the ones every dataset has), for messages.
	FieldNames() []string
	// FieldSize is sample i's field id's size in bytes, -1 when the
	// sample has none; it reads nothing.
	FieldSize(i, id int) int64
	// ReadField appends sample i's field id to buf[:0], reusing buf.
	ReadField(i, id int, buf []byte) ([]byte, error)
}

// Sourced is a Dataset whose samples come from several named datasets (a
// mix): SourceOf is sample i's, its FieldSource.
type Sourced interface {
	SourceOf(i int) string
}

// FieldSet is the fields a job asks of a dataset's samples, resolved
// against it: a Batch with a FieldSet gets each sample's, in its order.
type FieldSet struct {
	names  []string
	ids    []int
	max    int64
	source string
	// targets is the index of FieldTargets among the names, -1 without:
	// made by the worker after the image (TargetsInto).
	targets int
	// masks: FieldTargets carries the instances' masks (SetMasks), and
	// is bounded by tmax rather than max.
	masks bool
	tmax  int64
	// overlap: FieldTargets carries ultralytics' overlap mask
	// (SetOverlapMask), bounded by tmax too; ratio and instances its
	// Format's mask_ratio (0: 4) and mask_overlap=False (SetMaskFormat).
	overlap   bool
	ratio     int
	instances bool
	// contiguous: a COCO dataset's FieldTargets labels are the
	// categories' ranks, not their ids (SetContiguousLabels).
	contiguous bool
}

// SetContiguousLabels has FieldTargets label a COCO dataset's instances by
// their category's rank among the file's categories sorted by id (0..K-1),
// rather than by the category_id the file gives (torchvision's wrapper's).
func (s *FieldSet) SetContiguousLabels() { s.contiguous = true }

// ContiguousLabels says whether FieldTargets labels a COCO dataset's
// instances by rank (false for a nil set).
func (s *FieldSet) ContiguousLabels() bool { return s != nil && s.contiguous }

// SetMasks has FieldTargets carry the instances' masks, the field then
// bounded by maxBytes (> 0) rather than the others' bound.
func (s *FieldSet) SetMasks(maxBytes int64) {
	s.masks, s.tmax = true, maxBytes
}

// SetOverlapMask has FieldTargets carry ultralytics' overlap mask, the
// field then bounded by maxBytes (> 0) rather than the others' bound.
func (s *FieldSet) SetOverlapMask(maxBytes int64) {
	s.overlap, s.tmax = true, maxBytes
}

// SetMaskFormat sets the overlap mask's Format options: mask_ratio (the
// downsample, at least 1) and mask_overlap (false: one mask an instance,
// polygons2masks', in place of the overlap mask).
func (s *FieldSet) SetMaskFormat(ratio int, overlap bool) {
	s.ratio, s.instances = ratio, !overlap
}

// MaskRatio is the overlap mask's mask_ratio (SetMaskFormat's; 4, Format's
// default, unset).
func (s *FieldSet) MaskRatio() int {
	if s == nil || s.ratio == 0 {
		return 4
	}
	return s.ratio
}

// MaskOverlap is the overlap mask's mask_overlap (SetMaskFormat's; true
// unset).
func (s *FieldSet) MaskOverlap() bool { return s == nil || !s.instances }

// Masks says whether FieldTargets carries masks (false for a nil set).
func (s *FieldSet) Masks() bool { return s != nil && s.masks }

// OverlapMask says whether FieldTargets carries the overlap mask (false
// for a nil set).
func (s *FieldSet) OverlapMask() bool { return s != nil && s.overlap }

// ownBound says whether FieldTargets has a bound of its own (tmax).
func (s *FieldSet) ownBound() bool { return s.Masks() || s.OverlapMask() }

// TargetsMax is FieldTargets' bound: SetMasks' (SetOverlapMask's), or the
// fields' one.
func (s *FieldSet) TargetsMax() int64 {
	if s.ownBound() {
		return s.tmax
	}
	return s.MaxBytes()
}

// SampleMax bounds what a sample's fields hold in all: each at its bound.
func (s *FieldSet) SampleMax() int64 {
	n := int64(s.Len()) * s.MaxBytes()
	if s.ownBound() && s.targets >= 0 {
		n += s.tmax - s.max
	}
	return n
}

// maxOf is field k's bound.
func (s *FieldSet) maxOf(k int) int64 {
	if k == s.targets {
		return s.TargetsMax()
	}
	return s.max
}

// NewFieldSet resolves names against ds, each field of a sample at most
// maxBytes (> 0); source is the name ds is served under (a sample's
// FieldSource, unless ds is Sourced). A name no sample of ds can have, a
// repeated one or one over MaxFieldName is refused (ErrUnsupported),
// saying which fields ds has.
func NewFieldSet(ds Dataset, names []string, maxBytes int64, source string) (*FieldSet, error) {
	if len(names) > MaxFields {
		return nil, fmt.Errorf("%w: %d fields: the limit is %d", ErrUnsupported, len(names), MaxFields)
	}
	if maxBytes <= 0 {
		return nil, fmt.Errorf("%w: a field's bound is %d bytes: want > 0", ErrUnsupported, maxBytes)
	}
	fd, _ := ds.(Fielded)
	s := &FieldSet{max: maxBytes, source: source, targets: -1}
	for _, n := range names {
		switch {
		case n == "":
			return nil, fmt.Errorf("%w: a field with an empty name", ErrUnsupported)
		case len(n) > MaxFieldName:
			return nil, fmt.Errorf("%w: a field name of %d bytes: the limit is %d", ErrUnsupported, len(n), MaxFieldName)
		case slices.Contains(s.names, n):
			return nil, fmt.Errorf("%w: field %q asked for twice", ErrUnsupported, n)
		}
		id, ok := fieldIDKey, true
		switch {
		case n == FieldSource:
			id = fieldIDSource
		case n == FieldTargets:
			id = fieldIDTargets
			if _, ok = ds.(Targeted); !ok {
				return nil, fmt.Errorf("%w: targets: the dataset has no annotations (serve it with --annotations)", ErrUnsupported)
			}
			s.targets = len(s.names)
		case fd != nil:
			id, ok = fd.FieldID(n)
		default:
			ok = false
		}
		if !ok {
			return nil, errNoField(ds, n)
		}
		s.names = append(s.names, n)
		s.ids = append(s.ids, id)
	}
	return s, nil
}

// errNoField refuses a field no sample of ds has, listing those it has.
func errNoField(ds Dataset, name string) error {
	var have []string
	if fd, ok := ds.(Fielded); ok {
		have = fd.FieldNames()
	}
	if !slices.Contains(have, FieldSource) {
		have = append(have, FieldSource)
	}
	if n, ok := ds.(interface{ FieldsNotIndexed() string }); ok && n.FieldsNotIndexed() != "" {
		return fmt.Errorf("%w: no field %q: %s", ErrUnsupported, clipField(name), n.FieldsNotIndexed())
	}
	shown := have[:min(len(have), 24)]
	more := ""
	if len(have) > len(shown) {
		more = fmt.Sprintf(" and %d more", len(have)-len(shown))
	}
	return fmt.Errorf("%w: no sample has a field %q; the dataset's fields are %s%s", ErrUnsupported, clipField(name), strings.Join(shown, ", "), more)
}

// clipField shortens a name from outside for a message.
func clipField(s string) string {
	if len(s) > MaxFieldName {
		return s[:MaxFieldName] + "…"
	}
	return s
}

// key names the fields for a dataset's hints ("" for none, or a nil set).
func (s *FieldSet) key() string {
	if s == nil {
		return ""
	}
	return strings.Join(s.names, "\x00")
}

// Names are the fields, in the order asked (none for a nil set).
func (s *FieldSet) Names() []string {
	if s == nil {
		return nil
	}
	return s.names
}

// Len is how many fields there are (0 for a nil set).
func (s *FieldSet) Len() int {
	if s == nil {
		return 0
	}
	return len(s.names)
}

// MaxBytes bounds each field of a sample (0 for a nil set).
func (s *FieldSet) MaxBytes() int64 {
	if s == nil {
		return 0
	}
	return s.max
}

// Check fails sample i of ds when a field of it is over the bound: before
// anything of it is read.
func (s *FieldSet) Check(ds Dataset, i int) error {
	fd, _ := ds.(Fielded)
	for k, id := range s.ids {
		if id < 0 || fd == nil {
			continue // a name: never near the bound a job may set
		}
		if n := fd.FieldSize(i, id); n > s.max {
			return s.errTooLarge(k, n)
		}
	}
	return nil
}

// TargetsTooLarge is what a FieldTargets' maker returns when the targets
// pass the bound it was given (TargetsMax) before it made them all: they
// take at least At bytes.
type TargetsTooLarge struct{ At int64 }

func (e *TargetsTooLarge) Error() string {
	return fmt.Sprintf("targets of at least %d bytes, over their bound", e.At)
}

// errTooLarge fails a sample whose field k is n bytes, over the bound.
func (s *FieldSet) errTooLarge(k int, n int64) error {
	if k == s.targets && s.ownBound() {
		return &fieldError{fmt.Sprintf("field %q takes at least %d bytes with its masks, over the job's bound of %d bytes (max_targets_bytes)", s.names[k], n, s.tmax)}
	}
	return &fieldError{fmt.Sprintf("field %q is %d bytes, over the job's bound of %d bytes a field (max_field_bytes)", s.names[k], n, s.max)}
}

// fieldError is a sample's field over its bound: ErrTooLarge (bad input,
// the sample's own fault), in words that blame the field, not an image.
type fieldError struct{ msg string }

func (e *fieldError) Error() string        { return e.msg }
func (e *fieldError) Is(target error) bool { return target == ErrTooLarge }

// Read reads sample i's fields into dst, one per field, reusing their
// buffers; FieldTargets is left to TargetsInto.
func (s *FieldSet) Read(ds Dataset, i int, dst []Field) error {
	fd, _ := ds.(Fielded)
	for k, id := range s.ids {
		f := &dst[k]
		f.Data, f.Has = f.Data[:0], true
		switch {
		case id == fieldIDSource:
			src := s.source
			if sd, ok := ds.(Sourced); ok {
				src = sd.SourceOf(i)
			}
			f.Data = append(f.Data, src...)
			continue
		case id == fieldIDTargets:
			continue // made after the image: TargetsInto
		case fd.FieldSize(i, id) < 0:
			f.Has = false
			continue
		}
		data, err := fd.ReadField(i, id, f.Data)
		if err != nil {
			return fmt.Errorf("field %q: %w", s.names[k], err)
		}
		if int64(len(data)) > s.max {
			return s.errTooLarge(k, int64(len(data)))
		}
		f.Data = data
	}
	return nil
}

// TargetsAt is the index of FieldTargets among the set's names, -1
// without it (or for a nil set).
func (s *FieldSet) TargetsAt() int {
	if s == nil {
		return -1
	}
	return s.targets
}

// HasTargets says whether the set asks for FieldTargets (false for a nil
// set): a RandomIoUCrop draws against the sample's boxes then.
func (s *FieldSet) HasTargets() bool { return s != nil && s.targets >= 0 }

// TargetsInto makes a sample's FieldTargets in dst (the sample's fields,
// one per field) with appendTargets, which appends the encoded targets to
// its argument (the field's buffer, emptied); a set without it does
// nothing. Bounded as any field.
func (s *FieldSet) TargetsInto(dst []Field, appendTargets func([]byte) ([]byte, error)) error {
	if s == nil || s.targets < 0 {
		return nil
	}
	f := &dst[s.targets]
	data, err := appendTargets(f.Data[:0])
	if tl := (*TargetsTooLarge)(nil); errors.As(err, &tl) {
		return s.errTooLarge(s.targets, tl.At)
	}
	if err != nil {
		return fmt.Errorf("field %q: %w", FieldTargets, err)
	}
	if int64(len(data)) > s.maxOf(s.targets) {
		return s.errTooLarge(s.targets, int64(len(data)))
	}
	f.Data, f.Has = data, true
	return nil
}

// SizeOf is what sample i's fields take, for the read-ahead and tests:
// the sum of the sizes of those it has.
func (s *FieldSet) SizeOf(ds Dataset, i int) int64 {
	fd, _ := ds.(Fielded)
	var n int64
	for _, id := range s.ids {
		if id >= 0 && fd != nil {
			n += max(fd.FieldSize(i, id), 0)
		}
	}
	return n
}

// keyOfPath is an ImageFolder file's key: its relative path without its
// extension (what os.path.splitext gives, as webdataset's writers take
// keys from file names).
func keyOfPath(p string) string {
	return strings.TrimSuffix(p, path.Ext(p))
}

// keyOfMember is a tar member's WebDataset key and extension: the path
// up to the first dot of its file name, and what follows that dot; ok is
// false for a name with no such dot (no extension, or a dot first).
func keyOfMember(name string) (key, ext string, ok bool) {
	dir, base := path.Split(name)
	dot := strings.IndexByte(base, '.')
	if dot <= 0 {
		return "", "", false
	}
	return dir + base[:dot], base[dot+1:], true
}

// sortFieldNames orders a dataset's field names for messages: its own,
// sorted, then the ones every dataset has.
func sortFieldNames(own []string, always ...string) []string {
	out := slices.Sorted(slices.Values(own))
	return append(out, always...)
}

// Expect checks got, the fields a maker says sample i of ds has (one per
// field, in the set's order): each present exactly when the sample has
// it, of the size the dataset's index gives, and those that are names
// (a key, a path, a source, a label) byte for byte. It reads nothing: a
// member's bytes are compared only where the sample is made again.
func (s *FieldSet) Expect(ds Dataset, i int, got []Field) error {
	fd, _ := ds.(Fielded)
	var want []byte
	for k, id := range s.ids {
		g := &got[k]
		var size int64
		switch {
		case id == fieldIDSource:
			src := s.source
			if sd, ok := ds.(Sourced); ok {
				src = sd.SourceOf(i)
			}
			want = append(want[:0], src...)
			size = int64(len(want))
		case id == fieldIDTargets:
			// Made with the image: its size is known only once made.
			if !g.Has || int64(len(g.Data)) < TargetsHeader {
				return fmt.Errorf("sample %d's field %q comes missing or short", i, s.names[k])
			}
			continue
		case fd == nil:
			size = -1
		default:
			size = fd.FieldSize(i, id)
			want = want[:0]
			if id < 0 && id > fieldIDImage && size >= 0 {
				var err error
				if want, err = fd.ReadField(i, id, want); err != nil {
					return err
				}
			}
		}
		switch {
		case size > s.max:
			return fmt.Errorf("sample %d's field %q is %d bytes, over the bound of %d: the sample fails", i, s.names[k], size, s.max)
		case size < 0 && g.Has:
			return fmt.Errorf("sample %d has no field %q, and comes with one", i, s.names[k])
		case size >= 0 && !g.Has:
			return fmt.Errorf("sample %d's field %q comes missing", i, s.names[k])
		case size >= 0 && int64(len(g.Data)) != size:
			return fmt.Errorf("sample %d's field %q is %d bytes, not %d", i, s.names[k], len(g.Data), size)
		case len(want) > 0 && string(want) != string(g.Data):
			return fmt.Errorf("sample %d's field %q is %.64q, not %.64q", i, s.names[k], g.Data, want)
		}
	}
	return nil
}
