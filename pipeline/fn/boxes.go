package fn

// The targets' functional ops: sanitize, convert and clamp a job's
// boxes and keypoints (the classes are pipeline/ops' boxes.go).

import (
	"github.com/stoker-dev/stoker/pipeline/targets"
)

var (
	// SanitizeBoxes: a job's targets lose their degenerate boxes.
	SanitizeBoxes = define(Def{name: "sanitize_bounding_boxes", args: []arg{{"min_size", argFloat, 0, 1}, {"min_area", argFloat, 1, 1}},
		Role: TargetsInstances, Instances: func(t *targets.Targets, w, h int, st *Step) (int, int, error) {
			t.Sanitize(w, h, st.F[0], st.F[1])
			return w, h, nil
		}})
	// ConvertBoxFormat: a job's target boxes, XYXY until then,
	// delivered in the format I[0] (a targets.BoxFormat).
	ConvertBoxFormat = define(Def{name: "convert_bounding_box_format", args: []arg{{"new_format", argBoxFormat, 0, 1}},
		Role: TargetsInstances, Instances: func(t *targets.Targets, w, h int, st *Step) (int, int, error) {
			targets.ConvertBoxes(t.Boxes, targets.BoxFormat(st.I[0]))
			t.Format = targets.BoxFormat(st.I[0])
			return w, h, nil
		}})
	// ClampBoxes is ClampBoundingBoxes' step: the boxes clamped in
	// their format (targets.ClampBoxesAs).
	ClampBoxes = define(Def{name: "clamp_bounding_boxes", Role: TargetsInstances,
		Instances: func(t *targets.Targets, w, h int, _ *Step) (int, int, error) {
			targets.ClampBoxesAs(t.Boxes, t.Format, w, h)
			return w, h, nil
		}})
	// ClampKeypoints is ClampKeyPoints': the keypoints clamped
	// (targets.ClampPoints); a dataset without keypoints is left, as
	// torchvision passes it through.
	ClampKeypoints = define(Def{name: "clamp_keypoints", Role: TargetsInstances,
		Instances: func(t *targets.Targets, w, h int, _ *Step) (int, int, error) {
			targets.ClampPoints(t.Points, w, h)
			return w, h, nil
		}})
	// SanitizeKeypoints is SanitizeKeyPoints': every instance with a
	// point off the canvas dropped whole (Targets.SanitizePoints).
	SanitizeKeypoints = define(Def{name: "sanitize_keypoints", Role: TargetsInstances,
		Instances: func(t *targets.Targets, w, h int, _ *Step) (int, int, error) { return w, h, t.SanitizePoints(w, h) }})
)
