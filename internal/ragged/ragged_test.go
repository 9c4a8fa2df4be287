package ragged

import (
	"bytes"
	"encoding/binary"
	"math/rand/v2"
	"strings"
	"testing"

	"github.com/stoker-dev/stoker/pipeline/targets"
	"google.golang.org/protobuf/proto"

	stokerv1 "github.com/stoker-dev/stoker/proto/stoker/v1"
)

// encode is sample i's targets as the pipeline encodes them
// (targets.AppendTargets), with masks of random runs after them when
// masks (appendMasks' layout: zeros to a multiple of 4, K run counts, the
// runs).
func encode(r *rand.Rand, i, k, p int, format targets.BoxFormat, masks bool) []byte {
	t := &targets.Targets{W: 40 + i, H: 30 + 2*i, Format: format}
	t.ImageID, t.P, t.WantMasks = int64(1000+i), p, masks
	for range k {
		t.Boxes = append(t.Boxes, [4]float32{r.Float32() * 40, r.Float32() * 30, r.Float32() * 40, r.Float32() * 30})
		t.Labels = append(t.Labels, r.Int64N(80)-1)
		t.Crowd = append(t.Crowd, uint8(r.IntN(2)))
		for range p {
			t.Points = append(t.Points, [2]float32{r.Float32() * 40, r.Float32() * 30})
			t.Vis = append(t.Vis, uint8(r.IntN(3)))
		}
	}
	b := targets.AppendTargets(nil, t)
	if !masks {
		return b
	}
	for len(b)%4 != 0 {
		b = append(b, 0)
	}
	runs := make([][]uint32, k)
	for j := range runs {
		left := uint32(t.W * t.H)
		for left > 0 {
			n := min(left, uint32(r.IntN(300)))
			runs[j] = append(runs[j], n)
			left -= n
		}
	}
	for _, rs := range runs {
		b = binary.LittleEndian.AppendUint32(b, uint32(len(rs)))
	}
	for _, rs := range runs {
		for _, n := range rs {
			b = binary.LittleEndian.AppendUint32(b, n)
		}
	}
	return b
}

// withFill is v, a sample's encoding with masks on a w x h canvas, with a
// fill block of random runs and values (1..255) after its masks.
func withFill(r *rand.Rand, v []byte) []byte {
	h, w := le.Uint32(v), le.Uint32(v[4:])
	var runs []uint32
	var vals []byte
	for left := h * w; left > 0; {
		n := min(left, uint32(r.IntN(200)))
		runs, left = append(runs, n), left-n
		if len(runs)%2 == 0 {
			vals = append(vals, byte(1+r.IntN(255)))
		}
	}
	v = le.AppendUint32(v, uint32(len(runs)))
	for _, n := range runs {
		v = le.AppendUint32(v, n)
	}
	v = append(v, vals...)
	for len(v)%4 != 0 {
		v = append(v, 0)
	}
	return v
}

// batchOf is a batch of n samples' encodings, sample i with ks[i]
// instances (P keypoints each when p, sample 3's P other where pVaries).
func batchOf(r *rand.Rand, ks []int, p int, pVaries, masks bool) [][]byte {
	vals := make([][]byte, len(ks))
	for i, k := range ks {
		pi := p
		if pVaries && i == 3 {
			pi = p + 2
		}
		vals[i] = encode(r, i, k, pi, targets.BoxCXCYWH, masks)
	}
	return vals
}

// TestPackUnpack: the flat arrays are the samples' arrays back to back in
// batch order, the offsets their instances' starts, and unpacking gives
// back every sample's bytes, with and without keypoints (P of the batch,
// or P of its own) and masks, empty samples among them.
func TestPackUnpack(t *testing.T) {
	r := rand.New(rand.NewPCG(1, 2))
	ks := []int{7, 0, 3, 7, 1, 0, 12, 7}
	for _, c := range []struct {
		name                  string
		p                     int
		pVaries, masks, fills bool
	}{{"boxes", 0, false, false, false}, {"keypoints", 17, false, false, false}, {"keypoints of their own", 4, true, false, false},
		{"masks", 0, false, true, false}, {"keypoints and masks", 17, false, true, false}, {"masks and fills", 3, false, true, true}} {
		vals := batchOf(r, ks, c.p, c.pVaries, c.masks)
		if c.fills {
			for i := range vals {
				if i%3 == 0 {
					vals[i] = withFill(r, vals[i])
				}
			}
		}
		bt, buf, err := Pack(vals, c.masks, Overlap{}, nil)
		if err != nil {
			t.Fatalf("%s: Pack: %v", c.name, err)
		}
		var boxes, labels, crowd, points, vis []byte
		var moff []uint32
		var runs, fills []byte
		var foff []uint32
		total := uint32(0)
		var size int64
		for i, v := range vals {
			s, err := parse(v, Overlap{})
			if err != nil {
				t.Fatal(err)
			}
			size += int64(len(v))
			kp := int(s.k * s.p)
			if bt.GetOffsets()[i] != uint32(len(labels)/8) || bt.GetCanvas()[2*i] != s.h || bt.GetCanvas()[2*i+1] != s.w || bt.GetImageIds()[i] != s.id {
				t.Errorf("%s: sample %d: offset %d, canvas %v, id %d; want %d, %dx%d, %d", c.name, i, bt.GetOffsets()[i], bt.GetCanvas()[2*i:2*i+2], bt.GetImageIds()[i], len(labels)/8, s.h, s.w, s.id)
			}
			if c.p > 0 && bt.GetKeypointsPerInstance()[i] != s.p {
				t.Errorf("%s: sample %d: P %d, want %d", c.name, i, bt.GetKeypointsPerInstance()[i], s.p)
			}
			boxes = append(boxes, v[header:s.labels]...)
			labels = append(labels, v[s.labels:s.points]...)
			points = append(points, v[s.points:s.crowd]...)
			crowd = append(crowd, v[s.crowd:s.vis]...)
			vis = append(vis, v[s.vis:s.vis+kp]...)
			for j := range int(s.k) {
				moff = append(moff, total)
				total += le.Uint32(v[s.counts+4*j:])
			}
			if c.masks {
				runs = append(runs, v[s.runs:s.fill]...)
				foff = append(foff, uint32(len(fills)))
				fills = append(fills, v[s.fill:]...)
			}
		}
		if foff = append(foff, uint32(len(fills))); len(fills) == 0 {
			foff = nil
		}
		if c.fills != (len(fills) > 0) || !bytes.Equal(bt.GetMaskFills(), fills) || len(bt.GetMaskFillOffsets()) != 4*len(foff) {
			t.Errorf("%s: mask_fills of %d bytes and %d offsets, want the samples' %d bytes and %d", c.name, len(bt.GetMaskFills()), len(bt.GetMaskFillOffsets())/4, len(fills), len(foff))
		}
		for i, o := range foff {
			if got := le.Uint32(bt.GetMaskFillOffsets()[4*i:]); got != o {
				t.Errorf("%s: mask fill offset %d is %d, want %d", c.name, i, got, o)
			}
		}
		if n := len(ks); bt.GetOffsets()[n] != uint32(len(labels)/8) || len(bt.GetOffsets()) != n+1 {
			t.Errorf("%s: offsets %v, want %d ending at %d", c.name, bt.GetOffsets(), n+1, len(labels)/8)
		}
		for _, a := range []struct {
			name      string
			got, want []byte
		}{{"boxes", bt.GetBoxes(), boxes}, {"labels", bt.GetLabels(), labels}, {"iscrowd", bt.GetIscrowd(), crowd},
			{"keypoints", bt.GetKeypoints(), points}, {"keypoints_visibility", bt.GetKeypointsVisibility(), vis}, {"mask_runs", bt.GetMaskRuns(), runs}} {
			if !bytes.Equal(a.got, a.want) {
				t.Errorf("%s: %s: %d bytes, not the samples' %d back to back", c.name, a.name, len(a.got), len(a.want))
			}
		}
		if c.masks {
			moff = append(moff, total)
			for j, o := range moff {
				if got := le.Uint32(bt.GetMaskOffsets()[4*j:]); got != o {
					t.Errorf("%s: mask offset %d is %d, want %d", c.name, j, got, o)
				}
			}
		}
		if bt.GetBoxFormat() != uint32(targets.BoxCXCYWH) || bt.GetMasks() != c.masks {
			t.Errorf("%s: format %d, masks %v", c.name, bt.GetBoxFormat(), bt.GetMasks())
		}
		if int64(len(buf)) > Size(size) {
			t.Errorf("%s: %d bytes of arrays for %d bytes of samples, over Size's %d", c.name, len(buf), size, Size(size))
		}
		// Through the wire and back: each sample's bytes again.
		wire, err := proto.Marshal(bt)
		if err != nil {
			t.Fatal(err)
		}
		var got stokerv1.BatchTargets
		if err := proto.Unmarshal(wire, &got); err != nil {
			t.Fatal(err)
		}
		out := make([][]byte, len(vals))
		if err := Unpack(&got, len(vals), c.masks, Overlap{}, 1<<20, func(i int) []byte { return out[i][:0] }, func(i int, v []byte) { out[i] = v }); err != nil {
			t.Fatalf("%s: Unpack: %v", c.name, err)
		}
		for i := range vals {
			if !bytes.Equal(out[i], vals[i]) {
				t.Errorf("%s: sample %d unpacked: %d bytes, not its %d", c.name, i, len(out[i]), len(vals[i]))
			}
		}
	}
}

// TestPackRefuses: samples whose lengths do not add up, or whose formats
// or masks differ within a batch, are not packed.
func TestPackRefuses(t *testing.T) {
	r := rand.New(rand.NewPCG(3, 4))
	good := batchOf(r, []int{2, 3}, 0, false, false)
	for _, c := range []struct {
		name string
		vals [][]byte
		want string
	}{
		{"short", [][]byte{good[0], good[1][:20]}, "sample 1's targets: 20 bytes"},
		{"a byte more", [][]byte{good[0], append(bytes.Clone(good[1]), 0)}, "sample 1's targets"},
		{"formats", [][]byte{good[0], encode(r, 1, 2, 0, targets.BoxXYXY, false)}, "boxes' format 0, sample 0's 2"},
		{"masks", [][]byte{good[0], encode(r, 1, 2, 0, targets.BoxCXCYWH, true)}, "sample 1's targets: masks true, the job asks for masks false"},
	} {
		if _, _, err := Pack(c.vals, false, Overlap{}, nil); err == nil || !strings.Contains(err.Error(), c.want) {
			t.Errorf("%s: Pack: %v, want an error with %q", c.name, err, c.want)
		}
	}
}

// TestUnpackHostile: a peer's targets whose offsets are out of range or go
// down, whose arrays are longer or shorter than the offsets say, or whose
// samples pass the job's bound are refused, saying what is wrong, before
// anything is put.
func TestUnpackHostile(t *testing.T) {
	r := rand.New(rand.NewPCG(5, 6))
	vals := batchOf(r, []int{2, 3, 0, 4}, 5, false, true)
	vals[1] = withFill(r, vals[1])
	bt, _, err := Pack(vals, true, Overlap{}, nil)
	if err != nil {
		t.Fatal(err)
	}
	for _, c := range []struct {
		name  string
		spoil func(b *stokerv1.BatchTargets)
		masks bool
		max   int64
		want  string
	}{
		{"offsets go down", func(b *stokerv1.BatchTargets) { b.Offsets[2] = 1 }, true, 1 << 20, "offsets go down at sample 1"},
		{"offsets past the arrays", func(b *stokerv1.BatchTargets) { b.Offsets[4] = 1 << 30 }, true, 1 << 20, "boxes of 144 bytes, want 17179869184"},
		{"offsets from 1", func(b *stokerv1.BatchTargets) { b.Offsets[0] = 1 }, true, 1 << 20, "offsets start at 1"},
		{"an offset short", func(b *stokerv1.BatchTargets) { b.Offsets = b.Offsets[:4] }, true, 1 << 20, "4 offsets"},
		{"labels short", func(b *stokerv1.BatchTargets) { b.Labels = b.Labels[:8] }, true, 1 << 20, "labels of 8 bytes, want 72"},
		{"keypoints long", func(b *stokerv1.BatchTargets) { b.Keypoints = append(b.Keypoints, 0) }, true, 1 << 20, "keypoints of 361 bytes"},
		{"P of a sample missing", func(b *stokerv1.BatchTargets) { b.KeypointsPerInstance = b.KeypointsPerInstance[:3] }, true, 1 << 20, "3 keypoint counts"},
		{"P huge", func(b *stokerv1.BatchTargets) { b.KeypointsPerInstance[1] = 1 << 30 }, true, 1 << 20, "keypoints an instance"},
		{"mask offsets go down", func(b *stokerv1.BatchTargets) { le.PutUint32(b.MaskOffsets[8:], 0) }, true, 1 << 20, "mask offsets go down"},
		{"mask offsets past the runs", func(b *stokerv1.BatchTargets) {
			b.MaskOffsets = bytes.Clone(b.MaskOffsets)
			le.PutUint32(b.MaskOffsets[len(b.MaskOffsets)-4:], 1<<31)
		}, true, 1 << 20, "mask offsets end at 2147483648"},
		{"masks not asked", func(*stokerv1.BatchTargets) {}, false, 1 << 20, "masks true, the job asks for masks false"},
		{"fill offsets short", func(b *stokerv1.BatchTargets) { b.MaskFillOffsets = b.MaskFillOffsets[:8] }, true, 1 << 20, "mask_fill_offsets of 8 bytes, want 20"},
		{"fill offsets go down", func(b *stokerv1.BatchTargets) {
			b.MaskFillOffsets = bytes.Clone(b.MaskFillOffsets)
			le.PutUint32(b.MaskFillOffsets[12:], 0)
		}, true, 1 << 20, "mask fill offsets at sample 3"},
		{"fill offsets past the fills", func(b *stokerv1.BatchTargets) {
			b.MaskFillOffsets = bytes.Clone(b.MaskFillOffsets)
			le.PutUint32(b.MaskFillOffsets[16:], 1<<20)
		}, true, 1 << 20, "mask fill offsets end at 1048576"},
		{"fill block spoilt", func(b *stokerv1.BatchTargets) {
			b.MaskFills = bytes.Clone(b.MaskFills)
			le.PutUint32(b.MaskFills, 3)
		}, true, 1 << 20, "sample 1's fill block"},
		{"fills without offsets", func(b *stokerv1.BatchTargets) { b.MaskFillOffsets = nil }, true, 1 << 20, "mask_fills of"},
		{"format", func(b *stokerv1.BatchTargets) { b.BoxFormat = 7 }, true, 1 << 20, "box format 7"},
		{"over the bound", func(*stokerv1.BatchTargets) {}, true, 100, "over the job's bound of 100"},
		{"none", nil, true, 1 << 20, "without its targets"},
	} {
		var b *stokerv1.BatchTargets
		if c.spoil != nil {
			b = proto.CloneOf(bt)
			c.spoil(b)
		}
		put := 0
		err := Unpack(b, len(vals), c.masks, Overlap{}, c.max, func(int) []byte { return nil }, func(int, []byte) { put++ })
		if err == nil || !strings.Contains(err.Error(), c.want) {
			t.Errorf("%s: Unpack: %v, want an error with %q", c.name, err, c.want)
		}
		if put != 0 && !strings.Contains(c.want, "bound") {
			t.Errorf("%s: %d samples put before the error", c.name, put)
		}
	}
}

// TestPackNoSamples: a batch whose samples all failed (dropped) packs to
// offsets [0] and empty arrays, masks as the job asks, and unpacks.
func TestPackNoSamples(t *testing.T) {
	for _, masks := range []bool{false, true} {
		bt, _, err := Pack(nil, masks, Overlap{}, nil)
		if err != nil || len(bt.GetOffsets()) != 1 || bt.GetMasks() != masks {
			t.Fatalf("masks %v: Pack: %v, %v", masks, bt, err)
		}
		if err := Unpack(bt, 0, masks, Overlap{}, 100, nil, nil); err != nil {
			t.Errorf("masks %v: Unpack: %v", masks, err)
		}
	}
}

// TestPackMatchesTargetsSize: a sample of k instances of p keypoints
// without masks takes targets.TargetsSize bytes, its header gone.
func TestPackMatchesTargetsSize(t *testing.T) {
	r := rand.New(rand.NewPCG(7, 8))
	v := encode(r, 0, 5, 3, targets.BoxXYXY, false)
	if int64(len(v)) != targets.TargetsSize(5, 3) {
		t.Fatalf("%d bytes, TargetsSize %d: the layout differs from the pipeline's", len(v), targets.TargetsSize(5, 3))
	}
	_, buf, err := Pack([][]byte{v}, false, Overlap{}, nil)
	if err != nil || int64(len(buf)) != targets.TargetsSize(5, 3)-header {
		t.Fatalf("Pack: %d bytes, %v; want %d", len(buf), err, targets.TargetsSize(5, 3)-header)
	}
}

// TestPackUnpackOverlap: with the overlap mask, each sample's map (uint8,
// int32 past 255 instances, padded to 4 bytes) goes into overlap_masks
// back to back, and comes back, through the header and through a slot; a
// sample of another kind, or a map of another size, is refused; so at
// another mask_ratio (3, 1) and with mask_overlap=False (one mask an
// instance, as bits), and a batch of the job's other ratio or mode.
func TestPackUnpackOverlap(t *testing.T) {
	for _, ov := range []Overlap{{Ratio: 4}, {Ratio: 3}, {Ratio: 1}, {Ratio: 4, Instances: true}, {Ratio: 3, Instances: true}} {
		testPackUnpackOverlap(t, ov)
	}
}

func testPackUnpackOverlap(t *testing.T, ov Overlap) {
	r := rand.New(rand.NewPCG(3, 4))
	ks := []int{3, 0, 300, 1, 7}
	vals := make([][]byte, len(ks))
	for i, k := range ks {
		tg := &targets.Targets{W: 41 + 4*i, H: 30 + 3*i, WantOverlap: true}
		for range k {
			tg.Add([4]float32{1, 2, 3, 4}, r.Int64N(80), false)
		}
		v := targets.AppendTargets(nil, tg)
		for len(v)%4 != 0 {
			v = append(v, 0)
		}
		m := make([]byte, ov.bytes(int64(tg.H), int64(tg.W), int64(k)))
		if ov.Ratio == 4 && !ov.Instances && int64(len(m)) != targets.OverlapMaskSize(tg.W, tg.H, k) {
			t.Fatalf("%d bytes, targets.OverlapMaskSize %d", len(m), targets.OverlapMaskSize(tg.W, tg.H, k))
		}
		for j := range m {
			m[j] = byte(r.IntN(256))
		}
		vals[i] = append(v, m...)
	}
	bt, _, err := Pack(vals, false, ov, nil)
	if err != nil {
		t.Fatalf("%+v: %v", ov, err)
	}
	if !bt.GetOverlapMask() || len(bt.GetOverlapMasks()) == 0 || int(bt.GetMaskRatio()) != ov.Ratio || bt.GetMaskOverlap() == ov.Instances {
		t.Fatalf("overlap %v, %d bytes", bt.GetOverlapMask(), len(bt.GetOverlapMasks()))
	}
	check := func(bt *stokerv1.BatchTargets, where string) {
		out := make([][]byte, len(vals))
		if err := Unpack(bt, len(vals), false, ov, 1<<20, func(i int) []byte { return nil }, func(i int, v []byte) { out[i] = v }); err != nil {
			t.Fatalf("%s: %v", where, err)
		}
		for i := range vals {
			if !bytes.Equal(out[i], vals[i]) {
				t.Errorf("%s: sample %d changed", where, i)
			}
		}
	}
	check(bt, "header")
	slot := make([]byte, 1<<20)
	viaSlot := proto.Clone(bt).(*stokerv1.BatchTargets)
	if !ToSlot(viaSlot, slot, 100) {
		t.Fatal("does not fit the slot")
	}
	if err := FromSlot(viaSlot, slot, 100); err != nil {
		t.Fatalf("%+v: %v", ov, err)
	}
	check(viaSlot, "slot")
	if _, _, err := Pack(vals, false, Overlap{}, nil); err == nil || !strings.Contains(err.Error(), "overlap mask true") {
		t.Errorf("a job without it: %v", err)
	}
	if _, _, err := Pack([][]byte{vals[0][:len(vals[0])-4]}, false, ov, nil); err == nil || !strings.Contains(err.Error(), "overlap mask of") {
		t.Errorf("a short map: %v", err)
	}
	short := proto.Clone(bt).(*stokerv1.BatchTargets)
	short.OverlapMasks = short.OverlapMasks[4:]
	if err := Unpack(short, len(vals), false, ov, 1<<20, func(int) []byte { return nil }, func(int, []byte) {}); err == nil || !strings.Contains(err.Error(), "overlap_masks") {
		t.Errorf("short overlap_masks: %v", err)
	}
	for _, other := range []Overlap{{Ratio: ov.Ratio + 1, Instances: ov.Instances}, {Ratio: ov.Ratio, Instances: !ov.Instances}} {
		if err := Unpack(bt, len(vals), false, other, 1<<20, func(int) []byte { return nil }, func(int, []byte) {}); err == nil || !strings.Contains(err.Error(), "mask_ratio") {
			t.Errorf("%+v: a batch of %+v: %v", other, ov, err)
		}
	}
}
