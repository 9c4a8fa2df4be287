package server

import (
	"bytes"
	"context"
	"encoding/binary"
	"encoding/json"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/stoker-dev/stoker/internal/opspec"
	"github.com/stoker-dev/stoker/pipeline/kernels"
	"github.com/stoker-dev/stoker/pipeline/targets"
	pb "github.com/stoker-dev/stoker/proto/stoker/v1"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
)

// photosMasks is photosCOCO's file with a polygon an annotation: a
// triangle within its box.
func photosMasks(t *testing.T) (string, []int) {
	t.Helper()
	path, counts := photosCOCO(t)
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	var doc map[string]any
	if err := json.Unmarshal(b, &doc); err != nil {
		t.Fatal(err)
	}
	for _, a := range doc["annotations"].([]any) {
		ann := a.(map[string]any)
		bb := ann["bbox"].([]any)
		x, y, w, h := bb[0].(float64), bb[1].(float64), bb[2].(float64), bb[3].(float64)
		ann["segmentation"] = [][]float64{{x, y, x + w, y + h*0.5, x + w*0.3, y + h}}
	}
	return writeJSON(t, "instances-masks.json", doc), counts
}

// TestMasksAnyTopology: a job asking for masks (target_fields), rotated
// too, gets each
// sample's targets with the masks bit set and K run-length masks after
// them, each covering the 32x32 canvas, some pixels set; the same bytes on
// a lone server and over 3 verified peers, none quarantined.
func TestMasksAnyTopology(t *testing.T) {
	ann, counts := photosMasks(t)
	cfg := func() Config {
		return Config{Datasets: map[string]string{"det": "../testdata/photos"}, Annotations: map[string]string{"det": ann}, Workers: 1}
	}
	job := smallJob("det", 8)
	job.Job.Targets = true
	job.Job.TargetFields = []string{"boxes", "labels", "masks"}
	job.Job.Transform.Ops = append(job.Job.Transform.Ops,
		opspec.Wire("RandomRotation", "degrees", []float64{-30, 30}))
	var alone epoch
	for _, n := range []int{0, 3} {
		e := topology(t, cfg, n)
		ep := e.collect(t, job)
		seen, set := 0, 0
		for _, b := range ep.batches {
			h := b.hdr
			fs := h.GetFields()
			if len(fs) != 1 || fs[0].GetName() != "targets" || len(fs[0].GetMissing()) != 0 {
				t.Fatalf("%d peers: batch %d: fields %v", n, h.GetNumber(), fs)
			}
			for i, v := range fs[0].GetValues() {
				le := binary.LittleEndian
				idx := h.GetIndices()[i]
				k, word := int(le.Uint32(v[16:])), le.Uint32(v[20:])
				at := (24 + 25*k + 3) / 4 * 4
				if k != counts[idx] || word != 1<<31 || len(v) < at+4*k {
					t.Fatalf("%d peers: sample %d: %d instances, word %#x, %d bytes; want %d instances and the masks bit", n, idx, k, word, len(v), counts[idx])
				}
				runs := v[at+4*k:]
				for m := range k {
					c := int(le.Uint32(v[at+4*m:]))
					r := make([]uint32, c)
					for j := range c {
						r[j] = le.Uint32(runs[4*j:])
					}
					runs = runs[4*c:]
					px, ok := kernels.MaskFromRuns(nil, r, 32*32)
					if !ok {
						t.Fatalf("%d peers: sample %d: mask %d's runs %v do not cover 32x32", n, idx, m, r)
					}
					for _, p := range px {
						set += int(p)
					}
				}
				if len(runs) != 0 {
					t.Errorf("%d peers: sample %d: %d bytes after the masks", n, idx, len(runs))
				}
				seen++
			}
		}
		if seen != len(counts) || set == 0 {
			t.Errorf("%d peers: %d samples, %d mask pixels set; want %d samples, some set", n, seen, set, len(counts))
		}
		if n == 0 {
			alone = ep
			continue
		}
		sameAsAlone(t, e, n, ep, alone)
	}
}

// TestMasksFillAnyTopology: masks padded and rotated with a Mask fill of
// 255 (a fill per type, the pixels' 9) come with each sample's fill
// block: every instance's mask on the 32x32 canvas 0, 1 or 255, the pad's
// border and the rotation's corners 255; the same bytes on a lone server
// and over 3 verified peers.
func TestMasksFillAnyTopology(t *testing.T) {
	ann, counts := photosMasks(t)
	cfg := func() Config {
		return Config{Datasets: map[string]string{"det": "../testdata/photos"}, Annotations: map[string]string{"det": ann}, Workers: 1}
	}
	m := 255.0
	job := smallJob("det", 8)
	job.Job.Targets = true
	job.Job.TargetFields = []string{"boxes", "labels", "masks"}
	job.Job.Transform.Ops = []*pb.Op{opspec.Wire("CenterCrop", "size", []int{24, 24}), typedPad(9, m),
		withFill(opspec.Wire("RandomRotation", "degrees", []float64{20, 40}), []float64{9}, &m)}
	var alone epoch
	for _, n := range []int{0, 3} {
		e := topology(t, cfg, n)
		ep := e.collect(t, job)
		seen, filled := 0, 0
		for _, b := range ep.batches {
			h := b.hdr
			for i, v := range h.GetFields()[0].GetValues() {
				le := binary.LittleEndian
				idx := h.GetIndices()[i]
				k := int(le.Uint32(v[16:]))
				at := (24 + 25*k + 3) / 4 * 4
				if k != counts[idx] || len(v) < at+4*k {
					t.Fatalf("%d peers: sample %d: %d instances, %d bytes", n, idx, k, len(v))
				}
				lens := make([]int, k)
				total := 0
				for j := range k {
					lens[j] = int(le.Uint32(v[at+4*j:]))
					total += lens[j]
				}
				runs, rest := v[at+4*k:at+4*k+4*total], v[at+4*k+4*total:]
				if k > 0 && len(rest) < 4 {
					t.Fatalf("%d peers: sample %d: no fill block after its masks", n, idx)
				}
				var fr []uint32
				var fv []byte
				if len(rest) > 0 {
					f := int(le.Uint32(rest))
					for j := range f {
						fr = append(fr, le.Uint32(rest[4+4*j:]))
					}
					fv = rest[4+4*f : 4+4*f+f/2]
				}
				for j := range k {
					r := make([]uint32, lens[j])
					for q := range r {
						r[q] = le.Uint32(runs[4*q:])
					}
					runs = runs[4*lens[j]:]
					px, ok := kernels.MaskFromRuns(nil, r, 32*32)
					if !ok || !kernels.ApplyFill(px, fr, fv) {
						t.Fatalf("%d peers: sample %d: mask %d's runs or fill runs do not cover 32x32", n, idx, j)
					}
					for q, p := range px {
						if p != 0 && p != 1 && p != 255 {
							t.Fatalf("%d peers: sample %d: mask %d's pixel %d is %d", n, idx, j, q, p)
						}
					}
					if px[0] != 255 || px[32*32-1] != 255 {
						t.Errorf("%d peers: sample %d: mask %d's corners %d and %d, want the fill 255", n, idx, j, px[0], px[32*32-1])
					}
					filled++
				}
				seen++
			}
		}
		if seen != len(counts) || filled == 0 {
			t.Errorf("%d peers: %d samples, %d masks; want %d samples, some masks", n, seen, filled, len(counts))
		}
		if n == 0 {
			alone = ep
			continue
		}
		sameAsAlone(t, e, n, ep, alone)
	}
}

// TestMasksRefused: target_fields with an unknown name, a name twice,
// keypoints the dataset lacks, without targets; max_targets_bytes without
// masks or past a batch's bound; masks with a rotation or a pad of a fill
// of several values (pad_mask refuses it) or a perspective's, a Mask
// fill past a byte: refused at open, saying which.
func TestMasksRefused(t *testing.T) {
	ann, _ := photosMasks(t)
	e := startServer(t, Config{Datasets: map[string]string{"det": "../testdata/photos"}, Annotations: map[string]string{"det": ann}, Workers: 1})
	rot := opspec.Wire("RandomRotation", "degrees", []float64{-10, 10}, "fill", []float64{3, 4, 5})
	pad := opspec.Wire("Pad", "padding", []int{4}, "fill", []float64{5, 6, 7})
	center := opspec.Wire("CenterCrop", "size", []int{32, 32})
	masks := []string{"boxes", "masks"}
	for _, c := range []struct {
		name    string
		targets bool
		fields  []string
		max     uint64
		ops     []*pb.Op
		want    string
	}{
		{"unknown", true, []string{"boxes", "area"}, 0, nil, `target_fields: "area": want some of boxes, labels`},
		{"twice", true, []string{"masks", "masks"}, 0, nil, `"masks" asked for twice`},
		{"no keypoints", true, []string{"keypoints"}, 0, nil, `"keypoints": the dataset has no keypoints`},
		{"without targets", false, masks, 0, nil, "target_fields without targets"},
		{"bound without masks", true, []string{"boxes"}, 4096, nil, "max_targets_bytes 4096 without masks"},
		{"bound too large", true, masks, 8 << 20, nil, "max_targets_bytes 8388608: a batch of 8 samples"},
		{"rotation fill", true, masks, 0, []*pb.Op{rrcOp(32), rot}, "RandomRotation (op 1): fill [3 4 5] with masks"},
		{"pad fill", true, masks, 0, []*pb.Op{pad, center}, "Pad (op 0): fill [5 6 7] with masks"},
		{"perspective fill", true, masks, 0, []*pb.Op{rrcOp(32), opspec.Wire("RandomPerspective", "fill", []float64{3, 4, 5})},
			"RandomPerspective (op 1): fill [3 4 5] with masks"},
		{"mask fill past a byte", true, masks, 0, []*pb.Op{typedPad(5, 256), center}, "Pad: fill: the Mask's fill 256: want an integer 0..255"},
		{"mask fill negative", true, masks, 0, []*pb.Op{typedPad(5, -1), center}, "Pad: fill: the Mask's fill -1: want an integer 0..255"},
		{"mask fill not a byte", true, masks, 0, []*pb.Op{typedPad(5, 0.5), center}, "Pad: fill: the Mask's fill 0.5: want an integer 0..255"},
	} {
		job := smallJob("det", 8)
		job.Job.Targets, job.Job.TargetFields, job.Job.MaxTargetsBytes = c.targets, c.fields, c.max
		if c.ops != nil {
			job.Job.Transform.Ops = c.ops
		}
		ctx, cancel := context.WithTimeout(context.Background(), hangGuard)
		_, err := readEpoch(e.feedStream(t, ctx, job))
		cancel()
		if status.Code(err) != codes.InvalidArgument || !strings.Contains(err.Error(), c.want) {
			t.Errorf("%s: %v, want INVALID_ARGUMENT saying %q", c.name, err, c.want)
		}
	}
}

// typedPad is a Pad of 4 with a fill per type: fill to the pixels, mask to
// the masks.
func typedPad(fill, mask float64) *pb.Op {
	return withFill(opspec.Wire("Pad", "padding", []int{4}), []float64{fill}, &mask)
}

// withFill is op (a NamedOp) with its fill: with mask, a fill per type
// ({Image: fill, Mask: *mask}; fill nil: None); without, fill alone
// (every type's; nil: none given, the default).
func withFill(op *pb.Op, fill []float64, mask *float64) *pb.Op {
	switch {
	case mask != nil:
		return withArgs(op, typedFill(fill, *mask))
	case fill != nil:
		return withArgs(op, &pb.NamedArg{Name: "fill", Value: &pb.NamedArg_Numbers{Numbers: &pb.Numbers{Values: fill}}})
	}
	return op
}

// TestMasksFillPerType: a Pad, a RandomZoomOut, a RandomRotation and a
// RandomPerspective with a fill per type ({Image: v, Mask: 0}) give masks
// byte for byte those of the same job with fill 0, and pixels that differ
// (the fill is the pixels').
func TestMasksFillPerType(t *testing.T) {
	ann, _ := photosMasks(t)
	e := startServer(t, Config{Datasets: map[string]string{"det": "../testdata/photos"}, Annotations: map[string]string{"det": ann}, Workers: 1})
	zero := 0.0
	crop40 := opspec.Wire("CenterCrop", "size", []int{40, 40})
	resize := opspec.Wire("Resize", "size", []int{48, 48})
	zoom := func(fill []float64, mask *float64) *pb.Op {
		return withFill(opspec.Wire("RandomZoomOut", "p", 1, "side_range", []float64{1.5, 2}), fill, mask)
	}
	rot := func(fill []float64, mask *float64) *pb.Op {
		return withFill(opspec.Wire("RandomRotation", "degrees", []float64{20, 40}), fill, mask)
	}
	persp := func(fill []float64, mask *float64) *pb.Op {
		return withFill(opspec.Wire("RandomPerspective", "p", 1), fill, mask)
	}
	for _, c := range []struct {
		name        string
		typed, zero []*pb.Op
	}{
		{"pad", []*pb.Op{crop40, typedPad(200, 0)}, []*pb.Op{crop40, opspec.Wire("Pad", "padding", []int{4})}},
		{"zoom out", []*pb.Op{zoom([]float64{123, 117, 104}, &zero), resize}, []*pb.Op{zoom(nil, nil), resize}},
		{"rotation", []*pb.Op{rrcOp(48), rot([]float64{9}, &zero)}, []*pb.Op{rrcOp(48), rot(nil, nil)}},
		{"perspective", []*pb.Op{rrcOp(48), persp([]float64{9}, &zero)}, []*pb.Op{rrcOp(48), persp(nil, nil)}},
	} {
		run := func(ops []*pb.Op) epoch {
			job := smallJob("det", 8)
			job.Job.Targets, job.Job.TargetFields = true, []string{"boxes", "labels", "masks"}
			job.Job.Transform.Ops = ops
			return e.collect(t, job)
		}
		got, want := run(c.typed), run(c.zero)
		if len(got.batches) != len(want.batches) || len(got.batches) == 0 {
			t.Fatalf("%s: %d batches, %d with fill 0", c.name, len(got.batches), len(want.batches))
		}
		differ := false
		for k, b := range got.batches {
			w := want.batches[k]
			gf, wf := b.hdr.GetFields(), w.hdr.GetFields()
			if len(gf) != 1 || len(wf) != 1 || len(gf[0].GetValues()) == 0 {
				t.Fatalf("%s: batch %d: fields %v, %v", c.name, k, gf, wf)
			}
			for i, v := range gf[0].GetValues() {
				if !bytes.Equal(v, wf[0].GetValues()[i]) {
					t.Errorf("%s: batch %d sample %d: targets (masks) differ from fill 0's", c.name, k, i)
				}
			}
			differ = differ || !bytes.Equal(b.data, w.data)
		}
		if !differ {
			t.Errorf("%s: the pixels are fill 0's: the image's fill was not applied", c.name)
		}
	}
}

// TestMasksFromShards: WebDataset shards with a COCO-style key.json per
// sample give the masks (and boxes) the COCO dataset of the same photos
// and annotations gives, byte for byte.
func TestMasksFromShards(t *testing.T) {
	ann, _ := photosMasks(t)
	shards := cocoShard(t, ann, -1)
	job := smallJob("det", 8)
	job.Job.Targets = true
	job.Job.TargetFields = []string{"boxes", "masks"}
	want := startServer(t, Config{Datasets: map[string]string{"det": "../testdata/photos"}, Annotations: map[string]string{"det": ann}, Workers: 2}).collect(t, job)
	got := startServer(t, Config{Datasets: map[string]string{"det": shards}, Annotations: map[string]string{"det": ".json"}, Workers: 2}).collect(t, job)
	if len(got.batches) != len(want.batches) || len(got.batches) == 0 {
		t.Fatalf("%d batches from the shards, %d from the COCO dataset", len(got.batches), len(want.batches))
	}
	for k, b := range got.batches {
		w := want.batches[k]
		if len(b.hdr.GetErrors()) != 0 || len(w.hdr.GetErrors()) != 0 {
			t.Fatalf("batch %d: errors %v, %v", k, b.hdr.GetErrors(), w.hdr.GetErrors())
		}
		if !slices.Equal(b.hdr.GetIndices(), w.hdr.GetIndices()) || !bytes.Equal(b.data, w.data) || !sameFields(b.hdr, w.hdr) {
			t.Fatalf("batch %d: the shards' targets with masks differ from the COCO dataset's", k)
		}
	}
}

// photosSegments is a YOLO segment dataset of 8 of testdata/photos: each
// image 1 to 4 polygon lines (a triangle or a quad of its own), and its
// data.yaml.
func photosSegments(t *testing.T) (images, yaml string) {
	t.Helper()
	root := t.TempDir()
	images, labels := filepath.Join(root, "images", "train"), filepath.Join(root, "labels", "train")
	for _, d := range []string{images, labels} {
		if err := os.MkdirAll(d, 0o755); err != nil {
			t.Fatal(err)
		}
	}
	var jpgs []string
	if err := filepath.WalkDir("../testdata/photos", func(p string, d fs.DirEntry, err error) error {
		if err == nil && !d.IsDir() && strings.HasSuffix(p, ".jpg") && len(jpgs) < 8 {
			jpgs = append(jpgs, p)
		}
		return err
	}); err != nil {
		t.Fatal(err)
	}
	for i, p := range jpgs {
		b, err := os.ReadFile(p)
		if err != nil {
			t.Fatal(err)
		}
		name := fmt.Sprintf("%06d", i)
		if err := os.WriteFile(filepath.Join(images, name+".jpg"), b, 0o600); err != nil {
			t.Fatal(err)
		}
		var lines []string
		for k := range 1 + i%4 {
			x, y, s := 0.1+0.15*float64(k), 0.2+0.1*float64(i%3), 0.2+0.05*float64(k)
			if k%2 == 0 {
				lines = append(lines, fmt.Sprintf("%d %.4f %.4f %.4f %.4f %.4f %.4f", k%3, x, y, x+s, y+s/2, x+s/3, y+s))
			} else {
				lines = append(lines, fmt.Sprintf("%d %.4f %.4f %.4f %.4f %.4f %.4f %.4f %.4f", k%3, x, y, x+s, y, x+s, y+s, x, y+s))
			}
		}
		if err := os.WriteFile(filepath.Join(labels, name+".txt"), []byte(strings.Join(lines, "\n")+"\n"), 0o600); err != nil {
			t.Fatal(err)
		}
	}
	yaml = filepath.Join(root, "data.yaml")
	if err := os.WriteFile(yaml, []byte("path: .\ntrain: images/train\nval: images/train\nnames:\n  0: a\n  1: b\n  2: c\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	return images, yaml
}

// TestOverlapMaskAnyTopology: a job asking for "overlap_mask" on a YOLO
// segment dataset through the YOLO ops gets each sample's targets with the
// overlap bit and its W/4 x H/4 map after them (values at most K, some
// set); the same bytes on a lone server and over 3 verified peers (the
// peers' arrays unpacked and compared byte for byte), none quarantined.
func TestOverlapMaskAnyTopology(t *testing.T) {
	segMasksAnyTopology(t, 0, nil, func(n, i, k, ww, hh int, v []byte, at int) int {
		if int64(len(v)) != int64(at)+targets.OverlapMaskSize(ww, hh, k) || k > 255 {
			t.Fatalf("%d peers: sample %d: %d instances on %dx%d, %d bytes", n, i, k, ww, hh, len(v))
		}
		set := 0
		for _, m := range v[at : at+(hh/4)*(ww/4)] {
			if int(m) > k {
				t.Fatalf("%d peers: sample %d: a map value %d of %d instances", n, i, m, k)
			}
			set += btoi(m != 0)
		}
		return set
	})
}

// segMasksAnyTopology serves a job for "boxes", "labels" and
// "overlap_mask" (with ratio and overlap, the job's mask_ratio and
// mask_overlap) through a YOLOMosaic and a flip on photosSegments' set,
// alone and over 3 verified peers. Each sample's targets must carry the
// overlap bit; check is given the sample (n peers, its index, its k
// instances on ww x hh, its bytes v, at: where its masks start) and
// returns how many mask bytes are set. 8 samples must come, some bytes
// set, and the peers' epochs must be the lone server's, byte for byte.
func segMasksAnyTopology(t *testing.T, ratio uint32, overlap *bool, check func(n, i, k, ww, hh int, v []byte, at int) int) {
	t.Helper()
	images, yaml := photosSegments(t)
	cfg := func() Config {
		return Config{Datasets: map[string]string{"seg": images}, Annotations: map[string]string{"seg": yaml}, Workers: 1}
	}
	job := smallJob("seg", 4)
	job.Job.Targets = true
	job.Job.TargetFields = []string{"boxes", "labels", "overlap_mask"}
	job.Job.MaskRatio, job.Job.MaskOverlap = ratio, overlap
	job.Job.Transform.Ops = []*pb.Op{namedOp("YOLOMosaic", numArg("imgsz", 64), numArg("p", 1)),
		namedOp("YOLORandomFlip", numArg("p", 0.5))}
	var alone epoch
	for _, n := range []int{0, 3} {
		e := topology(t, cfg, n)
		ep := e.collect(t, job)
		seen, set := 0, 0
		for _, b := range ep.batches {
			h := b.hdr
			fs := h.GetFields()
			if len(fs) != 1 || fs[0].GetName() != "targets" {
				t.Fatalf("%d peers: batch %d: fields %v", n, h.GetNumber(), fs)
			}
			for i, v := range fs[0].GetValues() {
				le := binary.LittleEndian
				hh, ww, k, word := int(le.Uint32(v)), int(le.Uint32(v[4:])), int(le.Uint32(v[16:])), le.Uint32(v[20:])
				if word != 1<<30 {
					t.Fatalf("%d peers: sample %d: %d instances on %dx%d, word %#x: want the overlap bit", n, h.GetIndices()[i], k, ww, hh, word)
				}
				set += check(n, int(h.GetIndices()[i]), k, ww, hh, v, (24+25*k+3)/4*4)
				seen++
			}
		}
		if seen != 8 || set == 0 {
			t.Errorf("%d peers: %d samples, %d mask bytes set; want 8 samples, some set", n, seen, set)
		}
		if n == 0 {
			alone = ep
			continue
		}
		sameAsAlone(t, e, n, ep, alone)
	}
}
