package server

import (
	"encoding/binary"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/stoker-dev/stoker/internal/opspec"
	pb "github.com/stoker-dev/stoker/proto/stoker/v1"
)

// TestSizesAnyTopology: a job of per-sample sizes (RandomShortestSize with
// a max_size, a flip) says so in JobInfo, its bound the sample_shape; each
// batch comes padded to its largest sample, its shape, data_bytes and
// sample_sizes saying so, each sample's padding zeros and, with targets,
// its targets' canvas its size; the same bytes made alone or leased to 3
// verified peers (the sizes travel in the samples' slots), with targets and
// without.
func TestSizesAnyTopology(t *testing.T) {
	ann, counts := photosCOCO(t)
	cfg := func() Config {
		return Config{Datasets: map[string]string{"det": "../testdata/photos"}, Annotations: map[string]string{"det": ann}, Workers: 1}
	}
	shortest := opspec.Wire("RandomShortestSize", "min_size", []int{20, 28, 36}, "max_size", 40)
	for _, targets := range []bool{true, false} {
		job := smallJob("det", 5)
		job.Job.Targets = targets
		job.Job.Transform.Ops = []*pb.Op{shortest, flipOp(nil)}
		var alone epoch
		for _, n := range []int{0, 3} {
			e := topology(t, cfg, n)
			ep := e.collect(t, job)
			if !ep.info.GetSizesVary() || !slices.Equal(ep.info.GetSampleShape(), []uint32{3, 40, 40}) {
				t.Fatalf("targets %v, %d peers: JobInfo sizes_vary %v, sample_shape %v; want true, the bound [3 40 40]",
					targets, n, ep.info.GetSizesVary(), ep.info.GetSampleShape())
			}
			seen, shapes := 0, map[[2]uint32]bool{}
			for _, b := range ep.batches {
				h := b.hdr
				sz, nb := h.GetSampleSizes(), int(h.GetShape()[0])
				if len(sz) != 2*nb {
					t.Fatalf("targets %v, %d peers: batch %d: %d sizes for %d samples", targets, n, h.GetNumber(), len(sz), nb)
				}
				var bh, bw uint32
				for i := range nb {
					bh, bw = max(bh, sz[2*i]), max(bw, sz[2*i+1])
					// The shorter side a min_size (or one less: int() of
					// side * (min_size / side) in float64, as torchvision's),
					// or the longer max_size (or one less).
					if s, m := sz[2*i:2*i+2], min(sz[2*i], sz[2*i+1]); s[0] < 1 || s[1] < 1 || max(s[0], s[1]) > 40 ||
						(m != 20 && m != 19 && m != 28 && m != 27 && m != 36 && m != 35 && max(s[0], s[1]) < 39) {
						t.Errorf("targets %v, %d peers: batch %d sample %d: size %v", targets, n, h.GetNumber(), i, s)
					}
				}
				shapes[[2]uint32{bh, bw}] = true
				if !slices.Equal(h.GetShape(), []uint32{uint32(nb), 3, bh, bw}) || len(b.data) != nb*3*int(bh*bw) {
					t.Fatalf("targets %v, %d peers: batch %d: shape %v, %d bytes; want padded to %dx%d", targets, n, h.GetNumber(), h.GetShape(), len(b.data), bh, bw)
				}
				for i := range nb {
					sh, sw := int(sz[2*i]), int(sz[2*i+1])
					for c := range 3 {
						for y := range int(bh) {
							for x := range int(bw) {
								if v := b.data[((i*3+c)*int(bh)+y)*int(bw)+x]; (y >= sh || x >= sw) && v != 0 {
									t.Fatalf("targets %v, %d peers: batch %d sample %d (%dx%d): padding (%d, %d) is %d", targets, n, h.GetNumber(), i, sw, sh, x, y, v)
								}
							}
						}
					}
					if targets {
						v := h.GetFields()[0].GetValues()[i]
						if le := binary.LittleEndian; le.Uint32(v) != uint32(sh) || le.Uint32(v[4:]) != uint32(sw) {
							t.Errorf("%d peers: batch %d sample %d: targets' canvas %dx%d, size %dx%d", n, h.GetNumber(), i, le.Uint32(v[4:]), le.Uint32(v), sw, sh)
						}
					}
					seen++
				}
			}
			if seen != len(counts) || len(shapes) < 2 {
				t.Errorf("targets %v, %d peers: %d samples in batches of %d sizes; want %d samples, several sizes", targets, n, seen, len(shapes), len(counts))
			}
			if n == 0 {
				alone = ep
				continue
			}
			sameAsAlone(t, e, n, ep, alone)
			for i, b := range ep.batches {
				if !slices.Equal(b.hdr.GetSampleSizes(), alone.batches[i].hdr.GetSampleSizes()) {
					t.Errorf("targets %v, %d peers: batch %d: sizes %v, the lone server's %v", targets, n, i, b.hdr.GetSampleSizes(), alone.batches[i].hdr.GetSampleSizes())
				}
			}
		}
	}
}

// TestRaggedAnyTopology: the same job asking for ragged batches
// (JobSpec.ragged) says so in JobInfo, and each batch carries each sample's
// own bytes back to back (BatchHeader.ragged, data_bytes their sum): each
// the padded batch's window of it, sizes the same; alone and leased to 3
// peers with every slot verified (a ragged slot's bytes past its sample
// are not compared), no peer quarantined.
func TestRaggedAnyTopology(t *testing.T) {
	ann, _ := photosCOCO(t)
	cfg := func() Config {
		return Config{Datasets: map[string]string{"det": "../testdata/photos"}, Annotations: map[string]string{"det": ann}, Workers: 1}
	}
	shortest := opspec.Wire("RandomShortestSize", "min_size", []int{20, 28, 36}, "max_size", 40)
	job := smallJob("det", 5)
	job.Job.Targets = true
	job.Job.Transform.Ops = []*pb.Op{shortest, flipOp(nil)}
	padded := topology(t, cfg, 0).collect(t, job)
	job.Job.Ragged = true
	var alone epoch
	for _, n := range []int{0, 3} {
		e := topology(t, cfg, n)
		ep := e.collect(t, job)
		if !ep.info.GetRagged() || !ep.info.GetSizesVary() {
			t.Fatalf("%d peers: JobInfo ragged %v sizes_vary %v; want both", n, ep.info.GetRagged(), ep.info.GetSizesVary())
		}
		if len(ep.batches) != len(padded.batches) {
			t.Fatalf("%d peers: %d batches, padded %d", n, len(ep.batches), len(padded.batches))
		}
		for k, b := range ep.batches {
			h, p := b.hdr, padded.batches[k]
			sz := h.GetSampleSizes()
			if !h.GetRagged() || !slices.Equal(sz, p.hdr.GetSampleSizes()) || !slices.Equal(h.GetShape(), p.hdr.GetShape()) {
				t.Fatalf("%d peers: batch %d: ragged %v sizes %v shape %v; padded sizes %v shape %v", n, k, h.GetRagged(), sz, h.GetShape(), p.hdr.GetSampleSizes(), p.hdr.GetShape())
			}
			bh, bw, off := int(p.hdr.GetShape()[2]), int(p.hdr.GetShape()[3]), 0
			for i := range len(sz) / 2 {
				sh, sw := int(sz[2*i]), int(sz[2*i+1])
				for c := range 3 {
					for y := range sh {
						got := b.data[off+(c*sh+y)*sw:][:sw]
						want := p.data[((i*3+c)*bh+y)*bw:][:sw]
						if !slices.Equal(got, want) {
							t.Fatalf("%d peers: batch %d sample %d (%dx%d) plane %d row %d: not the padded batch's", n, k, i, sh, sw, c, y)
						}
					}
				}
				off += 3 * sh * sw
			}
			if off != len(b.data) || uint64(off) != h.GetDataBytes() {
				t.Fatalf("%d peers: batch %d: %d bytes (data_bytes %d), the samples' %d", n, k, len(b.data), h.GetDataBytes(), off)
			}
		}
		if n == 0 {
			alone = ep
			continue
		}
		sameAsAlone(t, e, n, ep, alone)
	}
}

// TestRaggedViewsAnyTopology: InternVL's two views (the canvas of tiles,
// each sample its own size, and the thumbnail of one size) travel ragged
// whether or not the job asks (JobInfo.ragged): each batch view after
// view, every sample's own bytes back to back, sample_sizes every view's
// and each view's dims its largest sample's; the same bytes alone and
// leased to 3 peers with every slot verified, no peer quarantined.
func TestRaggedViewsAnyTopology(t *testing.T) {
	cfg := func() Config {
		return Config{Datasets: map[string]string{"photos": "../testdata/photos"}, Workers: 1}
	}
	tiles := namedOp("TileResize", numArg("tile_size", 28), numArg("min_tiles", 1), numArg("max_tiles", 6))
	thumb := opspec.Wire("Resize", "size", []int{28, 28}, "interpolation", "bicubic")
	job := smallJob("photos", 5)
	job.Job.Transform = &pb.TransformSpec{Views: []*pb.ViewGroup{
		{Name: "tiles", Count: 1, Transform: &pb.TransformSpec{Ops: []*pb.Op{tiles}}},
		{Name: "thumbnail", Count: 1, Transform: &pb.TransformSpec{Ops: []*pb.Op{thumb}}},
	}}
	var alone epoch
	for _, n := range []int{0, 3} {
		e := topology(t, cfg, n)
		ep := e.collect(t, job)
		if !ep.info.GetRagged() || !ep.info.GetSizesVary() || len(ep.info.GetViews()) != 2 {
			t.Fatalf("%d peers: JobInfo ragged %v sizes_vary %v views %d; want ragged, varying, 2", n, ep.info.GetRagged(), ep.info.GetSizesVary(), len(ep.info.GetViews()))
		}
		grids := map[[2]uint32]bool{}
		for k, b := range ep.batches {
			h := b.hdr
			bn := int(h.GetShape()[0])
			sz, views := h.GetSampleSizes(), h.GetViews()
			if !h.GetRagged() || len(views) != 2 || len(sz) != 2*2*bn {
				t.Fatalf("%d peers: batch %d: ragged %v, %d views, %d sample sizes for %d samples", n, k, h.GetRagged(), len(views), len(sz), bn)
			}
			if src := h.GetSourceSizes(); len(src) != 2*bn || slices.Contains(src, 0) {
				t.Fatalf("%d peers: batch %d: source sizes %v for %d samples: want each image's height and width", n, k, src, bn)
			}
			off := 0
			for v := range 2 {
				var bh, bw uint32
				for i := range bn {
					sh, sw := sz[2*(v*bn+i)], sz[2*(v*bn+i)+1]
					if sh%28 != 0 || sw%28 != 0 || sh*sw > 6*28*28 || (v == 1 && (sh != 28 || sw != 28)) {
						t.Fatalf("%d peers: batch %d view %d sample %d: %dx%d, not whole tiles of 28 (at most 6)", n, k, v, i, sh, sw)
					}
					if v == 0 {
						grids[[2]uint32{sh, sw}] = true
					}
					bh, bw = max(bh, sh), max(bw, sw)
					off += 3 * int(sh) * int(sw)
				}
				if d := views[v].GetDims(); d[0] != uint32(bn) || d[1] != 3 || d[2] != bh || d[3] != bw {
					t.Fatalf("%d peers: batch %d view %d: dims %v; want [%d 3 %d %d]", n, k, v, d, bn, bh, bw)
				}
			}
			if off != len(b.data) || uint64(off) != h.GetDataBytes() {
				t.Fatalf("%d peers: batch %d: %d bytes (data_bytes %d), the samples' %d", n, k, len(b.data), h.GetDataBytes(), off)
			}
		}
		if len(grids) < 2 {
			t.Fatalf("%d peers: the photos made canvases of %v alone: want several grids", n, grids)
		}
		if n == 0 {
			alone = ep
			continue
		}
		sameAsAlone(t, e, n, ep, alone)
	}
}

// TestRecordsAnyTopology: a conversation file's records of several images
// (one of whose images is corrupt) served alone and leased to 3 verified
// peers: every record once an epoch, its images consecutive and in its
// order (BatchHeader.records), at most batch_size records a batch; the
// record with the corrupt image marked -1 and its image named in the
// batch's errors; the same bytes, records and fields either way, no peer
// quarantined.
func TestRecordsAnyTopology(t *testing.T) {
	dir := t.TempDir()
	photos, err := filepath.Glob("../testdata/photos/*/*.jpg")
	if err != nil || len(photos) < 6 {
		t.Fatalf("the committed photos are missing: %v", err)
	}
	for i, p := range photos[:6] {
		b, err := os.ReadFile(p)
		if err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(filepath.Join(dir, fmt.Sprintf("%d.jpg", i)), b, 0o644); err != nil {
			t.Fatal(err)
		}
	}
	if err := os.WriteFile(filepath.Join(dir, "bad.jpg"), []byte("\xff\xd8\xff\xe0 not a JPEG"), 0o644); err != nil {
		t.Fatal(err)
	}
	var recs []string
	want := map[int][]string{} // record: its images
	for r := range 9 {
		var names []string
		for k := range 1 + r%3 {
			names = append(names, fmt.Sprintf("%d.jpg", (r+2*k)%6))
		}
		if r == 7 {
			names = []string{"1.jpg", "bad.jpg"}
		}
		want[r] = names
		q, _ := json.Marshal(names)
		recs = append(recs, fmt.Sprintf(`{"id": %d, "images": %s, "messages": [{"role": "user", "content": "hi"}]}`, r, q))
	}
	ann := filepath.Join(t.TempDir(), "sft.json")
	if err := os.WriteFile(ann, []byte("["+strings.Join(recs, ",\n")+"]"), 0o644); err != nil {
		t.Fatal(err)
	}
	cfg := func() Config {
		return Config{Datasets: map[string]string{"sft": dir}, Annotations: map[string]string{"sft": ann}, Workers: 1}
	}
	job := smallJob("sft", 2)
	job.Job.Transform = &pb.TransformSpec{Ops: []*pb.Op{opspec.Wire("Resize", "size", []int{16, 16})}}
	job.Job.Fields = []string{"path"}
	job.Job.MaxSampleErrors = &pb.SampleErrorLimit{Count: 1}
	var alone epoch
	for _, n := range []int{0, 3} {
		e := topology(t, cfg, n)
		ep := e.collect(t, job)
		seen, marked, errs := map[int]int{}, 0, 0
		for k, b := range ep.batches {
			h := b.hdr
			recsOf, paths := h.GetRecords(), h.GetFields()[0].GetValues()
			if len(recsOf) != int(h.GetShape()[0]) || len(paths) != len(recsOf) {
				t.Fatalf("%d peers: batch %d: %d records for %d samples", n, k, len(recsOf), h.GetShape()[0])
			}
			inBatch := map[int64]bool{}
			for i := 0; i < len(recsOf); {
				r := recsOf[i]
				if r < 0 {
					marked++
					i++
					continue
				}
				names := want[int(r)]
				for x, name := range names {
					if i+x >= len(recsOf) || recsOf[i+x] != r || string(paths[i+x]) != name {
						t.Fatalf("%d peers: batch %d: record %d (%v) is not whole and in order at %d: records %v", n, k, r, names, i, recsOf)
					}
				}
				seen[int(r)]++
				inBatch[r] = true
				i += len(names)
			}
			if len(inBatch) > 2 {
				t.Fatalf("%d peers: batch %d holds %d records, batch_size 2", n, k, len(inBatch))
			}
			for _, se := range h.GetErrors() {
				errs++
				if !strings.Contains(se.GetName(), "bad.jpg") {
					t.Errorf("%d peers: batch %d: error %v; want bad.jpg's", n, k, se)
				}
			}
		}
		for r := range 9 {
			if wantN := map[bool]int{true: 0, false: 1}[r == 7]; seen[r] != wantN {
				t.Errorf("%d peers: record %d served whole %d times; want %d", n, r, seen[r], wantN)
			}
		}
		if marked != 1 || errs != 1 {
			t.Errorf("%d peers: %d images marked -1, %d errors; want 1.jpg of record 7 marked, bad.jpg failed", n, marked, errs)
		}
		if n == 0 {
			alone = ep
			continue
		}
		for i, b := range ep.batches {
			if i < len(alone.batches) && !slices.Equal(b.hdr.GetRecords(), alone.batches[i].hdr.GetRecords()) {
				t.Errorf("%d peers: batch %d's records %v, alone %v", n, i, b.hdr.GetRecords(), alone.batches[i].hdr.GetRecords())
			}
		}
		sameAsAlone(t, e, n, ep, alone)
	}
}
