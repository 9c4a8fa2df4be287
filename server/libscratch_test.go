package server

import (
	"bytes"
	"compress/zlib"
	"context"
	"encoding/binary"
	"fmt"
	"hash/crc32"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/stoker-dev/stoker/pipeline"
	"github.com/stoker-dev/stoker/pipeline/codec"
	pb "github.com/stoker-dev/stoker/proto/stoker/v1"
	jobpkg "github.com/stoker-dev/stoker/server/internal/job"
)

// libPhotos is an ImageFolder of one class in a temporary directory: a
// progressive photo (libjpeg holds its coefficients whole while it
// decodes it: about 680 KB at 367x466) and three baseline ones (about
// 90 KB of libjpeg's each); each file's bytes and what the worker keeps
// for it at most (its read buffer, grown to it and a quarter, and the C
// decoder's bound, codec.Header.LibBytes).
func libPhotos(t *testing.T) (dir, prog string, keep map[string]int64, lib map[string]int64) {
	t.Helper()
	dir = t.TempDir()
	if err := os.Mkdir(filepath.Join(dir, "a"), 0o755); err != nil {
		t.Fatal(err)
	}
	keep, lib = map[string]int64{}, map[string]int64{}
	for src, dst := range map[string]string{
		"bythewater/000001-progressive.jpg": "a/big-progressive.jpg",
		"bythewater/000001.jpg":             "a/b1.jpg",
		"bythewater/000019.jpg":             "a/b2.jpg",
		"autumn/000000.jpg":                 "a/b3.jpg",
	} {
		data, err := os.ReadFile(filepath.Join("../testdata/photos", src))
		if err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(filepath.Join(dir, dst), data, 0o644); err != nil {
			t.Fatal(err)
		}
		hd, err := codec.ParseHeader(data)
		if err != nil {
			t.Fatal(err)
		}
		lib[dst] = hd.LibBytes()
		keep[dst] = int64(len(data)+len(data)/4) + lib[dst]
		if hd.Progressive {
			prog = dst
		}
	}
	return dir, prog, keep, lib
}

// addResampler adds to keep, for each file of dir it names, the bound of
// what the C resampler keeps for a sample of job of that file's image
// (pipeline.ResamplerScratch), sized on a probe server of cfg.
func addResampler(t *testing.T, cfg Config, job *pb.OpenJob, dir string, keep map[string]int64) {
	t.Helper()
	probe := startServer(t, cfg)
	j, err := probe.srv.newJob(job.Job, jobpkg.Origin{Stream: "probe"})
	if err != nil {
		t.Fatal(err)
	}
	for name := range keep {
		data, err := os.ReadFile(filepath.Join(dir, name))
		if err != nil {
			t.Fatal(err)
		}
		hd, err := codec.ParseHeader(data)
		if err != nil {
			t.Fatal(err)
		}
		keep[name] += pipeline.ResamplerScratch(j.Transform(), hd.W, hd.H)
	}
}

// TestScratchLibProgressive: the C decoder's own memory (a progressive
// JPEG's coefficients, whole) and the files' bytes are reserved in the
// memory budget with each sample's scratch, from its header and its
// file's size, before it is decoded: on a one-worker server whose budget
// has room beside its batch buffers for a baseline photo's (its read
// buffer, libjpeg's rows and the C resampler's) but not for the progressive one's
// coefficients, that sample alone fails, naming its file, its size and
// --memory-budget, the others are made, the server makes the next epoch
// alike, and once the job has ended the budget's gauges
// (stoker_sample_scratch_bytes, stoker_memory_budget_in_use_bytes) are
// back to what they were; with room for the progressive photo too, every
// sample is made.
func TestScratchLibProgressive(t *testing.T) {
	dir, prog, keep, lib := libPhotos(t)
	job := smallJob("big", 4)
	job.Job.Shuffle = false
	cfg := Config{Datasets: map[string]string{"big": dir}, Workers: 1}
	addResampler(t, cfg, job, dir, keep)
	var baseKeep, files, libs int64
	for name, k := range keep {
		if name != prog {
			baseKeep = max(baseKeep, k)
		}
		files = max(files, k-lib[name])
		libs = max(libs, lib[name])
	}
	if keep[prog] < baseKeep+256<<10 {
		t.Fatalf("the progressive photo's scratch %d is not well above a baseline one's %d: the test would not tell them apart", keep[prog], baseKeep)
	}
	for _, c := range []struct {
		name string
		room int64 // beside the job's batch buffers
		fail bool
	}{
		{"refused", baseKeep + 64<<10, true},
		{"fits", files + libs + 64<<10, false},
	} {
		t.Run(c.name, func(t *testing.T) {
			cfg := cfg
			cfg.MemoryBudget, _ = budgetFor(t, cfg, job, 0, 0, func(int64) int64 { return c.room })
			e := startServer(t, cfg)
			base := e.srv.budget.InUse()
			for epoch := range 2 {
				ctx, cancel := context.WithTimeout(context.Background(), hangGuard)
				ep, err := readEpoch(e.feedStream(t, ctx, job))
				cancel()
				if err != nil {
					t.Fatalf("epoch %d: %v", epoch, err)
				}
				var errs []*pb.SampleError
				for _, b := range ep.batches {
					errs = append(errs, b.hdr.GetErrors()...)
				}
				if !c.fail {
					if len(errs) != 0 {
						t.Fatalf("epoch %d: sample errors %v, want none (room %d)", epoch, errs, c.room)
					}
				} else {
					if len(errs) != 1 || errs[0].GetName() != prog {
						t.Fatalf("epoch %d: sample errors %v; want the progressive photo's alone (%s)", epoch, errs, prog)
					}
					t.Logf("epoch %d: %s: %s", epoch, errs[0].GetName(), errs[0].GetReason())
					for _, want := range []string{"memory budget", "C decoder", "367x466", "bytes", "--memory-budget"} {
						if !strings.Contains(errs[0].GetReason(), want) {
							t.Errorf("error %q does not say %q", errs[0].GetReason(), want)
						}
					}
				}
				waitUntilState(t, "the scratch and the budget back to what they held before", func() string {
					return fmt.Sprintf("scratch %v, in use %v (%d before)", gauge(t, e.reg, "stoker_sample_scratch_bytes"), gauge(t, e.reg, "stoker_memory_budget_in_use_bytes"), base)
				}, func() bool {
					return gauge(t, e.reg, "stoker_sample_scratch_bytes") == 0 && gauge(t, e.reg, "stoker_memory_budget_in_use_bytes") == float64(base)
				})
			}
		})
	}
}

// TestScratchLibFormats: a PNG's and a WebP's C decoder memory is
// reserved from their headers like a JPEG's: in an ImageFolder of a
// photo as a PNG, a lossy WebP, and two crafted files whose headers claim
// much more (an interlaced PNG of 3000x2000, whose rows libpng holds
// whole, and a lossless WebP of 4000x3000, libwebp's ARGB whole: neither
// has the data), on a one-worker server whose budget has room beside its
// batch buffers for the first two's scratch, the crafted two alone fail,
// each naming its file, its size and --memory-budget, the others are
// made, the server makes the next epoch alike, and the budget's gauges
// are back to what they were once the job has ended.
func TestScratchLibFormats(t *testing.T) {
	dir := t.TempDir()
	if err := os.Mkdir(filepath.Join(dir, "a"), 0o755); err != nil {
		t.Fatal(err)
	}
	chunk := func(typ string, body []byte) []byte {
		b := binary.BigEndian.AppendUint32(nil, uint32(len(body)))
		b = append(append(b, typ...), body...)
		return binary.BigEndian.AppendUint32(b, crc32.ChecksumIEEE(b[4:]))
	}
	ihdr := binary.BigEndian.AppendUint32(nil, 3000)
	ihdr = binary.BigEndian.AppendUint32(ihdr, 2000)
	ihdr = append(ihdr, 8, 2, 0, 0, 1) // RGB, Adam7
	var z bytes.Buffer
	zw := zlib.NewWriter(&z)
	zw.Write(make([]byte, 64))
	zw.Close()
	hugePNG := slices.Concat([]byte("\x89PNG\r\n\x1a\n"), chunk("IHDR", ihdr), chunk("IDAT", z.Bytes()), chunk("IEND", nil))
	// VP8L: its signature, then 14 bits of width-1 and of height-1, the
	// alpha bit and a 3-bit version, little-endian; a few bytes of data.
	bits := uint32(4000-1) | uint32(3000-1)<<14
	vp8l := append(binary.LittleEndian.AppendUint32([]byte{0x2f}, bits), make([]byte, 11)...)
	riff := slices.Concat([]byte("WEBP"), []byte("VP8L"), binary.LittleEndian.AppendUint32(nil, uint32(len(vp8l))), vp8l)
	hugeWebP := slices.Concat([]byte("RIFF"), binary.LittleEndian.AppendUint32(nil, uint32(len(riff))), riff)
	photo, err := os.ReadFile("../testdata/odd/baseline.png")
	if err != nil {
		t.Fatal(err)
	}
	lossy, err := os.ReadFile("../pipeline/testdata/formats/lossy.webp")
	if err != nil {
		t.Fatal(err)
	}
	keep, lib := map[string]int64{}, map[string]int64{}
	for name, data := range map[string][]byte{"a/photo.png": photo, "a/lossy.webp": lossy, "a/huge-interlaced.png": hugePNG, "a/huge.webp": hugeWebP} {
		if err := os.WriteFile(filepath.Join(dir, name), data, 0o644); err != nil {
			t.Fatal(err)
		}
		hd, err := codec.ParseHeader(data)
		if err != nil {
			t.Fatalf("%s: %v", name, err)
		}
		lib[name] = hd.LibBytes()
		keep[name] = int64(len(data)+len(data)/4) + lib[name]
	}
	job := smallJob("formats", 4)
	job.Job.Shuffle = false
	cfg := Config{Datasets: map[string]string{"formats": dir}, Workers: 1}
	addResampler(t, cfg, job, dir, keep)
	room := max(keep["a/photo.png"], keep["a/lossy.webp"]) + 64<<10
	for _, huge := range []string{"a/huge-interlaced.png", "a/huge.webp"} {
		if lib[huge] < 4*room {
			t.Fatalf("%s's bound %d is not well above the room %d: the test would not tell them apart", huge, lib[huge], room)
		}
	}
	cfg.MemoryBudget, _ = budgetFor(t, cfg, job, 0, 0, func(int64) int64 { return room })
	e := startServer(t, cfg)
	base := e.srv.budget.InUse()
	for epoch := range 2 {
		ctx, cancel := context.WithTimeout(context.Background(), hangGuard)
		ep, err := readEpoch(e.feedStream(t, ctx, job))
		cancel()
		if err != nil {
			t.Fatalf("epoch %d: %v", epoch, err)
		}
		failed := map[string]string{}
		for _, b := range ep.batches {
			for _, se := range b.hdr.GetErrors() {
				failed[se.GetName()] = se.GetReason()
			}
		}
		if len(failed) != 2 {
			t.Fatalf("epoch %d: sample errors %v; want the two crafted files' alone", epoch, failed)
		}
		for name, size := range map[string]string{"a/huge-interlaced.png": "3000x2000", "a/huge.webp": "4000x3000"} {
			reason, ok := failed[name]
			if !ok {
				t.Fatalf("epoch %d: %s was made (errors %v)", epoch, name, failed)
			}
			t.Logf("epoch %d: %s: %s", epoch, name, reason)
			for _, want := range []string{"memory budget", "C decoder", size, "bytes", "--memory-budget"} {
				if !strings.Contains(reason, want) {
					t.Errorf("%s: error %q does not say %q", name, reason, want)
				}
			}
		}
		waitUntilState(t, "the scratch and the budget back to what they held before", func() string {
			return fmt.Sprintf("scratch %v, in use %v (%d before)", gauge(t, e.reg, "stoker_sample_scratch_bytes"), gauge(t, e.reg, "stoker_memory_budget_in_use_bytes"), base)
		}, func() bool {
			return gauge(t, e.reg, "stoker_sample_scratch_bytes") == 0 && gauge(t, e.reg, "stoker_memory_budget_in_use_bytes") == float64(base)
		})
	}
}
