package cvcase

import (
	"encoding/json"
	"fmt"

	"github.com/stoker-dev/stoker/pipeline/kernels/cv"
)

// Run runs c: its images and labels checked, then the kernel's own case
// (cv.RunCase, cv.CaseNames: resize, the warps, hsv, perspective,
// letterbox, the multi-image ones, the polygon masks), which reads its
// arguments from c.Args. A kernel's panic is the case's error.
func Run(c *Case) (res Result) {
	defer func() {
		if r := recover(); r != nil {
			res = Result{Error: fmt.Sprint("panic: ", r)}
		}
	}()
	in := cv.CaseIn{Args: func(v any) error {
		if len(c.Args) == 0 {
			return nil
		}
		if err := json.Unmarshal(c.Args, v); err != nil {
			return fmt.Errorf("%s's arguments: %w", c.Op, err)
		}
		return nil
	}}
	for _, im := range c.Images {
		p, err := im.planes()
		if err != nil {
			return Result{Error: err.Error()}
		}
		in.Images = append(in.Images, p)
	}
	for i := range c.Labels {
		l := c.Labels[i].instances()
		if err := l.Check(); err != nil {
			return Result{Error: err.Error()}
		}
		in.Labels = append(in.Labels, l)
	}
	out, err := cv.RunCase(c.Op, &in)
	if err != nil {
		return Result{Error: err.Error()}
	}
	res = Result{Matrix: out.Matrix, Ints: out.Ints, Mask: out.Mask}
	for _, p := range out.Images {
		res.Images = append(res.Images, Image{W: p.W, H: p.H, Pix: p.Pix[:3*p.W*p.H]})
	}
	if out.Labels != nil {
		res.Labels = labelsOf(*out.Labels)
	}
	return res
}
