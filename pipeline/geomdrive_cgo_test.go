//go:build cgo

package pipeline

import (
	"bufio"
	"bytes"
	"encoding/json"
	"fmt"
	"os"
	"testing"

	"github.com/stoker-dev/stoker/pipeline/det"
	opspkg "github.com/stoker-dev/stoker/pipeline/ops"
	"github.com/stoker-dev/stoker/pipeline/transform"
)

// The geometry driver of python/tests/test_parity_geometry.py: the test
// binary, run with STOKER_GEOMETRY_JOBS naming a JSON file of jobs, decodes
// each job's JPEG with an explicit geometry (torchvision.transforms.v2.
// functional's resized_crop, resize, center_crop and their arguments)
// instead of running the tests, and writes the samples (uint8 HWC, back to
// back) to STOKER_GEOMETRY_OUT and one JSON line per job to stdout. It is
// small on purpose: a `stoker ops` command will replace it.

func TestMain(m *testing.M) {
	if jobs := os.Getenv("STOKER_GEOMETRY_JOBS"); jobs != "" {
		if err := geomDrive(jobs, os.Getenv("STOKER_GEOMETRY_OUT")); err != nil {
			fmt.Fprintln(os.Stderr, "geometry driver:", err)
			os.Exit(2)
		}
		os.Exit(0)
	}
	os.Exit(m.Run())
}

// geomJob is one decode: Op is "resized_crop" (Top, Left, Height, Width,
// Size), "resize" (Size: [h, w], or [s] for the shorter side; Crop, when
// given, a center_crop after it), "center_crop" (Size) or "transform"
// (Ops, the pipeline's own, decoded for the sample Key{Seed, Index}; with
// WantCrop [top, left] the first index from Index whose RandomCrop is at
// that position: an explicit crop, F.crop's, as RandomCrop draws it).
// A field the job file has and geomJob (or an op) has not fails the
// driver: a renamed field is an error, not a default.
type geomJob struct {
	File          string   `json:"file"`
	Op            string   `json:"op"`
	Top           int      `json:"top"`
	Left          int      `json:"left"`
	Height        int      `json:"height"`
	Width         int      `json:"width"`
	Size          []int    `json:"size"`
	Crop          []int    `json:"crop"`
	Interpolation string   `json:"interpolation"`
	Antialias     bool     `json:"antialias"`
	Path          string   `json:"path"`    // "fast" (the default) or "ref"
	Scaling       string   `json:"scaling"` // "pow2" (the default), "any", "off"
	Ops           []geomOp `json:"ops"`
	Seed          uint64   `json:"seed"`
	Index         uint64   `json:"index"`
	WantCrop      []int    `json:"want_crop"`
}

// geomOp is a "transform" job's op: ops.Op's shared fields (Kind, Size),
// and Args, its own arguments (its interpolation and fill among them:
// Interp, NoAntialias, Fill), read into the typed struct of its kind.
type geomOp struct {
	opspkg.Op
	Args json.RawMessage
}

// geomArgs are the typed arguments of the geometry ops a job may have.
var geomArgs = map[opspkg.OpKind]func() any{
	transform.OpRandomResizedCrop: func() any { return new(transform.RRCArgs) },
	transform.OpResize:            func() any { return new(transform.ResizeArgs) },
	transform.OpPad:               func() any { return new(transform.PadArgs) },
	transform.OpRandomCrop:        func() any { return new(transform.RandomCropArgs) },
}

// op is g as an ops.Op, its Args typed.
func (g geomOp) op() (opspkg.Op, error) {
	op := g.Op
	if len(g.Args) == 0 {
		return op, nil
	}
	mk := geomArgs[op.Kind]
	if mk == nil {
		return op, fmt.Errorf("%s: the driver reads no arguments of it", op.Kind)
	}
	op.Args = mk()
	if err := strictJSON(g.Args, op.Args); err != nil {
		return op, fmt.Errorf("%s's arguments: %w", op.Kind, err)
	}
	return op, nil
}

// strictJSON decodes b into v, failing on a field v has not.
func strictJSON(b []byte, v any) error {
	dec := json.NewDecoder(bytes.NewReader(b))
	dec.DisallowUnknownFields()
	return dec.Decode(v)
}

// geomResult is the line written for each job.
type geomResult struct {
	H      int    `json:"h"`
	W      int    `json:"w"`
	ScaleM int    `json:"scale_m"` // the DCT scale in eighths (8: none)
	Error  string `json:"error,omitempty"`
	// A "transform" job's sample: its trace and index.
	Trace json.RawMessage `json:"trace,omitempty"`
	Index uint64          `json:"index,omitempty"`
}

func geomDrive(jobsPath, outPath string) error {
	b, err := os.ReadFile(jobsPath)
	if err != nil {
		return err
	}
	var jobs []geomJob
	if err := strictJSON(b, &jobs); err != nil {
		return err
	}
	f, err := os.Create(outPath)
	if err != nil {
		return err
	}
	defer f.Close()
	w := bufio.NewWriter(f)
	enc := json.NewEncoder(os.Stdout)
	decs := map[string]*Decoder{}
	for _, j := range jobs {
		key := j.Path + "/" + j.Scaling
		if decs[key] == nil {
			s := map[string]DCTScaling{"": ScalePow2, "pow2": ScalePow2, "any": ScaleAny, "off": ScaleOff}[j.Scaling]
			decs[key] = NewDecoder(WithDCTScaling(s), WithReference(j.Path == "ref"))
		}
		out, res := geomDecode(decs[key], j)
		if _, err := w.Write(out); err != nil {
			return err
		}
		if err := enc.Encode(res); err != nil {
			return err
		}
	}
	return w.Flush()
}

// geomDecode runs one job: the plan from a Transform of the job's op (a
// RandomResizedCrop's, its box then replaced by the job's), decoded.
func geomDecode(d *Decoder, j geomJob) ([]byte, geomResult) {
	fail := func(err error) ([]byte, geomResult) { return nil, geomResult{Error: err.Error()} }
	data, err := os.ReadFile(j.File)
	if err != nil {
		return fail(err)
	}
	interp, err := transform.ParseInterpolation(j.Interpolation)
	if err != nil {
		return fail(err)
	}
	size := func(s []int) [2]int {
		var v [2]int
		copy(v[:], s)
		return v
	}
	if j.Op == "transform" {
		return geomTransform(d, j, data)
	}
	rs := opspkg.Resampling{Interp: interp, NoAntialias: !j.Antialias}
	var ops []opspkg.Op
	switch j.Op {
	case "resized_crop":
		ops = []opspkg.Op{{Kind: transform.OpRandomResizedCrop, Size: size(j.Size), Args: &transform.RRCArgs{Resampling: rs}}}
	case "resize":
		ops = []opspkg.Op{{Kind: transform.OpResize, Size: size(j.Size), Args: &transform.ResizeArgs{Resampling: rs}}}
		if len(j.Crop) > 0 {
			ops = append(ops, opspkg.Op{Kind: transform.OpCenterCrop, Size: size(j.Crop)})
		}
	case "center_crop": // no resampling of its own
		ops = []opspkg.Op{{Kind: transform.OpCenterCrop, Size: size(j.Size)}}
	default:
		return fail(fmt.Errorf("unknown op %q", j.Op))
	}
	t, err := transform.NewTransform(transform.HWC, ops...)
	if err != nil {
		return fail(err)
	}
	hd, err := parseHeader(data)
	if err != nil {
		return fail(err)
	}
	p, err := geomPlan(t, hd.w, hd.h, det.Key{})
	if err != nil {
		return fail(err)
	}
	if j.Op == "resized_crop" {
		p.CX, p.CY, p.CW, p.CH = j.Left, j.Top, j.Width, j.Height
		if p.CX < 0 || p.CY < 0 || p.CW < 1 || p.CH < 1 || p.CX+p.CW > hd.w || p.CY+p.CH > hd.h {
			return fail(fmt.Errorf("box %+v outside the %dx%d image", j, hd.w, hd.h))
		}
	}
	out := make([]byte, 3*p.OutW*p.OutH)
	if p.Padded {
		// A center_crop larger than the image: the Decoder pads it (no
		// box of the job's to put in: its geometry is the transform's).
		if err := d.Decode(data, t, det.Key{}, out); err != nil {
			return fail(err)
		}
	} else if err := d.decodeGuarded(data, &hd, []transform.SamplePlan{p}, transform.HWC, out, []int{0}); err != nil {
		return fail(err)
	}
	res := geomResult{H: p.OutH, W: p.OutW, ScaleM: 8}
	if j.Path != "ref" && hd.comps != 4 {
		res.ScaleM = d.fast.stats().scaleM
	}
	return out, res
}

// geomTransform runs a "transform" job: the job's ops, as the server would
// run them, for one sample, with the trace that replays it.
func geomTransform(d *Decoder, j geomJob, data []byte) ([]byte, geomResult) {
	fail := func(err error) ([]byte, geomResult) { return nil, geomResult{Error: err.Error()} }
	ops := make([]opspkg.Op, len(j.Ops))
	for i, g := range j.Ops {
		op, err := g.op()
		if err != nil {
			return fail(err)
		}
		ops[i] = op
	}
	t, err := transform.NewTransform(transform.HWC, ops...)
	if err != nil {
		return fail(err)
	}
	hd, err := parseHeader(data)
	if err != nil {
		return fail(err)
	}
	k := det.Key{Seed: j.Seed, Index: j.Index}
	p, err := geomPlan(t, hd.w, hd.h, k)
	if err != nil {
		return fail(err)
	}
	if len(j.WantCrop) == 2 {
		for ; p.RCTop != j.WantCrop[0] || p.RCLeft != j.WantCrop[1]; p, err = geomPlan(t, hd.w, hd.h, k) {
			if k.Index++; err != nil || k.Index > j.Index+1_000_000 {
				return fail(fmt.Errorf("no RandomCrop at %v in a million samples (%v)", j.WantCrop, err))
			}
		}
	}
	out := make([]byte, t.SampleBytes())
	if err := d.Decode(data, t, k, out); err != nil {
		return fail(err)
	}
	tr, err := t.Trace(hd.w, hd.h, k)
	if err != nil {
		return fail(err)
	}
	return out, geomResult{H: p.OutH, W: p.OutW, ScaleM: 8, Trace: tr, Index: k.Index}
}
