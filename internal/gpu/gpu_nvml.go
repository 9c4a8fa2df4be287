//go:build cgo && !nonvml

package gpu

import (
	"encoding/binary"
	"fmt"
	"math"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/NVIDIA/go-nvml/pkg/nvml"
)

const (
	// defaultGPUInterval is how often the sampler polls NVML. The driver's
	// own sample periods are 1/6 s to 1 s; polling faster only re-reads.
	defaultGPUInterval = 200 * time.Millisecond
	// defaultGPUWindow is the window when NewMonitor is given none.
	defaultGPUWindow = 5 * time.Second
	// gpuStaleAfter: a device whose samples source gave nothing newer for
	// this long is polled for its utilization rates as well (the driver's
	// sample period is at most 1 s).
	gpuStaleAfter = 2 * time.Second
	// maxGPUPoints bounds a device's window (far above what 5 s of 1/6 s
	// samples or 200 ms polls make).
	maxGPUPoints = 4096
)

// options are NewMonitor's settings; Option sets them.
type options struct {
	lib      nvml.Interface
	interval time.Duration // <= 0: no background sampler (tests tick by hand)
	now      func() time.Time
}

// WithNVML makes the monitor use lib instead of the system's NVML
// (libnvidia-ml.so.1, through go-nvml): for tests, go-nvml's
// github.com/NVIDIA/go-nvml/pkg/nvml/mock. The monitor calls lib.Init and,
// on Close, lib.Shutdown. Only with cgo: go-nvml needs it.
func WithNVML(lib nvml.Interface) Option {
	return func(o *options) { o.lib = lib }
}

// withGPUInterval sets the sampler's period; d <= 0 starts no sampler (the
// first poll, in NewMonitor, is then the only one unless tick is called).
func withGPUInterval(d time.Duration) Option {
	return func(o *options) { o.interval = d }
}

// withGPUClock sets the monitor's clock.
func withGPUClock(now func() time.Time) Option {
	return func(o *options) { o.now = now }
}

// NewMonitor watches the selected GPUs through NVML (go-nvml, which
// dlopens libnvidia-ml.so.1). Every ~200 ms a background sampler reads, per
// device, the driver's utilization samples since the last read
// (nvmlDeviceGetSamples with NVML_GPU_UTILIZATION_SAMPLES: one value per
// 1/6 s to 1 s period, the share of it during which a kernel was running),
// falling back to nvmlDeviceGetUtilizationRates (the same share, over the
// last period) where samples are not supported; and, where GPM is supported
// (Hopper and later, with a driver that has it), the SM utilization between
// two GPM samples. Sample averages these over the last window (5 s when
// window <= 0).
//
// Without NVML (no driver, no libnvidia-ml.so.1, a failing init, a selected
// index NVML does not see) the monitor's Sample says Available=false and
// why; nothing panics and nothing is logged here. An empty selection (none)
// touches NVML not at all.
//
// What the numbers tell: saturated vs idle, not the stall itself (see
// Monitor). Indices are NVML's (nvidia-smi's), which CUDA_VISIBLE_DEVICES
// does not remap.
func NewMonitor(sel Selection, window time.Duration, opts ...Option) Monitor {
	if sel.None() {
		return unavailableGPU{reason: reasonNone}
	}
	o := options{interval: defaultGPUInterval, now: time.Now}
	for _, opt := range opts {
		opt(&o)
	}
	if window <= 0 {
		window = defaultGPUWindow
	}
	m := &nvmlMonitor{
		lib:      o.lib,
		window:   window,
		interval: o.interval,
		now:      o.now,
		stop:     make(chan struct{}),
		done:     make(chan struct{}),
	}
	if reason := m.open(sel); reason != "" {
		return unavailableGPU{reason: reason}
	}
	m.tick()
	if m.interval > 0 {
		go m.run()
	} else {
		close(m.done)
	}
	return m
}

// nvmlMonitor is the Monitor over NVML.
type nvmlMonitor struct {
	lib      nvml.Interface
	window   time.Duration
	interval time.Duration
	now      func() time.Time

	// tickMu serialises polls (the sampler's, or a test's) and Close's
	// teardown; the devices' polling state (noSamples, lastTS, newest, the
	// GPM samples) is the poller's alone.
	tickMu sync.Mutex
	// mu guards the windows (busy, sm, source, err) and closed, which
	// Sample reads.
	mu     sync.Mutex
	devs   []*nvmlDevice
	closed bool

	stop      chan struct{}
	done      chan struct{}
	closeOnce sync.Once
	closeErr  error
}

// nvmlDevice is one selected device's state.
type nvmlDevice struct {
	index int
	name  string
	dev   nvml.Device

	// Poller's state.
	noSamples bool      // GetSamples not supported: poll utilization rates
	lastTS    uint64    // newest sample timestamp seen (µs, the driver's)
	newest    time.Time // newest busy point, on the monitor's clock
	gpm       bool      // GPM supported and its samples allocated
	gpmPrev   nvml.GpmSample
	gpmCur    nvml.GpmSample
	gpmHave   bool // gpmPrev holds a sample

	// Under nvmlMonitor.mu.
	busy   series
	sm     series
	source string
	err    string
}

// point is one value (0..1) at one time on the monitor's clock.
type point struct {
	t time.Time
	v float64
}

type series []point

// add appends pts and drops what is before since.
func (s *series) add(since time.Time, pts ...point) {
	*s = append(*s, pts...)
	*s = slices.DeleteFunc(*s, func(p point) bool { return p.t.Before(since) })
	if n := len(*s); n > maxGPUPoints {
		*s = slices.Delete(*s, 0, n-maxGPUPoints)
	}
}

// mean is the mean of the values at or after since.
func (s series) mean(since time.Time) (float64, bool) {
	var sum float64
	n := 0
	for _, p := range s {
		if !p.t.Before(since) {
			sum += p.v
			n++
		}
	}
	if n == 0 {
		return 0, false
	}
	return sum / float64(n), true
}

// open initialises NVML and finds the selected devices; it returns why not,
// or "". A panic from go-nvml (a library that cannot be loaded, a mock
// missing a function) is a reason too.
func (m *nvmlMonitor) open(sel Selection) (reason string) {
	inited := false
	defer func() {
		if p := recover(); p != nil {
			reason = fmt.Sprintf("NVML unavailable: %v", p)
			if inited {
				m.shutdown()
			}
		}
	}()
	if m.lib == nil {
		m.lib = nvml.New()
	}
	if ret := m.lib.Init(); ret != nvml.SUCCESS {
		switch ret {
		case nvml.ERROR_LIBRARY_NOT_FOUND:
			return "NVML unavailable: libnvidia-ml.so.1 not found (no NVIDIA driver)"
		case nvml.ERROR_DRIVER_NOT_LOADED:
			return "NVML unavailable: NVIDIA driver not loaded"
		}
		return "NVML unavailable: init: " + ret.Error()
	}
	inited = true
	fail := func(format string, args ...any) string {
		m.shutdown()
		return "NVML: " + fmt.Sprintf(format, args...)
	}
	n, ret := m.lib.DeviceGetCount()
	if ret != nvml.SUCCESS {
		return fail("device count: %v", ret)
	}
	if n == 0 {
		return fail("no NVIDIA GPUs visible")
	}
	idx := sel.Indices
	if sel.All {
		idx = make([]int, n)
		for i := range idx {
			idx[i] = i
		}
	}
	gpm := m.gpmSymbols()
	for _, i := range idx {
		if i >= n {
			return fail("no GPU %d (%d visible)", i, n)
		}
		dev, ret := m.lib.DeviceGetHandleByIndex(i)
		if ret != nvml.SUCCESS {
			return fail("GPU %d: %v", i, ret)
		}
		d := &nvmlDevice{index: i, dev: dev}
		if name, ret := dev.GetName(); ret == nvml.SUCCESS {
			d.name = name
		}
		if gpm {
			m.openGPM(d)
		}
		m.devs = append(m.devs, d)
	}
	return ""
}

// gpmSymbols says whether the library has GPM's functions (drivers before
// 520 do not; calling a missing one would crash, not fail).
func (m *nvmlMonitor) gpmSymbols() (ok bool) {
	defer func() {
		if recover() != nil {
			ok = false
		}
	}()
	ext := m.lib.Extensions()
	if ext == nil {
		return false
	}
	for _, sym := range []string{
		"nvmlGpmQueryDeviceSupport", "nvmlGpmSampleAlloc", "nvmlGpmSampleGet",
		"nvmlGpmMetricsGet", "nvmlGpmSampleFree",
	} {
		if ext.LookupSymbol(sym) != nil {
			return false
		}
	}
	return true
}

// openGPM turns GPM on for d where the device supports it and its two
// samples can be allocated.
func (m *nvmlMonitor) openGPM(d *nvmlDevice) {
	defer func() {
		if recover() != nil {
			m.freeGPM(d)
		}
	}()
	sup, ret := d.dev.GpmQueryDeviceSupport()
	if ret != nvml.SUCCESS || sup.IsSupportedDevice == 0 {
		return
	}
	if d.gpmPrev, ret = m.lib.GpmSampleAlloc(); ret != nvml.SUCCESS {
		d.gpmPrev = nil
		return
	}
	if d.gpmCur, ret = m.lib.GpmSampleAlloc(); ret != nvml.SUCCESS {
		d.gpmCur = nil
		m.freeGPM(d)
		return
	}
	d.gpm = true
}

// freeGPM frees d's GPM samples and turns GPM off for it.
func (m *nvmlMonitor) freeGPM(d *nvmlDevice) {
	for _, s := range []nvml.GpmSample{d.gpmPrev, d.gpmCur} {
		if s != nil {
			func() {
				defer func() { _ = recover() }()
				s.Free()
			}()
		}
	}
	d.gpmPrev, d.gpmCur, d.gpm, d.gpmHave = nil, nil, false, false
}

// shutdown shuts NVML down, never panicking.
func (m *nvmlMonitor) shutdown() (err error) {
	defer func() {
		if p := recover(); p != nil {
			err = fmt.Errorf("NVML shutdown: %v", p)
		}
	}()
	if ret := m.lib.Shutdown(); ret != nvml.SUCCESS {
		return fmt.Errorf("NVML shutdown: %v", ret)
	}
	return nil
}

func (m *nvmlMonitor) run() {
	defer close(m.done)
	t := time.NewTicker(m.interval)
	defer t.Stop()
	for {
		select {
		case <-m.stop:
			return
		case <-t.C:
			m.tick()
		}
	}
}

// tick polls every device once and adds what it read to their windows.
func (m *nvmlMonitor) tick() {
	m.tickMu.Lock()
	defer m.tickMu.Unlock()
	m.mu.Lock()
	closed := m.closed
	m.mu.Unlock()
	if closed {
		return
	}
	for _, d := range m.devs {
		now := m.now()
		r := m.poll(d, now)
		sm, smOK := m.pollGPM(d)
		since := now.Add(-m.window)
		m.mu.Lock()
		d.busy.add(since, r.busy...)
		if smOK {
			d.sm.add(since, point{now, sm})
		} else {
			d.sm.add(since)
		}
		if r.source != "" {
			d.source = r.source
		}
		d.err = r.err
		m.mu.Unlock()
	}
}

// pollResult is what one poll of one device read.
type pollResult struct {
	busy   []point
	source string // of busy; "" leaves the device's as it was
	err    string
}

// poll reads d's utilization: the driver's samples since the last read, or
// the utilization rates where samples are unsupported, failing, or stale.
func (m *nvmlMonitor) poll(d *nvmlDevice, now time.Time) (r pollResult) {
	defer func() {
		if p := recover(); p != nil {
			r = pollResult{err: fmt.Sprintf("NVML panicked: %v", p)}
		}
	}()
	var errs []string
	if !d.noSamples {
		vt, samples, ret := d.dev.GetSamples(nvml.GPU_UTILIZATION_SAMPLES, d.lastTS)
		switch ret {
		case nvml.SUCCESS:
			if r.busy = d.samplePoints(vt, samples, now); len(r.busy) > 0 {
				r.source = "samples"
			}
		case nvml.ERROR_NOT_FOUND:
			// Nothing newer than lastTS.
		case nvml.ERROR_NOT_SUPPORTED, nvml.ERROR_FUNCTION_NOT_FOUND:
			d.noSamples = true
		default:
			errs = append(errs, "GetSamples: "+ret.Error())
		}
	}
	if len(r.busy) == 0 && (d.noSamples || len(errs) > 0 || now.Sub(d.newest) > gpuStaleAfter) {
		u, ret := d.dev.GetUtilizationRates()
		if ret == nvml.SUCCESS {
			r.busy = []point{{now, clamp01(float64(u.Gpu) / 100)}}
			r.source = "utilization"
			errs = nil
		} else {
			errs = append(errs, "GetUtilizationRates: "+ret.Error())
		}
	}
	for _, p := range r.busy {
		if p.t.After(d.newest) {
			d.newest = p.t
		}
	}
	r.err = strings.Join(errs, "; ")
	return r
}

// samplePoints turns the driver's samples newer than d.lastTS into points:
// the newest at now, the others as much before it as their timestamps say
// (the driver's clock need not be ours).
func (d *nvmlDevice) samplePoints(vt nvml.ValueType, samples []nvml.Sample, now time.Time) []point {
	var maxTS uint64
	for _, s := range samples {
		if s.TimeStamp > d.lastTS && s.TimeStamp > maxTS {
			maxTS = s.TimeStamp
		}
	}
	if maxTS == 0 {
		return nil
	}
	pts := make([]point, 0, len(samples))
	for _, s := range samples {
		if s.TimeStamp <= d.lastTS {
			continue
		}
		v, ok := sampleValue(vt, s.SampleValue)
		if !ok {
			continue
		}
		age := time.Duration(maxTS-s.TimeStamp) * time.Microsecond
		pts = append(pts, point{now.Add(-age), clamp01(v / 100)})
	}
	d.lastTS = maxTS
	return pts
}

// pollGPM reads d's SM utilization between its previous GPM sample and a new
// one (0..1).
func (m *nvmlMonitor) pollGPM(d *nvmlDevice) (v float64, ok bool) {
	if !d.gpm {
		return 0, false
	}
	defer func() {
		if recover() != nil {
			m.freeGPM(d)
			v, ok = 0, false
		}
	}()
	if ret := d.gpmCur.Get(d.dev); ret != nvml.SUCCESS {
		d.gpmHave = false
		if ret == nvml.ERROR_NOT_SUPPORTED {
			m.freeGPM(d)
		}
		return 0, false
	}
	if d.gpmHave {
		mg := &nvml.GpmMetricsGetType{NumMetrics: 1, Sample1: d.gpmPrev, Sample2: d.gpmCur}
		mg.Metrics[0].MetricId = uint32(nvml.GPM_METRIC_SM_UTIL)
		if m.lib.GpmMetricsGet(mg) == nvml.SUCCESS && mg.Metrics[0].NvmlReturn == uint32(nvml.SUCCESS) {
			v, ok = clamp01(mg.Metrics[0].Value/100), true
		}
	}
	d.gpmPrev, d.gpmCur = d.gpmCur, d.gpmPrev
	d.gpmHave = true
	return v, ok
}

// sampleValue decodes a sample's value of type vt.
func sampleValue(vt nvml.ValueType, b [8]byte) (float64, bool) {
	switch vt {
	case nvml.VALUE_TYPE_DOUBLE:
		return math.Float64frombits(binary.NativeEndian.Uint64(b[:])), true
	case nvml.VALUE_TYPE_UNSIGNED_INT:
		return float64(binary.NativeEndian.Uint32(b[:])), true
	case nvml.VALUE_TYPE_UNSIGNED_LONG, nvml.VALUE_TYPE_UNSIGNED_LONG_LONG:
		return float64(binary.NativeEndian.Uint64(b[:])), true
	case nvml.VALUE_TYPE_SIGNED_LONG_LONG:
		return float64(int64(binary.NativeEndian.Uint64(b[:]))), true
	case nvml.VALUE_TYPE_SIGNED_INT:
		return float64(int32(binary.NativeEndian.Uint32(b[:]))), true
	case nvml.VALUE_TYPE_UNSIGNED_SHORT:
		return float64(binary.NativeEndian.Uint16(b[:])), true
	}
	return 0, false
}

func clamp01(v float64) float64 {
	if math.IsNaN(v) {
		return 0
	}
	return min(max(v, 0), 1)
}

// Sample averages each device's window: Busy over the utilization points,
// SMActivity over the GPM ones; IdleRatio is 1 - the mean Busy of the
// devices that have any. A device with no utilization but GPM data reports
// its SM activity as Busy (Source "gpm"), a lower bound of the share of time
// a kernel ran.
func (m *nvmlMonitor) Sample() Sample {
	now := m.now()
	since := now.Add(-m.window)
	m.mu.Lock()
	defer m.mu.Unlock()
	if m.closed {
		return Sample{Reason: "GPU monitor closed", IdleRatio: -1}
	}
	out := Sample{Devices: make([]DeviceSample, 0, len(m.devs)), IdleRatio: -1}
	var sum float64
	n := 0
	var errs []string
	for _, d := range m.devs {
		ds := DeviceSample{Index: d.index, Name: d.name, Busy: -1, SMActivity: -1, Err: d.err}
		if s, ok := d.sm.mean(since); ok {
			ds.SMActivity = s
		}
		if b, ok := d.busy.mean(since); ok {
			ds.Busy, ds.Source = b, d.source
		} else if ds.SMActivity >= 0 {
			ds.Busy, ds.Source = ds.SMActivity, "gpm"
		}
		if ds.Busy >= 0 {
			sum += ds.Busy
			n++
		} else if d.err != "" {
			errs = append(errs, fmt.Sprintf("GPU %d: %s", d.index, d.err))
		}
		out.Devices = append(out.Devices, ds)
	}
	switch {
	case n > 0:
		out.Available = true
		out.IdleRatio = clamp01(1 - sum/float64(n))
	case len(errs) > 0:
		out.Reason = "NVML: " + strings.Join(errs, "; ")
	default:
		out.Reason = "NVML: no utilization in the window yet"
	}
	return out
}

// Close stops the sampler, frees the GPM samples and shuts NVML down.
func (m *nvmlMonitor) Close() error {
	m.closeOnce.Do(func() {
		close(m.stop)
		<-m.done
		m.tickMu.Lock()
		defer m.tickMu.Unlock()
		m.mu.Lock()
		m.closed = true
		m.mu.Unlock()
		for _, d := range m.devs {
			m.freeGPM(d)
		}
		m.closeErr = m.shutdown()
	})
	return m.closeErr
}
