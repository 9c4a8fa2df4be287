package main

import (
	"bufio"
	"encoding/json"
	"fmt"
	"io"

	"github.com/stoker-dev/stoker/pipeline/kernels/cv/cvcase"
)

// opsCV is `stoker ops cv`: the YOLO family's kernels (pipeline/kernels/cv)
// on cases given on stdin, one JSON object a line (cvcase.Case), each
// answered by one line (cvcase.Result): what python/tests/
// test_yolo_kernels.py runs against ultralytics.
func opsCV(in io.Reader, out io.Writer) error {
	dec := json.NewDecoder(bufio.NewReader(in))
	w := bufio.NewWriter(out)
	enc := json.NewEncoder(w)
	for {
		var c cvcase.Case
		if err := dec.Decode(&c); err == io.EOF {
			break
		} else if err != nil {
			return fmt.Errorf("ops cv: reading a case: %w", err)
		}
		r := cvcase.Run(&c)
		if err := enc.Encode(&r); err != nil {
			return err
		}
	}
	return w.Flush()
}
