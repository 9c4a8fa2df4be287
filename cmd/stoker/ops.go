package main

import (
	"bufio"
	"encoding/json"
	"flag"
	"fmt"
	"io"
	"os"
	"strings"

	"github.com/stoker-dev/stoker/internal/helptext"
	"github.com/stoker-dev/stoker/internal/opspec"
	"github.com/stoker-dev/stoker/pipeline/det"
	"github.com/stoker-dev/stoker/pipeline/kernels/cv"
	"github.com/stoker-dev/stoker/pipeline/ops"
	"github.com/stoker-dev/stoker/pipeline/transform"
	stokerv1 "github.com/stoker-dev/stoker/proto/stoker/v1"
	"google.golang.org/protobuf/encoding/protojson"
)

// runOps is `stoker ops apply`: the ops after the geometry, by themselves,
// on pixels given on stdin, for the parity tests and for anyone who wants
// to see what an op does without a server.
func runOps(args []string) error {
	fs := flag.NewFlagSet("ops", flag.ContinueOnError)
	fs.Usage = func() {
		fmt.Fprint(fs.Output(), `usage: stoker ops apply|draw|list|cv ARGS

Runs, draws or lists the ops outside a server: the parity tests' and a curious user's view of them.

       stoker ops apply < cases.jsonl > results.jsonl
       stoker ops draw --spec JSON [--source WxH] [--boxes JSON] [--n N] [--seed S] [--epoch E]
       stoker ops list [--json]
       stoker ops cv < cases.jsonl > results.jsonl

apply runs the functional ops of a trace (torchvision.transforms.v2.functional's
names and arguments, as stoker.Loader(trace=True) reports them) on images
given on stdin, with no decode and no randomness. Each input line is
  {"w": W, "h": H, "pix": "<base64 of 3*H*W uint8, CHW>",
   "trace": [["adjust_hue", {"hue_factor": 0.1}], ...]}
and each output line {"pix": "<base64>"} or {"error": "..."}, in order.

list prints the ops this server knows, from its op registry: each op's
place (geometry, after, container), what it does to a job's targets, and
its arguments with their defaults (--json: the schemas the Python client's
classes are generated from and checked against).

draw prints the traces a transform draws for samples 0..N-1 of an epoch
(one JSON list a line), without decoding anything: what the sampling tests
count. --spec is a TransformSpec in protobuf's JSON ({"preset": "deit"} or
{"ops": [...]}); every sample is a --source image, with the --boxes given
(a RandomIoUCrop, a YOLOCopyPaste or a YOLOCutMix draws against them), and
a multi-image op's partners are drawn among the N samples, each such an
image.

`+strings.Join(helptext.Wrap("cv runs the YOLO family's kernels with ultralytics' semantics, by the names "+
			"each kernel's file registers ("+strings.Join(cv.CaseNames(), ", ")+"), with the arguments given, "+
			"on the cases on stdin, a JSON object a line (see pipeline/kernels/cv/cvcase), for the parity tests "+
			"against ultralytics.", 75), "\n")+`

Flags of draw:
`)
		fs.PrintDefaults()
	}
	spec := fs.String("spec", "", "the transform: a TransformSpec as JSON")
	source := fs.String("source", "500x375", "the source image's size, WxH")
	boxes := fs.String("boxes", "", "the source's boxes, XYXY in its pixels: a JSON list of [x1, y1, x2, y2]")
	n := fs.Int("n", 1000, "samples to draw, 1..10000000")
	seed := fs.Uint64("seed", 0, "the job's seed")
	epoch := fs.Uint64("epoch", 0, "the epoch")
	if len(args) == 0 {
		fs.Usage()
		return usageError{fmt.Errorf("ops: want the subcommand apply, draw, list or cv")}
	}
	switch args[0] {
	case "apply":
		if len(args) > 1 {
			return usageError{fmt.Errorf("ops apply takes no arguments; it reads stdin")}
		}
		return opsApply(os.Stdin, os.Stdout)
	case "list":
		lf := flag.NewFlagSet("ops list", flag.ContinueOnError)
		asJSON := lf.Bool("json", false, "print the schemas as JSON")
		if err := lf.Parse(args[1:]); err != nil {
			return usageError{err}
		}
		if lf.NArg() > 0 {
			return usageError{fmt.Errorf("ops list takes no arguments, got %q", lf.Args())}
		}
		return opsList(*asJSON, os.Stdout)
	case "cv":
		if len(args) > 1 {
			return usageError{fmt.Errorf("ops cv takes no arguments; it reads stdin")}
		}
		return opsCV(os.Stdin, os.Stdout)
	case "draw":
		if err := fs.Parse(args[1:]); err != nil {
			return err
		}
		return opsDraw(*spec, *source, *boxes, *n, *seed, *epoch, os.Stdout)
	case "-h", "-help", "--help":
		fs.Usage()
		return flag.ErrHelp
	}
	fs.Usage()
	return usageError{fmt.Errorf("ops: unknown subcommand %q: want apply, draw, list or cv", args[0])}
}

// opsDraw prints n samples' traces of the transform spec (protojson).
func opsDraw(spec, source, boxes string, n int, seed, epoch uint64, out io.Writer) error {
	var ts stokerv1.TransformSpec
	if err := protojson.Unmarshal([]byte(spec), &ts); err != nil {
		return usageError{fmt.Errorf("ops draw --spec: %v", err)}
	}
	t, err := opspec.Transform(&ts, transform.CHW)
	if err != nil {
		return usageError{fmt.Errorf("ops draw --spec: %w", err)}
	}
	var w, h int
	if _, err := fmt.Sscanf(source, "%dx%d", &w, &h); err != nil || w < 1 || h < 1 || w > 1<<16 || h > 1<<16 {
		return usageError{fmt.Errorf("ops draw --source %q: want WxH, each 1..65536", source)}
	}
	if n < 1 || n > 10_000_000 {
		return usageError{fmt.Errorf("ops draw --n %d: want 1..10000000", n)}
	}
	var bx [][4]float32
	if boxes != "" {
		if err := json.Unmarshal([]byte(boxes), &bx); err != nil || bx == nil || len(bx) > 10000 {
			return usageError{fmt.Errorf("ops draw --boxes: want a JSON list of at most 10000 [x1, y1, x2, y2] (%v)", err)}
		}
	}
	bw := bufio.NewWriter(out)
	for i := range n {
		js, err := t.TraceSet(w, h, det.Key{Seed: seed, Epoch: epoch, Index: uint64(i)}, bx, n)
		if err != nil {
			return err
		}
		bw.Write(js)
		bw.WriteByte('\n')
	}
	return bw.Flush()
}

// opsCase is one input line of stoker ops apply.
type opsCase struct {
	W, H  int
	Pix   []byte
	Trace json.RawMessage
}

type opsResult struct {
	Pix   []byte `json:"pix,omitempty"`
	W     int    `json:"w,omitempty"` // a trace that changes the size (rotate's expand): the output's
	H     int    `json:"h,omitempty"`
	Error string `json:"error,omitempty"`
}

func opsApply(in io.Reader, out io.Writer) error {
	dec := json.NewDecoder(bufio.NewReader(in))
	w := bufio.NewWriter(out)
	enc := json.NewEncoder(w)
	for {
		var c opsCase
		if err := dec.Decode(&c); err == io.EOF {
			break
		} else if err != nil {
			return fmt.Errorf("ops apply: reading a case: %w", err)
		}
		var r opsResult
		steps, err := transform.ParseTrace(c.Trace)
		var pix []byte
		var ow, oh int
		if err == nil {
			pix, ow, oh, err = ops.ApplyTraceSized(c.Pix, c.W, c.H, steps)
		}
		if err != nil {
			r.Error = err.Error()
		} else {
			r.Pix = pix
			if ow != c.W || oh != c.H {
				r.W, r.H = ow, oh
			}
		}
		if err := enc.Encode(&r); err != nil {
			return err
		}
	}
	return w.Flush()
}

// opsList prints the op registry's schemas: a line an op (its name, place,
// targets and arguments with their defaults) and its doc, or JSON.
func opsList(asJSON bool, out io.Writer) error {
	ops := ops.OpSchemas()
	if asJSON {
		b, err := json.MarshalIndent(ops, "", "  ")
		if err != nil {
			return err
		}
		_, err = fmt.Fprintf(out, "%s\n", b)
		return err
	}
	w := bufio.NewWriter(out)
	for _, op := range ops {
		var args []string
		for _, p := range op.Params {
			a := p.Name
			if p.KeywordOnly {
				a = "*" + a
			}
			if !p.Required {
				a += "=" + p.Default
			}
			args = append(args, a)
		}
		named := ""
		if op.Named {
			named = ", named"
		}
		fmt.Fprintf(w, "%s(%s)\n    %s; targets: %s%s. %s\n", op.Name, strings.Join(args, ", "), op.Place, op.Targets, named, op.Doc)
	}
	return w.Flush()
}
