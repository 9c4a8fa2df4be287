package server

import (
	"bytes"
	"context"
	"fmt"
	"image"
	"image/jpeg"
	"math"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus/testutil"

	pb "github.com/stoker-dev/stoker/proto/stoker/v1"
)

func TestTelemetryWindow(t *testing.T) {
	t0 := time.Unix(1000, 0)
	tel := newTelemetry(5*time.Second, t0)
	// 10 s of a trainer that waits 0.5 s of every second and steps 0.5 s.
	for i := 1; i <= 10; i++ {
		now := t0.Add(time.Duration(i) * time.Second)
		tel.report(now, 0.5, 0.5, 1)
		tel.delivered(now, 32, 1000)
	}
	s := tel.snapshot(t0.Add(10 * time.Second))
	if math.Abs(s.stall-0.5) > 0.11 || math.Abs(s.stepPerBatch-0.5) > 1e-9 || math.Abs(s.imagesPerSec-32) > 7 {
		t.Errorf("snapshot %+v; want stall 0.5, step 0.5 s, 32 images/s", s)
	}
	// Then it stops waiting: within the window the stall falls to 0.
	for i := 11; i <= 16; i++ {
		tel.report(t0.Add(time.Duration(i)*time.Second), 0, 1, 1)
	}
	if s := tel.snapshot(t0.Add(16 * time.Second)); s.stall != 0 {
		t.Errorf("stall %v after 6 s without waiting, want 0 (the window is 5 s here)", s.stall)
	}
	// Garbage reports are ignored.
	tel.report(t0.Add(17*time.Second), math.Inf(1), math.NaN(), 1)
	tel.report(t0.Add(17*time.Second), -3, 1e300, 1)
	if s := tel.snapshot(t0.Add(17 * time.Second)); s.stall != 0 || math.IsNaN(s.stepPerBatch) {
		t.Errorf("garbage reports changed the figures: %+v", s)
	}
}

func TestNarrowFloor(t *testing.T) {
	for _, tc := range []struct {
		rec   float64
		ready int
		want  int
	}{
		{math.NaN(), 3, 1}, {0, 3, 1}, // no figure yet
		{2, 2, 2}, // a trainer wanting two makers' worth keeps both busy
		{5, 2, 2}, // never more than are ready
		{1, 4, 1},
	} {
		if got := narrowFloor(tc.rec, tc.ready); got != tc.want {
			t.Errorf("narrowFloor(%v, %d) = %d, want %d", tc.rec, tc.ready, got, tc.want)
		}
	}
}

func TestAdvise(t *testing.T) {
	for _, tc := range []struct {
		name     string
		s        telemetrySnap
		capacity float64
		makers   int
		idle     bool
		rec      float64
		advice   string
	}{
		// The trainer takes a batch every 0.1 s (10/s); each maker makes 2/s.
		{"starving", telemetrySnap{stall: 0.6, stepPerBatch: 0.1, batchesPerSec: 4}, 4, 2, false, 6, "needs about 4 more workers"},
		{"fine", telemetrySnap{stall: 0.01, stepPerBatch: 0.1, batchesPerSec: 10}, 12, 2, false, 2, "fine"},
		// Not stalling while the makers, partly idle, measure slow: never
		// more than the makers there are.
		{"fine, makers partly idle", telemetrySnap{stall: 0.01, stepPerBatch: 0.01, batchesPerSec: 90}, 90, 2, false, 2, "fine"},
		{"fewer would do", telemetrySnap{stall: 0, stepPerBatch: 1, batchesPerSec: 1}, 12, 4, false, 1, "fine (fewer makers would do)"},
		{"network", telemetrySnap{stall: 0.5, stepPerBatch: 0.1, batchesPerSec: 5, bytesPerSec: 48e6}, 20, 2, true, 2, "the network is the limit (48 MB/s)"},
		{"no step reports", telemetrySnap{stall: 0.5, batchesPerSec: 5}, 5, 1, false, 3, "needs about 2 more workers"},
		{"nothing measured", telemetrySnap{stall: 0.5}, 0, 0, false, math.NaN(), "no makers measured yet"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			rec, advice := advise(tc.s, 0.02, tc.capacity, tc.makers, tc.idle)
			if !(rec == tc.rec || math.IsNaN(rec) && math.IsNaN(tc.rec)) || advice != tc.advice {
				t.Errorf("got %v %q, want %v %q", rec, advice, tc.rec, tc.advice)
			}
		})
	}
}

// runTrainer takes batches from a Feed stream for d, stepping step per
// batch and reporting its wait and step with each credit, as the clients
// do; it returns the server's Status of the job at the end.
func runTrainer(t *testing.T, e *testEnv, open *pb.OpenJob, step, d time.Duration) *pb.JobStatus {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), d+20*time.Second)
	defer cancel()
	open.Epochs = 0
	open.Credits = 2
	s := e.feedStream(t, ctx, open)
	end := time.Now().Add(d)
	var last *pb.JobStatus
	asked := time.Now()
	var want, got uint64
	for time.Now().Before(end) {
		m, err := s.Recv()
		if err != nil {
			t.Fatal(err)
		}
		switch {
		case m.GetBatch() != nil:
			want, got = m.GetBatch().GetDataBytes(), 0
		case m.GetChunk() != nil:
			got += uint64(len(m.GetChunk().GetData()))
		}
		if m.GetChunk() == nil || got < want { // JobInfo, EpochEnd, or more to come
			continue
		}
		wait := time.Since(asked)
		time.Sleep(step)
		asked = time.Now()
		s.Send(&pb.FeedRequest{Msg: &pb.FeedRequest_Credit{Credit: &pb.Credit{Credits: 1, Batches: 1, WaitSeconds: wait.Seconds(), StepSeconds: step.Seconds()}}})
	}
	st, err := e.client.Status(ctx, &pb.StatusRequest{})
	if err != nil {
		t.Fatal(err)
	}
	for _, j := range st.GetJobs() {
		last = j
	}
	if last == nil {
		t.Fatal("Status lists no job")
	}
	return last
}

func TestControllerNarrowsForASlowTrainer(t *testing.T) {
	e := newEnv(t, Config{Window: 8})
	js := runTrainer(t, e, smallJob("tiny", 4), 100*time.Millisecond, 6*time.Second)
	if js.GetWindow() > 2 || js.GetInputStallRatio() > 0.02 {
		t.Errorf("window %d, stall %.3f: a trainer slower than production should narrow the window to its floor with no stall", js.GetWindow(), js.GetInputStallRatio())
	}
	if !strings.HasPrefix(js.GetAdvice(), "fine") {
		t.Errorf("advice %q, want fine", js.GetAdvice())
	}
	if got := testutil.ToFloat64(e.srv.m.windowDecisions.WithLabelValues("narrow")); got == 0 {
		t.Error("no narrow decision counted")
	}
}

// bigImages writes n 1600x1200 JPEGs in one class: slow to decode, for
// small outputs that are quick to send.
func bigImages(t *testing.T, n int) string {
	t.Helper()
	root := t.TempDir()
	dir := filepath.Join(root, "big")
	if err := os.MkdirAll(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	img := image.NewRGBA(image.Rect(0, 0, 1600, 1200))
	for i := range img.Pix {
		img.Pix[i] = uint8(i*7 + i/4099)
	}
	var buf bytes.Buffer
	if err := jpeg.Encode(&buf, img, &jpeg.Options{Quality: 95}); err != nil {
		t.Fatal(err)
	}
	for i := range n {
		if err := os.WriteFile(filepath.Join(dir, fmt.Sprintf("%03d.jpg", i)), buf.Bytes(), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	return root
}

func TestControllerWidensForAStarvingTrainer(t *testing.T) {
	// One worker decoding 1600x1200 photos for 32x32 outputs: far slower
	// than a trainer that does not step at all.
	e := newEnv(t, Config{Workers: 1, Window: 6, Datasets: map[string]string{"tiny": bigImages(t, 16)}})
	js := runTrainer(t, e, smallJob("tiny", 4), 0, 3*time.Second)
	if js.GetWindow() != 6 || js.GetInputStallRatio() < 0.5 {
		t.Errorf("window %d, stall %.3f: a starving trainer should widen the window to its ceiling", js.GetWindow(), js.GetInputStallRatio())
	}
	if js.GetWorkersRecommended() <= 1 || !strings.HasPrefix(js.GetAdvice(), "needs about") {
		t.Errorf("recommended %v, advice %q: want more workers", js.GetWorkersRecommended(), js.GetAdvice())
	}
}

// TestMetricsLint checks every series the server exports with
// client_golang's linter (promtool check metrics' rules), after a job has
// run so the per-job series exist.
func TestMetricsLint(t *testing.T) {
	e := newEnv(t, Config{})
	runTrainer(t, e, smallJob("tiny", 8), 10*time.Millisecond, 1200*time.Millisecond)
	problems, err := testutil.GatherAndLint(e.reg)
	if err != nil {
		t.Fatal(err)
	}
	for _, p := range problems {
		t.Errorf("%s: %s", p.Metric, p.Text)
	}
}
