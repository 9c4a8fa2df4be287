package server

import (
	"context"
	"encoding/binary"
	"strings"
	"testing"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	"github.com/stoker-dev/stoker/internal/opspec"
	pb "github.com/stoker-dev/stoker/proto/stoker/v1"
)

// detrOps is the DETR family's recipe (the detr preset's ops) resized to
// size x size.
func detrOps(size uint32) []*pb.Op {
	sanitize := opspec.Wire("SanitizeBoundingBoxes")
	return []*pb.Op{
		opspec.Wire("RandomPhotometricDistort"),
		opspec.Wire("RandomZoomOut"),
		opspec.Wire("RandomIoUCrop"),
		sanitize, flipOp(nil),
		opspec.Wire("Resize", "size", []int{int(size), int(size)}),
		sanitize,
	}
}

// stopped are the trace's step names of the ops the DETR family's
// stop_epoch switches off.
var stopped = []string{`"pad"`, `"iou_crop"`, `"adjust_brightness"`, `"adjust_contrast"`, `"adjust_saturation"`, `"adjust_hue"`, `"permute_channels"`}

// TestStopEpochTwoEpochs: a job with stop_epoch 4 run over epochs 3 and 4
// on one stream: epoch 3's traces have RandomPhotometricDistort's,
// RandomZoomOut's and RandomIoUCrop's steps (some samples), epoch 4's none
// (every sample sanitized, resized, maybe flipped), each sample's targets
// on the 48x48 canvas; and epoch 4 is the same bytes over 3 verified peers
// (the job forwarded with its stop) as on the lone server.
func TestStopEpochTwoEpochs(t *testing.T) {
	ann, counts := photosCOCO(t)
	cfg := func() Config {
		return Config{Datasets: map[string]string{"det": "../testdata/photos"}, Annotations: map[string]string{"det": ann}, Workers: 1}
	}
	open := smallJob("det", 8)
	open.Job.Targets, open.Job.Trace = true, true
	open.Job.Transform.Ops = detrOps(48)
	open.Job.StopEpoch = 4
	open.Epoch, open.Epochs = 3, 2
	var alone epoch
	for _, n := range []int{0, 3} {
		e := topology(t, cfg, n)
		ctx, cancel := context.WithTimeout(context.Background(), hangGuard)
		stream := e.feedStream(t, ctx, open)
		for ep := uint64(3); ep < 5; ep++ {
			got, err := readStreamEpoch(stream)
			if err != nil {
				t.Fatal(err)
			}
			if got.info.GetEpoch() != ep {
				t.Fatalf("%d peers: epoch %d, want %d", n, got.info.GetEpoch(), ep)
			}
			seen, off := 0, 0
			for _, b := range got.batches {
				for i, v := range b.hdr.GetFields()[0].GetValues() {
					if le := binary.LittleEndian; le.Uint32(v) != 48 || le.Uint32(v[4:]) != 48 {
						t.Errorf("%d peers, epoch %d: targets' canvas % x", n, ep, v[:8])
					}
					tr := b.hdr.GetTraces()[i]
					for _, s := range stopped {
						if strings.Contains(tr, s) {
							off++
							if ep == 4 {
								t.Errorf("%d peers, epoch 4 (the stop): a sample drew %s: %s", n, s, tr)
							}
						}
					}
					if ep == 4 && !strings.HasPrefix(tr, `[["sanitize_bounding_boxes"`) {
						t.Errorf("%d peers, epoch 4: trace %s", n, tr)
					}
					seen++
				}
			}
			if seen != len(counts) {
				t.Errorf("%d peers, epoch %d: %d samples, want %d", n, ep, seen, len(counts))
			}
			if ep == 3 && off == 0 {
				t.Errorf("%d peers, epoch 3 (before the stop): no sample drew a zoom, an IoU crop or a photometric distortion", n)
			}
			if ep == 4 && n == 0 {
				alone = got
			} else if ep == 4 {
				sameAsAlone(t, e, n, got, alone)
			}
		}
		cancel()
	}
}

// TestStopEpochRefused: a stop_epoch the transform cannot take is refused
// at open, saying why.
func TestStopEpochRefused(t *testing.T) {
	ann, _ := photosCOCO(t)
	e := startServer(t, Config{Datasets: map[string]string{"det": "../testdata/photos"}, Annotations: map[string]string{"det": ann}, Workers: 1})
	for _, c := range []struct {
		name  string
		epoch uint64
		ops   []string
		want  string
	}{
		{"ops without epoch", 0, []string{"RandomZoomOut"}, "stop_ops RandomZoomOut without stop_epoch"},
		{"unknown op", 3, []string{"RandomZoomOut", "Mosaic"}, `"Mosaic" is not an op of the transform`},
		{"the resize", 3, []string{"Resize"}, "Resize cannot be switched off: it fixes the batch's size"},
		{"a long name", 3, []string{strings.Repeat("x", 100)}, "a name of 100 bytes"},
	} {
		open := smallJob("det", 4)
		open.Job.Targets = true
		open.Job.Transform.Ops = detrOps(32)
		open.Job.StopEpoch, open.Job.StopOps = c.epoch, c.ops
		ctx, cancel := context.WithTimeout(context.Background(), hangGuard)
		_, err := readEpoch(e.feedStream(t, ctx, open))
		cancel()
		if status.Code(err) != codes.InvalidArgument || !strings.Contains(err.Error(), c.want) {
			t.Errorf("%s: %v, want INVALID_ARGUMENT saying %q", c.name, err, c.want)
		}
	}
	// A preset takes it too (D-FINE's ops by default).
	open := smallJob("det", 4)
	open.Job.Targets, open.Job.Trace = true, true
	open.Job.Transform = &pb.TransformSpec{Preset: "detr"}
	open.Job.StopEpoch = 1
	ep := e.collect(t, open)
	for _, b := range ep.batches {
		for _, tr := range b.hdr.GetTraces() {
			if strings.Contains(tr, `"iou_crop"`) || strings.Contains(tr, `"pad"`) {
				return
			}
		}
	}
	t.Error("the detr preset with stop_epoch 1, epoch 0: no sample drew a zoom or an IoU crop")
}
