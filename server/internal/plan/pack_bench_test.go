package plan

import (
	"fmt"
	"image"
	_ "image/jpeg" // the photos' headers
	"io/fs"
	"math"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/stoker-dev/stoker/pipeline/det"
)

// qwenTokens is a Qwen2-VL image's vision tokens (after the merger):
// transformers' smart_resize(h, w, factor=patch*merge, min_pixels,
// max_pixels) gives h', w', multiples of the factor, and the tokens are
// h'*w'/factor^2. Python's round is half to even. It is the benchmark's
// token function; the server's is the transform's.
func qwenTokens(h, w, factor int, minPixels, maxPixels float64) int64 {
	f := float64(factor)
	hb := math.RoundToEven(float64(h)/f) * f
	wb := math.RoundToEven(float64(w)/f) * f
	switch {
	case hb*wb > maxPixels:
		beta := math.Sqrt(float64(h) * float64(w) / maxPixels)
		hb = max(f, math.Floor(float64(h)/beta/f)*f)
		wb = max(f, math.Floor(float64(w)/beta/f)*f)
	case hb*wb < minPixels:
		beta := math.Sqrt(minPixels / (float64(h) * float64(w)))
		hb = math.Ceil(float64(h)*beta/f) * f
		wb = math.Ceil(float64(w)*beta/f) * f
	}
	return int64(hb/f) * int64(wb/f)
}

func TestQwenTokens(t *testing.T) {
	for _, c := range []struct {
		h, w int
		max  float64
		want int64
	}{
		{480, 640, 1003520, 17 * 23}, // round(17.14), round(22.86)
		{3000, 4000, 1003520, 30 * 41},
		{3000, 4000, 12845056, 107 * 143}, // under max_pixels: rounded only
		{10, 10, 1003520, 4},              // up to min_pixels 56*56
	} {
		if got := qwenTokens(c.h, c.w, 28, 3136, c.max); got != c.want {
			t.Errorf("%dx%d (max %g): %d tokens, want %d", c.h, c.w, c.max, got, c.want)
		}
	}
}

// photoSizes reads the sizes of the JPEG headers under dir.
func photoSizes(b *testing.B, dir string) [][2]int {
	var out [][2]int
	err := filepath.WalkDir(dir, func(p string, d fs.DirEntry, err error) error {
		if err != nil || d.IsDir() || !strings.HasSuffix(p, ".jpg") {
			return err
		}
		f, err := os.Open(p)
		if err != nil {
			return err
		}
		defer f.Close()
		c, _, err := image.DecodeConfig(f)
		if err != nil {
			return err
		}
		out = append(out, [2]int{c.Height, c.Width})
		return nil
	})
	if err != nil {
		b.Fatal(err)
	}
	return out
}

// cocoSize draws a COCO-like size: the long side 640 mostly, the short
// side 480 or 427 mostly, a quarter portrait.
func cocoSize(r *det.RNG) [2]int {
	long := 640
	if r.Float64() < 0.05 {
		long = 500 + r.Intn(140)
	}
	var short int
	switch x := r.Float64(); {
	case x < 0.5:
		short = 480 * long / 640
	case x < 0.75:
		short = 427 * long / 640
	default:
		short = 240 + r.Intn(long-240)
	}
	if r.Float64() < 0.25 {
		return [2]int{long, short}
	}
	return [2]int{short, long}
}

// largeSize draws an 8-20 MP size: 4:3, 3:2, 16:9, 1:1 or a 3:1
// panorama, a third portrait.
func largeSize(r *det.RNG) [2]int {
	aspects := []float64{4.0 / 3, 4.0 / 3, 3.0 / 2, 3.0 / 2, 16.0 / 9, 1, 3}
	a := aspects[r.Intn(len(aspects))]
	px := r.Uniform(8e6, 20e6)
	w := int(math.Sqrt(px * a))
	h := int(px / float64(w))
	if r.Float64() < 1.0/3 {
		return [2]int{w, h}
	}
	return [2]int{h, w}
}

// packStats are a plan's per-step figures over its ranks.
type packStats struct {
	balance   float64 // Σ over steps of the ranks' max tokens / Σ of their mean
	worst     float64 // the largest max/mean of a step
	padBudget float64 // 1 - tokens / (steps * world * budget)
	padMax    float64 // 1 - tokens / Σ over steps of world * max
	over      float64 // share of batches over the budget
	steps     int
	bound     float64 // batches / ceil(tokens / budget), the fewest any packing needs
}

func statsOf(steps, world int, budget int64, tokens func(r, s int) int64) packStats {
	var sumMax, sumMean, total float64
	st := packStats{steps: steps}
	overs := 0
	for s := range steps {
		var mx, sum int64
		for r := range world {
			t := tokens(r, s)
			mx, sum = max(mx, t), sum+t
			if t > budget {
				overs++
			}
		}
		mean := float64(sum) / float64(world)
		sumMax, sumMean, total = sumMax+float64(mx), sumMean+mean, total+float64(sum)
		if mean > 0 {
			st.worst = max(st.worst, float64(mx)/mean)
		}
	}
	st.balance = sumMax / sumMean
	st.padBudget = 1 - total/(float64(steps*world)*float64(budget))
	st.padMax = 1 - total/(sumMax*float64(world))
	st.over = float64(overs) / float64(steps*world)
	st.bound = float64(steps*world) / math.Ceil(total/float64(budget))
	return st
}

func (st packStats) report(b *testing.B) {
	b.ReportMetric(st.balance, "max/mean")
	b.ReportMetric(st.worst, "worst-step")
	b.ReportMetric(100*st.padBudget, "%pad-budget")
	b.ReportMetric(100*st.padMax, "%pad-stepmax")
	b.ReportMetric(100*st.over, "%over-budget")
	b.ReportMetric(float64(st.steps), "steps")
	b.ReportMetric(st.bound, "batches/bound")
}

// BenchmarkPackBalance packs an epoch of 8 simulated ranks over real and
// drawn size distributions, Qwen2-VL's tokens (the processor's default
// max_pixels, 1280 tokens an image at most, and Qwen2-VL-7B-Instruct's,
// 16384), and reports the balance and padding beside per-rank batches of
// a fixed image count (as many as the budget holds at the mean):
//
//	go test -run '^$' -bench BenchmarkPackBalance -benchtime 1x ./server/internal/plan/
//
// STOKER_PHOTOS names the photos (default /work/shared/data/photos).
func BenchmarkPackBalance(b *testing.B) {
	const world, n = 8, 100000
	dir := os.Getenv("STOKER_PHOTOS")
	if dir == "" {
		dir = "/work/shared/data/photos"
	}
	var photos [][2]int
	if _, err := os.Stat(dir); err == nil {
		photos = photoSizes(b, dir)
	}
	dists := map[string]func(r *det.RNG) [2]int{
		"coco":   cocoSize,
		"8-20MP": largeSize,
	}
	if len(photos) > 0 {
		dists["photos"] = func(r *det.RNG) [2]int { return photos[r.Intn(len(photos))] }
		dists["mixed"] = func(r *det.RNG) [2]int {
			switch r.Intn(3) {
			case 0:
				return photos[r.Intn(len(photos))]
			case 1:
				return cocoSize(r)
			}
			return largeSize(r)
		}
	}
	for _, name := range []string{"photos", "coco", "8-20MP", "mixed"} {
		dist := dists[name]
		if dist == nil {
			continue // no photos where STOKER_PHOTOS says
		}
		for _, cfg := range []struct {
			name      string
			maxPixels float64
			budget    int64
		}{
			{"max1280/budget16384", 1003520, 16384},
			{"max16384/budget65536", 12845056, 65536},
		} {
			r := det.Key{Seed: 5, Index: 1}.Stream(0)
			tokens := make([]int64, n)
			var sum int64
			for i := range tokens {
				hw := dist(&r)
				tokens[i] = qwenTokens(hw[0], hw[1], 28, 3136, cfg.maxPixels)
				sum += tokens[i]
			}
			spec := PackSpec{Size: n, Budget: cfg.budget, Seed: 1, Epoch: 0, Shuffle: true, World: world,
				Tokens: func(i int) (int64, error) { return tokens[i], nil }}
			b.Run(name+"/"+cfg.name+"/packed", func(b *testing.B) {
				var p *Packing
				for b.Loop() {
					var err error
					if p, err = Pack(spec); err != nil {
						b.Fatal(err)
					}
				}
				statsOf(p.Steps(), world, cfg.budget, p.Tokens).report(b)
			})
			b.Run(name+"/"+cfg.name+"/fixed-count", func(b *testing.B) {
				count := max(1, int(cfg.budget*int64(n)/sum))
				var plans []Plan
				for b.Loop() {
					plans = plans[:0]
					for rk := range world {
						plans = append(plans, New(Spec{Size: n, Seed: 1, Shuffle: true, Rank: rk, World: world, BatchSize: count, DropLast: true}))
					}
				}
				st := statsOf(plans[0].Batches(), world, cfg.budget, func(rk, s int) int64 {
					var t int64
					for _, i := range plans[rk].Batch(s) {
						t += tokens[i]
					}
					return t
				})
				st.report(b)
				b.ReportMetric(float64(count), "images/batch")
			})
		}
	}
}

// BenchmarkPack is what planning an epoch costs a coordinator: 10^5 and
// 10^6 samples of COCO-like sizes' Qwen2-VL tokens, 8 ranks, 16,384
// tokens a batch.
//
//	go test -run '^$' -bench 'BenchmarkPack$' ./server/internal/plan/
func BenchmarkPack(b *testing.B) {
	for _, n := range []int{100000, 1000000} {
		r := det.Key{Seed: 6, Index: 1}.Stream(0)
		tokens := make([]int64, n)
		for i := range tokens {
			hw := cocoSize(&r)
			tokens[i] = qwenTokens(hw[0], hw[1], 28, 3136, 1003520)
		}
		spec := PackSpec{Size: n, Budget: 16384, Seed: 1, Shuffle: true, World: 8,
			Tokens: func(i int) (int64, error) { return tokens[i], nil }}
		b.Run(fmt.Sprintf("samples=%d", n), func(b *testing.B) {
			b.ReportAllocs()
			for b.Loop() {
				if _, err := Pack(spec); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}
