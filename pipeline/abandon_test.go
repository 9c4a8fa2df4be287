package pipeline

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"image"
	"image/color"
	"image/png"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stoker-dev/stoker/pipeline/det"
	opspkg "github.com/stoker-dev/stoker/pipeline/ops"
	"github.com/stoker-dev/stoker/pipeline/transform"
)

// bombTransform is the blur bomb of issue 47 at a side of side: a large
// crop, then 32 blurs of kernel 1023 and sigma 1000, each minutes of one
// core at 4096 (every tap weighs something at that sigma).
func bombTransform(t testing.TB, side int) *transform.Transform {
	ops := []opspkg.Op{{Kind: transform.OpRandomResizedCrop, Size: [2]int{side, side}}}
	for range 32 {
		ops = append(ops, opspkg.Op{Kind: opspkg.OpGaussianBlur, Args: &opspkg.BlurArgs{KernelSize: [2]int{1023, 1023}, Sigma: [2]float64{1000, 1000}}})
	}
	return mustTransform(t, transform.CHW, ops...)
}

// waitFill waits for a Fill's result; a Fill that never returns (a worker
// still inside the bomb) fails the test instead of hanging it.
func waitFill(t *testing.T, done <-chan error) error {
	t.Helper()
	select {
	case err := <-done:
		return err
	case <-time.After(2 * time.Minute):
		t.Fatal("the Fill did not return: its abandoned sample's work went on")
		return nil
	}
}

// waitRunning waits until a worker of e is making a sample of q.
func waitRunning(t *testing.T, e *Executor, q *Queue) {
	t.Helper()
	waitFor(t, time.Minute, "a worker taking the sample", func() bool {
		e.mu.Lock()
		defer e.mu.Unlock()
		return q.running > 0
	})
}

// TestFillCancelAbandonsRunning: a sample inside the blur bomb is abandoned
// when its Fill's ctx ends: the Fill returns ctx's error, the worker comes
// back from the sample (Abandoned says so), and it makes the next batch.
func TestFillCancelAbandonsRunning(t *testing.T) {
	e := NewExecutor(1)
	defer e.Close()
	ds := memDataset{goldenJPEGs()[:1]}
	q := e.Queue("bomb")
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	tr := bombTransform(t, 2048)
	go func() {
		var b Batch
		done <- q.Fill(ctx, ds, tr, 0, 0, []int64{0}, Drop, &b)
	}()
	waitRunning(t, e, q)
	cancel()
	err := waitFill(t, done)
	if !errors.Is(err, context.Canceled) {
		t.Fatalf("cancelled Fill: %v, want context.Canceled", err)
	}
	// The error names the sample it was abandoned in: a lease that
	// times out on every try says which sample holds it.
	if want := fmt.Sprintf("sample 0 (%q)", ds.Name(0)); !strings.Contains(err.Error(), want) {
		t.Errorf("cancelled Fill: %v, want it to name %s", err, want)
	}
	if told, back := e.Abandoned(); told != 1 || back != 1 {
		t.Fatalf("Abandoned() = %d told, %d returned; want 1, 1", told, back)
	}
	var b Batch
	if err := e.Queue("next").Fill(context.Background(), ds, smallTrain(t), 0, 0, []int64{0}, Drop, &b); err != nil || b.N != 1 || len(b.Errors) != 0 {
		t.Fatalf("the next batch: %v, N %d, errors %v", err, b.N, b.Errors)
	}
}

// TestQueueCloseAbandonsRunning: closing a job's queue stops its sample
// inside the bomb: Close returns (it waits for the queue's running
// samples) and the Fill fails with ErrClosed.
func TestQueueCloseAbandonsRunning(t *testing.T) {
	e := NewExecutor(1)
	defer e.Close()
	ds := memDataset{goldenJPEGs()[:1]}
	q := e.Queue("bomb")
	done := make(chan error, 1)
	tr := bombTransform(t, 2048)
	go func() {
		var b Batch
		done <- q.Fill(context.Background(), ds, tr, 0, 0, []int64{0}, Drop, &b)
	}()
	waitRunning(t, e, q)
	closed := make(chan struct{})
	go func() { q.Close(); close(closed) }()
	if err := waitFill(t, done); !errors.Is(err, ErrClosed) {
		t.Fatalf("Fill on a queue closed under it: %v, want ErrClosed", err)
	}
	<-closed
	if told, back := e.Abandoned(); told != 1 || back != 1 {
		t.Fatalf("Abandoned() = %d told, %d returned; want 1, 1", told, back)
	}
}

// TestDecodeStopped: every decode path polls the flag: a Decoder whose
// sample was abandoned before it started returns errAbandoned for a JPEG
// and a PNG, and for the steps, not a sample.
func TestDecodeStopped(t *testing.T) {
	img := image.NewRGBA(image.Rect(0, 0, 64, 48))
	for i := range img.Pix {
		img.Pix[i] = byte(i * 7)
	}
	img.Set(0, 0, color.RGBA{1, 2, 3, 255})
	var pngBuf bytes.Buffer
	if err := png.Encode(&pngBuf, img); err != nil {
		t.Fatal(err)
	}
	blur := mustTransform(t, transform.CHW, opspkg.Op{Kind: transform.OpCenterCrop, Size: [2]int{32, 32}},
		opspkg.Op{Kind: opspkg.OpGaussianBlur, Args: &opspkg.BlurArgs{KernelSize: [2]int{9, 9}, Sigma: [2]float64{2, 2}}})
	for _, tc := range []struct {
		name string
		data []byte
		tr   *transform.Transform
	}{
		{"jpeg", goldenJPEGs()[0], smallTrain(t)},
		{"png", pngBuf.Bytes(), smallTrain(t)},
		{"steps", goldenJPEGs()[0], blur},
	} {
		t.Run(tc.name, func(t *testing.T) {
			d := NewDecoder()
			defer d.Close()
			out := make([]byte, tc.tr.SampleBytes())
			if err := d.Decode(tc.data, tc.tr, det.Key{}, out); err != nil {
				t.Fatalf("with no flag: %v", err)
			}
			var stop int32
			atomic.StoreInt32(&stop, 1)
			d.ops.Stop = &stop
			if err := d.Decode(tc.data, tc.tr, det.Key{}, out); !errors.Is(err, opspkg.ErrAbandoned) {
				t.Fatalf("abandoned: %v, want errAbandoned", err)
			}
		})
	}
}
