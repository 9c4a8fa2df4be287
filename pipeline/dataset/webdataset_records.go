package dataset

// A WebDataset's records of several images: a sample (a key) with
// numbered images, KEY.0.jpg, KEY.1.jpg, ... (what webdataset's writers
// make of a vision-language sample's images), is a record of them, each
// image a sample in its order, each with the record's label and fields
// (KEY.json, KEY.txt, ...), as a conversation file's records are
// (ConvDataset). The local shards, the shards in a store and a manifest
// of either are grouped by one rule (groupRecords), from the images'
// member names alone.

import (
	"fmt"
	"strings"
)

// wdsRecords are a WebDataset's records, where one has several images:
// first is each record's first sample (and, last, Len()), rec each
// sample's record.
type wdsRecords struct {
	first []int32
	rec   []int32
	most  int
}

// groupRecords groups n samples into records by their image members'
// names (member(i); shard(i) their shard): a numbered image 0 starts a
// record, image k > 0 continues the record of the sample before it,
// which must be image k-1 of the same key in the same shard; any other
// sample is a record of its own. nil when no record has several images
// (the dataset is then not Grouped: a plan of samples). An image out of
// its place is an error saying which (outside input: a manifest).
func groupRecords(n int, shard func(i int) int32, member func(i int) string) (*wdsRecords, error) {
	r := &wdsRecords{first: make([]int32, 0, n+1), rec: make([]int32, n)}
	prevKey, prevN := "", -1
	for i := range n {
		key, ext, ok := keyOfMember(member(i))
		k := -1
		if ok {
			if num, numbered := numberedImage(strings.ToLower(ext)); numbered {
				k = num
			}
		}
		switch {
		case k > 0:
			if i == 0 || prevN != k-1 || key != prevKey || shard(i) != shard(i-1) {
				return nil, fmt.Errorf("sample %d, %s, is image %d of a record whose image %d is not the sample before it", i, member(i), k, k-1)
			}
		default:
			r.first = append(r.first, int32(i))
		}
		r.rec[i] = int32(len(r.first) - 1)
		prevKey, prevN = key, k
		if k+1 > MaxRecordImages {
			return nil, fmt.Errorf("sample %d, %s, is image %d of a record: the limit is %d images a record", i, member(i), k, MaxRecordImages)
		}
		r.most = max(r.most, k+1)
	}
	r.first = append(r.first, int32(n))
	if r.most < 2 {
		return nil, nil
	}
	return r, nil
}

// manifestVersionRecords is the version of a manifest of a WebDataset
// with records of several images (manifest_file.go).
const manifestVersionRecords = 8

// hasRecords says whether m is of a WebDataset some of whose records
// have several images.
func (m *Manifest) hasRecords() bool {
	if m.Layout != LayoutWebDataset {
		return false
	}
	if m.recs != nil {
		return true
	}
	s := &m.samples
	recs, _ := groupRecords(len(s.obj), func(i int) int32 { return s.obj[i] }, func(i int) string { return cut(&s.mems, s.memEnd, i) })
	return recs != nil
}

// isNumberedImage says whether a member's extension is a record's
// image's ("0.jpg", "1.PNG", ...).
func isNumberedImage(ext string) bool {
	_, ok := numberedImage(strings.ToLower(ext))
	return ok
}

// The Grouped answers of a dataset's records, r nil: every sample a
// record of its own.
func (r *wdsRecords) records(n int) int {
	if r == nil {
		return n
	}
	return len(r.first) - 1
}

func (r *wdsRecords) record(rec int) (first, n int) {
	if r == nil {
		return rec, 1
	}
	return int(r.first[rec]), int(r.first[rec+1] - r.first[rec])
}

func (r *wdsRecords) recordOf(i int) int {
	if r == nil {
		return i
	}
	return int(r.rec[i])
}

func (r *wdsRecords) mostImages() int {
	if r == nil {
		return 1
	}
	return r.most
}

var (
	_ Grouped = (*WebDataset)(nil)
	_ Grouped = (*StoreDataset)(nil)
)

// Records implements Grouped: Len() where no sample has several
// numbered images (a plan of samples, as ever).
func (d *WebDataset) Records() int { return d.recs.records(len(d.samples)) }

// Record implements Grouped.
func (d *WebDataset) Record(r int) (first, n int) { return d.recs.record(r) }

// RecordOf implements Grouped.
func (d *WebDataset) RecordOf(i int) int { return d.recs.recordOf(i) }

// MostImages implements Grouped.
func (d *WebDataset) MostImages() int { return d.recs.mostImages() }

// Records implements Grouped: a WebDataset's records (from its manifest),
// Len() for any other layout, or where no sample has several images.
func (d *StoreDataset) Records() int { return d.m.recs.records(d.m.Len()) }

// Record implements Grouped.
func (d *StoreDataset) Record(r int) (first, n int) { return d.m.recs.record(r) }

// RecordOf implements Grouped.
func (d *StoreDataset) RecordOf(i int) int { return d.m.recs.recordOf(i) }

// MostImages implements Grouped.
func (d *StoreDataset) MostImages() int { return d.m.recs.mostImages() }
