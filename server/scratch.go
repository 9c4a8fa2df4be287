package server

import (
	"context"
	"fmt"
	"reflect"
	"sync/atomic"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/stoker-dev/stoker/pipeline"
	"github.com/stoker-dev/stoker/pipeline/codec"
	"github.com/stoker-dev/stoker/pipeline/dataset"
	"github.com/stoker-dev/stoker/server/internal/job"
	"github.com/stoker-dev/stoker/server/internal/limits"
)

// scratchWait is how long a sample waits for the budget to have the
// bytes of its scratch (pipeline.WithScratchBudget) before it fails.
const scratchWait = time.Second

// scratchAccount is the workers' scratch in the batch budget
// (pipeline.ScratchBudget): the decode's own pixels, the masks', the
// multi-image canvases, the YOLO kernels' and the steps' kernels', the C resampler's,
// the files' read buffers and the C decoders' own memory
// (pipeline/scratch.go), counted apart for its gauge.
type scratchAccount struct {
	b    *limits.Budget
	held atomic.Int64
	// over counts the samples that kept more than their bound reserved
	// (Try: the difference taken after), for the tests.
	over atomic.Int64
}

// Acquire takes n bytes of b, waiting up to wait.
func (a *scratchAccount) Acquire(ctx context.Context, n int64, wait time.Duration, what string) error {
	if err := a.b.Acquire(ctx, n, wait, what); err != nil {
		return err
	}
	a.held.Add(n)
	return nil
}

// Try takes n bytes of b if they fit now.
func (a *scratchAccount) Try(n int64) bool {
	a.over.Add(1)
	if !a.b.Try(n) {
		return false
	}
	a.held.Add(n)
	return true
}

// Release gives n bytes back.
func (a *scratchAccount) Release(n int64) {
	a.held.Add(-n)
	a.b.Release(n)
}

// Held is the workers' scratch reserved now.
func (a *scratchAccount) Held() int64 { return a.held.Load() }

var _ pipeline.ScratchBudget = (*scratchAccount)(nil)

// scratchMetrics are the budget's gauges: its bytes in use (batch
// buffers, rings, Work memory, annotations and the workers' scratch) and
// the scratch alone.
func scratchMetrics(b *limits.Budget, a *scratchAccount) []prometheus.Collector {
	return []prometheus.Collector{
		prometheus.NewGaugeFunc(prometheus.GaugeOpts{Name: "stoker_memory_budget_in_use_bytes",
			Help: "Bytes of the batch budget (what --memory-budget leaves after the caches) in use: batch buffers, rings, Work memory, annotations and the workers' sample scratch."},
			func() float64 { return float64(b.InUse()) }),
		prometheus.NewGaugeFunc(prometheus.GaugeOpts{Name: "stoker_memory_budget_limit_bytes",
			Help: "The batch budget's bytes."},
			func() float64 { return float64(b.Limit()) }),
		prometheus.NewGaugeFunc(prometheus.GaugeOpts{Name: "stoker_sample_scratch_bytes",
			Help: "Of stoker_memory_budget_in_use_bytes, the workers' scratch for the decoded pixels, masks, multi-image canvases, the YOLO and the steps' kernels, the C resampler, the files' read buffers and the C decoders' own memory, reserved from each sample's header (and its file's size) before it is made."},
			func() float64 { return float64(a.Held()) }),
	}
}

// checkScratch refuses a job one of whose samples needs more scratch
// than the batch budget could ever give it: what is not in use but for
// the workers' scratch (which they give back when idle). The job's own
// batch buffers are reserved already (a Feed stream's; a Work stream's
// are taken lease by lease). The bound is the one each sample reserves
// (pipeline.SampleScratch), for the largest sample the dataset says it
// has: its images as large as its annotations say (COCO's list every
// image's size), the C decoder's memory the least any format takes for
// such an image (codec.Header.LibBytes; its format is known only from
// its header), and its largest file's read buffer where the dataset
// knows its files' sizes (dataset.FileSizer: an ImageFolder's, a
// directory's COCO set, a WebDataset's members). Where the sizes are not
// given (a YOLO set, a manifest's objects), only the scratch at the
// output's size is checked here, and each sample reserves its own from
// its header and file.
func (s *Server) checkScratch(j *job.Job) error {
	sz := s.datasetSizes(j.Data())
	w, h := sz.w, sz.h
	need, lib, file := s.scratchNeed(j, w, h)
	room := s.budget.Limit() - s.budget.InUse() + s.scratch.Held()
	if need <= room {
		return nil
	}
	what := "at the output's size (a multi-image op's canvas, the masks'), before its image's own"
	if w > 0 && h > 0 {
		what = fmt.Sprintf("for images of up to %dx%d, as its dataset's annotations give them (%d of them the C decoder's at least)", w, h, lib)
	}
	if file > 0 {
		what += fmt.Sprintf(", and its largest file's %d bytes read", file)
	}
	return fmt.Errorf("%w: a sample of the job needs %d bytes of worker scratch (decoded pixels, masks, mosaic, YOLO and steps' kernels, C resampler, files, C decoder) %s, "+
		"and the batch budget has %d of its %d bytes left beside the job's batch buffers and the other streams' (--memory-budget)",
		limits.ErrMemoryBudget, need, what, room, s.budget.Limit())
}

// dsSizes is what checkScratch reads of a dataset: its largest image's
// sides (where its annotations give them) and its largest file.
type dsSizes struct {
	w, h int
	file int64
}

// datasetSizes is ds's sizes, walked once for each dataset the server
// holds and kept, so that a job opened or registered on a Work stream
// costs no walk of the dataset. A job's own mix of them (made per job) is
// its parts' largest file, never kept: a cache of every job's mix would
// grow with the jobs a client opens. A mix gives no image bound (it
// gives none of its own), as before.
func (s *Server) datasetSizes(ds dataset.Dataset) dsSizes {
	if m, ok := ds.(*dataset.Mixed); ok {
		var sz dsSizes
		for _, p := range m.Parts() {
			sz.file = max(sz.file, s.datasetSizes(p.DS).file)
		}
		return sz
	}
	held := s.holds(ds)
	if held {
		if v, ok := s.dsSizes.Load(ds); ok {
			return v.(dsSizes)
		}
	}
	var sz dsSizes
	if b, ok := ds.(interface{ ImageBound() (int, int) }); ok {
		sz.w, sz.h = b.ImageBound()
	}
	sz.file = largestFile(ds)
	if held {
		s.dsSizes.Store(ds, sz)
	}
	return sz
}

// holds says whether ds is one of the datasets the server was given
// (compared only as pointers of one type: another dynamic type's ==
// could panic).
func (s *Server) holds(ds dataset.Dataset) bool {
	t := reflect.TypeOf(ds)
	if t == nil || t.Kind() != reflect.Pointer {
		return false
	}
	for _, d := range s.datasets {
		if reflect.TypeOf(d) == t && d == ds {
			return true
		}
	}
	return false
}

// scratchNeed is what checkScratch holds a sample of j to for images of
// up to w x h (0: not known): its scratch (pipeline.SampleScratch), of
// it lib the C decoder's least and file the largest file's size (its read
// buffer a quarter more).
func (s *Server) scratchNeed(j *job.Job, w, h int) (need, lib, file int64) {
	lib, file = leastLibBytes(w, h), s.datasetSizes(j.Data()).file
	// the read buffer grows to a file and a quarter (reserveFiles)
	return pipeline.SampleScratch(j.Transform(), j.Fields(), w, h) + lib + file + file/4, lib, file
}

// leastLibBytes is the least the C decoders take of their own for a w x
// h image of any format (codec.Header.LibBytes): a gray baseline JPEG's,
// a PNG's or a WebP's, whichever is least; 0 for no size.
func leastLibBytes(w, h int) int64 {
	if w <= 0 || h <= 0 {
		return 0
	}
	least := int64(-1)
	for _, hd := range []codec.Header{
		{Format: codec.FormatJPEG, W: w, H: h, Comps: 1, Samp: [4]uint8{0x11}},
		{Format: codec.FormatPNG, W: w, H: h},
		{Format: codec.FormatWebP, W: w, H: h},
		{Format: codec.FormatOther, W: w, H: h},
	} {
		if n := hd.LibBytes(); least < 0 || n < least {
			least = n
		}
	}
	return least
}

// largestFile is the largest file size ds knows before reading
// (dataset.FileSizer), 0 when it knows none.
func largestFile(ds dataset.Dataset) int64 {
	fz, ok := ds.(dataset.FileSizer)
	if !ok {
		return 0
	}
	var most int64
	for i := range ds.Len() {
		if n, ok := fz.FileSize(i); ok {
			most = max(most, n)
		}
	}
	return most
}

// DefaultCoefBudget is the coefficient cache a server with workers decode
// goroutines has on this machine by default (limits.DefaultCoefBudget).
func DefaultCoefBudget(workers int) int64 { return limits.DefaultCoefBudget(workers) }

// CheckMemoryFloor refuses a memory budget (0: the machine's default)
// under MinMemoryBudget (limits.CheckMemoryFloor).
func CheckMemoryFloor(budget int64) error { return limits.CheckMemoryFloor(budget) }

// DefaultMemoryBudget is the --memory-budget a server on this machine has
// when not given one (bench scale, to know whether the --coef-budget it
// gives its workers fits in that).
func DefaultMemoryBudget() int64 { return limits.DefaultMemoryBudget() }
