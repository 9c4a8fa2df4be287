package main

import (
	"bufio"
	"encoding/json"
	"flag"
	"fmt"
	"io"
	"os"

	"github.com/stoker-dev/stoker/pipeline"
)

// runOps is `stoker ops apply`: the ops after the geometry, by themselves,
// on pixels given on stdin, for the parity tests and for anyone who wants
// to see what an op does without a server.
func runOps(args []string) error {
	fs := flag.NewFlagSet("ops", flag.ContinueOnError)
	fs.Usage = func() {
		fmt.Fprint(fs.Output(), `usage: stoker ops apply < cases.jsonl > results.jsonl

Runs the functional ops of a trace (torchvision.transforms.v2.functional's
names and arguments, as stoker.Loader(trace=True) reports them) on images
given on stdin, with no decode and no randomness. Each input line is
  {"w": W, "h": H, "pix": "<base64 of 3*H*W uint8, CHW>",
   "trace": [["adjust_hue", {"hue_factor": 0.1}], ...]}
and each output line {"pix": "<base64>"} or {"error": "..."}, in order.
`)
	}
	if err := fs.Parse(args); err != nil {
		return err
	}
	if fs.NArg() != 1 || fs.Arg(0) != "apply" {
		fs.Usage()
		return usageError{fmt.Errorf("ops: want the subcommand apply")}
	}
	return opsApply(os.Stdin, os.Stdout)
}

// opsCase is one input line of stoker ops apply.
type opsCase struct {
	W, H  int
	Pix   []byte
	Trace json.RawMessage
}

type opsResult struct {
	Pix   []byte `json:"pix,omitempty"`
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
		steps, err := pipeline.ParseTrace(c.Trace)
		if err == nil {
			err = pipeline.ApplyTrace(c.Pix, c.W, c.H, steps)
		}
		if err != nil {
			r.Error = err.Error()
		} else {
			r.Pix = c.Pix
		}
		if err := enc.Encode(&r); err != nil {
			return err
		}
	}
	return w.Flush()
}
