package batch

import "slices"

// Field is one sample's value of one field (pipeline's fields: a
// caption, metadata, a key): Data when Has; a sample without the field
// has Has false (and Data empty).
type Field struct {
	Data []byte
	Has  bool
}

// FieldSpec is the fields a batch asks for (dataset.FieldSet): their
// names, in order, and the bound of each field of a sample. A nil
// *dataset.FieldSet is one of no fields.
type FieldSpec interface {
	Names() []string
	Len() int
	MaxBytes() int64
}

// FieldCount is how many fields fs names (0 for nil).
func FieldCount(fs FieldSpec) int {
	if fs == nil {
		return 0
	}
	return fs.Len()
}

// SampleFields is sample i's fields, in FieldSet's order.
func (b *Batch) SampleFields(i int) []Field {
	n := FieldCount(b.FieldSet)
	return b.Fields[i*n : (i+1)*n]
}

// FieldBytes is what the batch's fields hold, in all.
func (b *Batch) FieldBytes() int64 {
	var n int64
	for i := range b.Fields {
		n += int64(len(b.Fields[i].Data))
	}
	return n
}

// SetFields sizes b.Fields for n samples of fs's fields, each none, their
// buffers kept: how a batch is readied to be filled (made, by a peer, or
// in parts).
func (b *Batch) SetFields(fs FieldSpec, n int) {
	b.FieldSet = fs
	k := n * FieldCount(fs)
	b.Fields = slices.Grow(b.Fields[:0], k)[:k]
	for i := range b.Fields {
		b.Fields[i].Data, b.Fields[i].Has = b.Fields[i].Data[:0], false
	}
}

// SwapFields swaps samples a's and c's fields, buffers and all: how a
// sample's fields move to another place (a dropped sample's neighbour
// moving up).
func (b *Batch) SwapFields(a, c int) {
	n := FieldCount(b.FieldSet)
	for f := range n {
		b.Fields[a*n+f], b.Fields[c*n+f] = b.Fields[c*n+f], b.Fields[a*n+f]
	}
}

// CopyFields copies sample src's fields into sample dst's buffers (a pad
// copy's).
func (b *Batch) CopyFields(dst, src int) {
	n := FieldCount(b.FieldSet)
	for f := range n {
		d, s := &b.Fields[dst*n+f], &b.Fields[src*n+f]
		d.Data, d.Has = append(d.Data[:0], s.Data...), s.Has
	}
}
