package dataset

import (
	"crypto/sha256"
	"encoding/binary"
	"encoding/hex"
	"fmt"
	"math"
	"slices"
	"sort"
)

var _ Grouped = (*Mixed)(nil)

// MaxMixParts is the most datasets one mix may name.
const MaxMixParts = 64

// MixPart is one dataset of a mix: its name (the one it is served under,
// each sample's FieldSource), the dataset, and its weight (> 0).
type MixPart struct {
	Name   string
	DS     Dataset
	Weight float64
}

// Mixed is several datasets seen as one: their samples back to back, part
// after part (part p's sample i is index Starts()[p]+i), each sample
// read, labelled, named and fielded by its own dataset. Which of them an
// epoch takes, and how often, is the epoch plan's business (the weights):
// Mixed only places them. Labels are each dataset's own: mixing datasets
// of different label spaces is the caller's business. It owns none of its
// datasets: Close closes nothing.
type Mixed struct {
	parts  []MixPart
	starts []int // part p's samples are [starts[p], starts[p+1])
	// rstarts: part p's records (Grouped: a part's own, or each of its
	// samples one) are [rstarts[p], rstarts[p+1]).
	rstarts []int
	fp      string
	// Fields: the names any part's samples have, and per name each
	// part's id of it (ok false where the part has none).
	fields []string
	ids    [][]mixFieldID
}

type mixFieldID struct {
	id int
	ok bool
}

// NewMixed mixes parts (1..MaxMixParts of them, each name once, each
// weight finite and > 0, each dataset not empty). Its fingerprint covers
// every part's name, fingerprint and weight, so that a peer with another
// mix refuses its jobs.
func NewMixed(parts []MixPart) (*Mixed, error) {
	if len(parts) == 0 || len(parts) > MaxMixParts {
		return nil, fmt.Errorf("%w: a mix of %d datasets: want 1..%d", ErrUnsupported, len(parts), MaxMixParts)
	}
	m := &Mixed{parts: slices.Clone(parts), starts: make([]int, 1, len(parts)+1), rstarts: make([]int, 1, len(parts)+1)}
	h := sha256.New()
	h.Write([]byte("stoker mix 1\x00"))
	for p, part := range parts {
		switch {
		case !(part.Weight > 0) || math.IsInf(part.Weight, 0):
			return nil, fmt.Errorf("%w: dataset %q has weight %v in the mix: want a finite weight > 0", ErrUnsupported, part.Name, part.Weight)
		case part.DS == nil || part.DS.Len() == 0:
			return nil, fmt.Errorf("%w: dataset %q of the mix is empty", ErrUnsupported, part.Name)
		}
		for _, q := range parts[:p] {
			if q.Name == part.Name {
				return nil, fmt.Errorf("%w: dataset %q named twice in the mix: give it one weight", ErrUnsupported, part.Name)
			}
		}
		n := m.starts[p] + part.DS.Len()
		if n < m.starts[p] {
			return nil, fmt.Errorf("%w: the mix's datasets hold too many samples", ErrUnsupported)
		}
		m.starts = append(m.starts, n)
		m.rstarts = append(m.rstarts, m.rstarts[p]+RecordsOf(part.DS))
		var w [8]byte
		binary.LittleEndian.PutUint64(w[:], math.Float64bits(part.Weight))
		fmt.Fprintf(h, "%d:%s\x00%s\x00", len(part.Name), part.Name, part.DS.Fingerprint())
		h.Write(w[:])
	}
	m.fp = "mix-" + hex.EncodeToString(h.Sum(nil)[:16])
	m.indexFields()
	return m, nil
}

// indexFields resolves every field name any part has, once.
func (m *Mixed) indexFields() {
	seen := map[string]int{}
	for p, part := range m.parts {
		fd, ok := part.DS.(Fielded)
		if !ok {
			continue
		}
		for _, name := range fd.FieldNames() {
			if name == FieldSource {
				continue // the mix's own: SourceOf
			}
			k, known := seen[name]
			if !known {
				k = len(m.fields)
				seen[name] = k
				m.fields = append(m.fields, name)
				m.ids = append(m.ids, make([]mixFieldID, len(m.parts)))
			}
			if id, ok := fd.FieldID(name); ok {
				m.ids[k][p] = mixFieldID{id, true}
			}
		}
	}
}

// Parts are the mix's datasets, in order.
func (m *Mixed) Parts() []MixPart { return m.parts }

// Starts is the first index of each part, then Len(); the caller must not
// modify it.
func (m *Mixed) Starts() []int { return m.starts }

// RecordsOf is ds's records: a Grouped dataset's, else its samples (each
// a record of one image).
func RecordsOf(ds Dataset) int {
	if g, ok := ds.(Grouped); ok {
		return g.Records()
	}
	return ds.Len()
}

// RecordStarts is the first record of each part, then Records() (Grouped:
// a part's records, or each of its samples one); the caller must not
// modify it.
func (m *Mixed) RecordStarts() []int { return m.rstarts }

// Records is the mix's records: its parts', part after part (Grouped).
func (m *Mixed) Records() int { return m.rstarts[len(m.parts)] }

// Record is record r's first sample and its images (Grouped).
func (m *Mixed) Record(r int) (first, n int) {
	p := sort.SearchInts(m.rstarts[1:], r+1)
	if g, ok := m.parts[p].DS.(Grouped); ok {
		first, n = g.Record(r - m.rstarts[p])
		return m.starts[p] + first, n
	}
	return m.starts[p] + r - m.rstarts[p], 1
}

// RecordOf is sample i's record (Grouped).
func (m *Mixed) RecordOf(i int) int {
	p, j := m.locate(i)
	if g, ok := m.parts[p].DS.(Grouped); ok {
		return m.rstarts[p] + g.RecordOf(j)
	}
	return m.rstarts[p] + j
}

// MostImages is the most images a record of any part has (Grouped).
func (m *Mixed) MostImages() int {
	most := 1
	for _, part := range m.parts {
		if g, ok := part.DS.(Grouped); ok {
			most = max(most, g.MostImages())
		}
	}
	return most
}

// RecordShardStarts is a Sharded dataset's shard starts as records (a
// Grouped dataset's, each shard's first sample's record; else its own):
// an error where a shard starts inside a record.
func RecordShardStarts(ds Dataset) ([]int, error) {
	sh, ok := ds.(Sharded)
	if !ok {
		return nil, fmt.Errorf("%w: not sharded", ErrUnsupported)
	}
	starts := sh.ShardStarts()
	g, ok := ds.(Grouped)
	if !ok {
		return starts, nil
	}
	out := make([]int, len(starts))
	for k, s := range starts {
		if s >= ds.Len() {
			out[k] = g.Records()
			continue
		}
		r := g.RecordOf(s)
		if first, _ := g.Record(r); first != s {
			return nil, fmt.Errorf("%w: shard %d starts at sample %d, inside record %d (samples %d on)", ErrUnsupported, k, s, r, first)
		}
		out[k] = r
	}
	return out, nil
}

// locate is the part of index i and i's index in it.
func (m *Mixed) locate(i int) (int, int) {
	p := sort.SearchInts(m.starts[1:], i+1)
	return p, i - m.starts[p]
}

func (m *Mixed) Len() int { return m.starts[len(m.parts)] }

func (m *Mixed) Label(i int) int64 {
	p, j := m.locate(i)
	return m.parts[p].DS.Label(j)
}

// Classes are the parts' classes when every part has the same ones (a
// mix of one label space); otherwise none: each sample's label is its own
// dataset's.
func (m *Mixed) Classes() []string {
	c := m.parts[0].DS.Classes()
	for _, part := range m.parts[1:] {
		if !slices.Equal(part.DS.Classes(), c) {
			return nil
		}
	}
	return c
}

func (m *Mixed) Read(i int, buf []byte) ([]byte, error) {
	p, j := m.locate(i)
	return m.parts[p].DS.Read(j, buf)
}

// Name is the sample's dataset's name, a colon and the sample's name in
// it.
func (m *Mixed) Name(i int) string {
	p, j := m.locate(i)
	return m.parts[p].Name + ":" + m.parts[p].DS.Name(j)
}

func (m *Mixed) Fingerprint() string { return m.fp }

// Close closes nothing: the parts are their owner's.
func (m *Mixed) Close() error { return nil }

// SourceOf is the name of sample i's dataset (Sourced).
func (m *Mixed) SourceOf(i int) string {
	p, _ := m.locate(i)
	return m.parts[p].Name
}

// FieldID is name's id in the mix: any part's samples may have it.
func (m *Mixed) FieldID(name string) (int, bool) {
	k := slices.Index(m.fields, name)
	return k, k >= 0
}

// FieldNames are the fields of any part's samples.
func (m *Mixed) FieldNames() []string {
	return sortFieldNames(m.fields, FieldSource)
}

func (m *Mixed) FieldSize(i, id int) int64 {
	p, j := m.locate(i)
	f := m.ids[id][p]
	if !f.ok {
		return -1
	}
	return m.parts[p].DS.(Fielded).FieldSize(j, f.id)
}

func (m *Mixed) ReadField(i, id int, buf []byte) ([]byte, error) {
	p, j := m.locate(i)
	f := m.ids[id][p]
	if !f.ok {
		return nil, fmt.Errorf("%w: sample %s has no field %q", ErrUnsupported, m.Name(i), m.fields[id])
	}
	return m.parts[p].DS.(Fielded).ReadField(j, f.id, buf)
}

// Prefetch tells each part that prefetches of its samples among indices,
// in their order (Prefetcher).
func (m *Mixed) Prefetch(indices []int64) {
	m.split(indices, func(ds Dataset, local []int64) {
		if pf, ok := ds.(Prefetcher); ok {
			pf.Prefetch(local)
		}
	})
}

// PrefetchShards tells each part that reads shards ahead which of its
// samples' shards a block-shuffled job reads next (ShardPrefetcher).
func (m *Mixed) PrefetchShards(indices []int64) {
	m.split(indices, func(ds Dataset, local []int64) {
		if sp, ok := ds.(ShardPrefetcher); ok {
			sp.PrefetchShards(local)
		}
	})
}

// split calls f with each part that has samples among indices and their
// indices in it, in indices' order (f keeps no reference to the slice).
func (m *Mixed) split(indices []int64, f func(ds Dataset, local []int64)) {
	var local []int64
	for p, part := range m.parts {
		local = local[:0]
		lo, hi := int64(m.starts[p]), int64(m.starts[p+1])
		for _, i := range indices {
			if i >= lo && i < hi {
				local = append(local, i-lo)
			}
		}
		if len(local) > 0 {
			f(part.DS, local)
		}
	}
}

// MixQuotas splits an epoch of n positions over parts in proportion to
// their weights: each part's share rounded down, then the positions left
// one each to the parts with the largest remainders (the first on a
// tie), so that they add up to n and each is within one of its exact
// share.
func MixQuotas(parts []MixPart, n uint64) []uint64 {
	var sum float64
	for _, p := range parts {
		sum += p.Weight
	}
	q := make([]uint64, len(parts))
	rem := make([]float64, len(parts))
	var given uint64
	for i, p := range parts {
		exact := float64(float64(n) * (p.Weight / sum))
		q[i] = min(uint64(exact), n-given)
		rem[i] = exact - float64(q[i])
		given += q[i]
	}
	order := make([]int, len(parts))
	for i := range order {
		order[i] = i
	}
	sort.SliceStable(order, func(a, b int) bool { return rem[order[a]] > rem[order[b]] })
	for k := 0; given < n; k = (k + 1) % len(order) {
		q[order[k]]++
		given++
	}
	return q
}

// FileSize implements FileSizer where the sample's dataset does.
func (m *Mixed) FileSize(i int) (int64, bool) {
	p, j := m.locate(i)
	if fz, ok := m.parts[p].DS.(FileSizer); ok {
		return fz.FileSize(j)
	}
	return 0, false
}
