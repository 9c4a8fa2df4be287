package pipeline

import (
	"bytes"
	"fmt"
	"image"

	"github.com/disintegration/imaging"
	"github.com/stoker-dev/stoker/pipeline/errs"
	"github.com/stoker-dev/stoker/pipeline/transform"
	_ "golang.org/x/image/webp"
) // registers WebP with image.Decode, as torchvision reads .webp

// decodeRef is the reference path: it decodes with Go's image decoders and
// follows torchvision's ops step by step: the crop (resized_crop) or the
// whole image (resize, then the crop of it) resampled by torch's uint8
// kernels (resampleTorch: integer sums after a weight setup that fuses no
// multiply-add, so the same bytes on every machine), then flips and packs.
// It allocates per image; the fast path is tested against it. Images other
// than JPEG, PNG and WebP, and CMYK JPEGs, take this path in every build,
// and all images without cgo. Its WebP decoder (golang.org/x/image/webp)
// replicates chroma where libwebp, and so torchvision, interpolates it: a
// few levels apart on lossy files.
func decodeRef(data []byte, p *transform.SamplePlan, layout transform.Layout, out []byte) error {
	return decodeRefViews(data, []transform.SamplePlan{*p}, layout, out, []int{0})
}

// decodeRefViews is decodeRef of several views of one image: decoded
// once, each plan's view resampled from it into out at offs[v].
func decodeRefViews(data []byte, ps []transform.SamplePlan, layout transform.Layout, out []byte, offs []int) error {
	src, err := imaging.Decode(bytes.NewReader(data))
	if err != nil {
		return fmt.Errorf("%w: %v", errs.Corrupt, err)
	}
	for v := range ps {
		p := &ps[v]
		if b := src.Bounds(); b.Dx() != p.SrcW || b.Dy() != p.SrcH {
			return fmt.Errorf("%w: decoded size %dx%d differs from the header's %dx%d", errs.Corrupt, b.Dx(), b.Dy(), p.SrcW, p.SrcH)
		}
		resampleRef(src, p, layout, out[offs[v]:][:3*p.OutW*p.OutH])
	}
	return nil
}

// resampleRef is the reference path's geometry: the plan's crop and resize
// of the decoded image src, by torch's kernels on the crop's pixels
// (resized_crop) or the whole image's (resize, then the crop of it),
// flipped and packed into out.
func resampleRef(src image.Image, p *transform.SamplePlan, layout transform.Layout, out []byte) {
	var img *image.NRGBA
	if p.Geom == transform.CropResize {
		img = imaging.Crop(src, image.Rect(p.CX, p.CY, p.CX+p.CW, p.CY+p.CH).Add(src.Bounds().Min))
	} else {
		img = imaging.Clone(src)
	}
	resampleTorch(img, p, layout, out)
}

// packNRGBA writes an image's RGB (alpha dropped, as PIL's convert("RGB")
// does) into out in the given layout.
func packNRGBA(img *image.NRGBA, layout transform.Layout, out []byte) {
	w, h := img.Rect.Dx(), img.Rect.Dy()
	plane := w * h
	for y := 0; y < h; y++ {
		row := img.Pix[y*img.Stride : y*img.Stride+4*w]
		for x := 0; x < w; x++ {
			r, g, b := row[4*x], row[4*x+1], row[4*x+2]
			if layout == transform.HWC {
				o := 3 * (y*w + x)
				out[o], out[o+1], out[o+2] = r, g, b
			} else {
				o := y*w + x
				out[o], out[plane+o], out[2*plane+o] = r, g, b
			}
		}
	}
}
