package server

import (
	"context"
	"strings"
	"testing"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	"github.com/stoker-dev/stoker/pipeline/targets"
	pb "github.com/stoker-dev/stoker/proto/stoker/v1"
)

// TestMaskFormatAnyTopology: "overlap_mask" with mask_ratio 3 and
// mask_overlap false gives each sample's targets in the instances' order
// with K masks of W/3 x H/3 as bits after them (targets.MaskSize's
// bytes, some set); the same bytes on a lone server and over 3 verified
// peers (whose BatchTargets carry the ratio and the mode, checked against
// the job's), none quarantined.
func TestMaskFormatAnyTopology(t *testing.T) {
	no := false
	segMasksAnyTopology(t, 3, &no, func(n, i, k, ww, hh int, v []byte, at int) int {
		if int64(len(v)) != int64(at)+targets.MaskSize(ww, hh, k, 3, false) || k == 0 {
			t.Fatalf("%d peers: sample %d: %d instances on %dx%d, %d bytes", n, i, k, ww, hh, len(v))
		}
		set := 0
		for _, m := range v[at:] {
			set += btoi(m != 0)
		}
		return set
	})
}

// TestMaskFormatRefused: mask_ratio or mask_overlap without
// "overlap_mask", a mask_ratio past the transform's output (128x128
// here: its masks would have no pixels, as ultralytics' Format refuses
// it): refused at open, saying which.
func TestMaskFormatRefused(t *testing.T) {
	images, yaml := photosSegments(t)
	e := startServer(t, Config{Datasets: map[string]string{"seg": images}, Annotations: map[string]string{"seg": yaml}, Workers: 1})
	no := false
	for _, c := range []struct {
		name    string
		fields  []string
		ratio   uint32
		overlap *bool
		want    string
	}{
		{"ratio without the mask", []string{"boxes"}, 2, nil, `mask_ratio or mask_overlap without "overlap_mask"`},
		{"overlap without the mask", []string{"boxes"}, 0, &no, `mask_ratio or mask_overlap without "overlap_mask"`},
		{"ratio past the output", []string{"overlap_mask"}, 129, nil, "mask_ratio=129 downsamples the transform's 128x128 output to zero size; use mask_ratio <= 128"},
	} {
		job := smallJob("seg", 4)
		job.Job.Targets, job.Job.TargetFields = true, c.fields
		job.Job.MaskRatio, job.Job.MaskOverlap = c.ratio, c.overlap
		job.Job.Transform.Ops = []*pb.Op{namedOp("YOLOMosaic", numArg("imgsz", 64), numArg("p", 1))}
		ctx, cancel := context.WithTimeout(context.Background(), hangGuard)
		_, err := readEpoch(e.feedStream(t, ctx, job))
		cancel()
		if status.Code(err) != codes.InvalidArgument || !strings.Contains(err.Error(), c.want) {
			t.Errorf("%s: %v, want INVALID_ARGUMENT saying %q", c.name, err, c.want)
		}
	}
}
