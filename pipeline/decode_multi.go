package pipeline

import (
	"fmt"

	"github.com/stoker-dev/stoker/pipeline/dataset"
	"github.com/stoker-dev/stoker/pipeline/det"
	"github.com/stoker-dev/stoker/pipeline/errs"
	"github.com/stoker-dev/stoker/pipeline/kernels"
	"github.com/stoker-dev/stoker/pipeline/kernels/cv"
	"github.com/stoker-dev/stoker/pipeline/ops"
	"github.com/stoker-dev/stoker/pipeline/transform"
)

// The multi-image geometry: a sample made of its own image and partners
// read from the dataset (op_mosaic.go). The executor reads the
// partners' bytes in the sample's lease (readPartners) and hands them to
// its Decoder with the sample (Sample.Partners). The decode plans the whole sample first,
// from the files' headers and the labels (transform.PlanMulti), then
// the family makes its pixels from that plan (MultiDraw.Make), the
// Decoder loading each image for it (loader): whole, at its own size,
// resized as ultralytics' load_image does. What a worker holds
// for it is bounded: at most n-1 partner files, each within the dataset's
// file size cap (as any sample's bytes), one image decoded whole at a time
// within the pixel budget (as any sample's decode), and the n resized
// images (each at most imgsz a side) and the canvas (2*imgsz a side), all
// reused from sample to sample.

// multiState is a Decoder's for the multi-image geometry: its scratch,
// reused from sample to sample.
type multiState struct {
	// full is one image decoded whole; imgs the images load_image-sized,
	// the sample's own first; plan and off the whole decode's.
	full []byte
	imgs [][]byte
	held []cv.PartnerRef // the partner cache's images loaded and held (loadImage)
	plan [1]transform.SamplePlan
	off  [1]int
	// size is the Decoder's wholeSize, made once.
	size func([]byte) (int, int, error)
	// made is the buffers the family's making reuses (MultiDraw.Make);
	// what the last sample drew is its plan's (ViewPlan.Multi).
	made transform.MultiScratch
}

// loader is the Decoder as a multi-image sample's transform.Loader.
type loader struct{ d *Decoder }

func (l loader) LoadImage(data []byte, j, side int) (kernels.Planes, error) {
	return l.d.loadImage(data, j, side)
}
func (l loader) Release()      { l.d.release() }
func (l loader) Stopped() bool { return l.d.ops.Stopped() }

// readPartners reads the partners idx of a sample of ds (its
// Transform's AppendPartners) into bufs (reused), as the executor does in
// the sample's lease: nil, nil when it draws none. A partner that cannot be read fails the sample,
// naming the partner (its store's fault stays the store's: the error
// wraps it).
func readPartners(ds dataset.Dataset, idx []int, bufs *[][]byte) ([][]byte, error) {
	if idx == nil {
		return nil, nil
	}
	for len(*bufs) < len(idx) {
		*bufs = append(*bufs, nil)
	}
	out := (*bufs)[:len(idx)]
	for j, p := range idx {
		b, err := ds.Read(p, out[j])
		if err != nil {
			return nil, fmt.Errorf("mosaic partner %d of %d (sample %d, %s): %w", j+1, len(idx), p, partnerName(ds, p), err)
		}
		out[j] = b
	}
	return out, nil
}

// partnerHints are the partners the samples indices (of copies, nil:
// none) of epoch will read, in the order they will be read, for a
// Prefetcher: nil when none reads any (t has no multi-image op then).
func partnerHints(t *transform.Transform, seed, epoch uint64, indices []int64, copies []uint32, size int) []int64 {
	var out []int64
	var buf []int
	for i, idx := range indices {
		k := det.Key{Seed: seed, Epoch: epoch, Index: uint64(idx)}
		if copies != nil {
			k.Copy = uint64(copies[i])
		}
		buf = t.AppendPartners(buf, k, size)
		for _, p := range buf {
			out = append(out, int64(p))
		}
	}
	return out
}

// partnerName is sample i's name in ds, for a partner's error.
func partnerName(ds dataset.Dataset, i int) string {
	if n, ok := ds.(interface{ Name(int) string }); ok {
		return n.Name(i)
	}
	return fmt.Sprintf("index %d", i)
}

// wholeHeader is data's header, for a decode of it whole: an error where
// it is over the pixel budget.
func (d *Decoder) wholeHeader(data []byte) (header, error) {
	hd, err := parseHeader(data)
	if err != nil {
		return header{}, err
	}
	if px := int64(hd.w) * int64(hd.h); px > d.opts.pixelBudget {
		return header{}, fmt.Errorf("%w: %dx%d is %d pixels, over the budget of %d", errs.TooLarge, hd.w, hd.h, px, d.opts.pixelBudget)
	}
	return hd, nil
}

// decodeWholeInto decodes data (its header hd) whole into dst, its
// 3*w*h bytes.
func (d *Decoder) decodeWholeInto(data []byte, hd *header, dst []byte) (kernels.Planes, error) {
	m := &d.multi
	m.plan[0] = transform.SamplePlan{Geom: transform.CropResize, SrcW: hd.w, SrcH: hd.h, CW: hd.w, CH: hd.h, OutW: hd.w, OutH: hd.h,
		Interp: transform.InterpBilinear, Antialias: true, Exact: true}
	if err := d.decodeGuarded(data, hd, m.plan[:], transform.CHW, dst, m.off[:]); err != nil {
		return kernels.Planes{}, err
	}
	if d.ops.Stopped() {
		return kernels.Planes{}, ops.ErrAbandoned
	}
	return kernels.Planes{Pix: dst, W: hd.w, H: hd.h}, nil
}

// loadImage is ultralytics' load_image of one image: decoded whole, then
// resized (cv2.INTER_LINEAR) so that its long side is imgsz, into
// image j of the scratch; with a PartnerCache, taken from it when there
// (the same bytes: it is keyed by the file's), else made in memory it
// hands out (Alloc) and stored there, held either way until the
// mosaic's release (m.held). An image already imgsz on its long side
// (load_image's resize a copy) is decoded into its place directly. The
// image is read only.
func (d *Decoder) loadImage(data []byte, j, imgsz int) (kernels.Planes, error) {
	m := &d.multi
	for len(m.imgs) <= j {
		m.imgs = append(m.imgs, nil)
	}
	pc := d.opts.partners
	var key cv.PartnerKey
	if pc != nil {
		var ref uint64
		if d.opts.reference {
			ref = 1 << 63
		}
		key = pc.Key(data, imgsz, uint64(d.opts.pixelBudget)|ref)
		if img, r, ok := pc.Get(key); ok {
			m.held = append(m.held, r)
			return img, nil
		}
	}
	hd, err := d.wholeHeader(data)
	if err != nil {
		return kernels.Planes{}, err
	}
	w, h := cv.LoadSize(hd.w, hd.h, imgsz)
	n := 3 * w * h
	var pix []byte
	if pc != nil {
		pix = pc.Alloc(n) // the cache's from its Put on
	} else {
		if cap(m.imgs[j]) < n {
			m.imgs[j] = make([]byte, n)
		}
		pix = m.imgs[j][:n]
	}
	var dst kernels.Planes
	if w == hd.w && h == hd.h {
		if dst, err = d.decodeWholeInto(data, &hd, pix); err != nil {
			return kernels.Planes{}, err
		}
	} else {
		if cap(m.full) < 3*hd.w*hd.h {
			m.full = make([]byte, 3*hd.w*hd.h)
		}
		src, err := d.decodeWholeInto(data, &hd, m.full[:3*hd.w*hd.h])
		if err != nil {
			return kernels.Planes{}, err
		}
		dst = kernels.Planes{Pix: pix, W: w, H: h}
		cv.ResizeLinear(dst, src)
	}
	if pc != nil {
		m.held = append(m.held, pc.Put(key, dst))
	}
	return dst, nil
}

// release ends the Decoder's holds on the partner cache's images
// (loadImage's), once the mosaic that read them is made.
func (d *Decoder) release() {
	m := &d.multi
	for i, r := range m.held {
		d.opts.partners.Release(r)
		m.held[i] = cv.PartnerRef{}
	}
	m.held = m.held[:0]
}

// decodeMulti is decodeAt for a sample of several images (its
// multi-image op applies at k's epoch): s holds its file and its
// partners', in AppendPartners' order. Everything the sample
// undergoes is planned first (transform.PlanMulti: the images' places
// from their headers, what the CopyPastes and the CutMix take from the
// labels), then its pixels are made from that plan.
func (d *Decoder) decodeMulti(s Sample, t *transform.Transform, k det.Key, out []byte, offs []int) error {
	m := &d.multi
	if m.size == nil {
		m.size = d.wholeSize
	}
	src := transform.MultiSource{Data: s.Data, Partners: s.Partners, Files: s.PartnerFiles, Size: m.size,
		Labels: d.boxSrc, Contiguous: d.targets.ContiguousLabels}
	if err := t.PlanMulti(&d.plan, k, src); err != nil {
		return err
	}
	vp := &d.plan.Views[0]
	at, md := d.plan.Transform(), vp.Multi
	w, h := vp.Geom.OutW, vp.Geom.OutH
	np := 3 * w * h
	// Planes of bytes out as they are made: made in out itself (no copy).
	var img kernels.Planes
	if d.plan.Direct {
		img = kernels.Planes{Pix: out[offs[0]:][:np], W: w, H: h}
	} else {
		if cap(d.pix) < np {
			d.pix = make([]byte, np)
		}
		img = kernels.Planes{Pix: d.pix[:np], W: w, H: h}
	}
	m.made.FullCanvas = fullCanvas
	if err := md.Make(img, loader{d}, &m.made); err != nil {
		return err
	}
	d.plans = append(d.plans[:0], vp.Geom)
	_, _, err := d.finishView(at, vp, img.Pix, transform.CHW, d.plan.Direct, out[offs[0]:][:at.SampleBytes()], w, h)
	return err
}

// wholeSize is the size data's header declares, for a decode of it
// whole: an error where it is over the pixel budget.
func (d *Decoder) wholeSize(data []byte) (int, int, error) {
	hd, err := d.wholeHeader(data)
	return hd.w, hd.h, err
}

// fullCanvas makes every Decoder's multi-image making build a warped
// mosaic's whole canvas (MultiScratch.FullCanvas): the tests' reference
// for the same bytes.
var fullCanvas bool
