//go:build cgo && !nonvml

package gpu

import (
	"encoding/binary"
	"errors"
	"math"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"testing/synctest"
	"time"

	"github.com/NVIDIA/go-nvml/pkg/nvml"
	"github.com/NVIDIA/go-nvml/pkg/nvml/mock"
)

// gpuClock is a settable clock for the monitor and the fake driver.
type gpuClock struct {
	mu sync.Mutex
	t  time.Time
}

func newGPUClock() *gpuClock { return &gpuClock{t: time.Unix(1_700_000_000, 0)} }

func (c *gpuClock) now() time.Time {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.t
}

func (c *gpuClock) advance(d time.Duration) {
	c.mu.Lock()
	c.t = c.t.Add(d)
	c.mu.Unlock()
}

// fakeGPU is one device of a fake driver: every GetSamples returns one new
// sample of its current busy percentage, stamped with the clock's time.
type fakeGPU struct {
	name string
	busy atomic.Uint32 // percent

	samplesUnsupported bool
	utilUnsupported    bool
	history            []nvml.Sample // returned (before the new one) on the first read
	gpm                bool          // GPM supported; SM utilization = smUtil percent
	smUtil             float64
}

// fakeMachine is a mock NVML over fakeGPUs.
type fakeMachine struct {
	lib      *mock.Interface
	devs     []*mock.Device
	shutdown atomic.Int32
	gpmFreed atomic.Int32
}

func u32Sample(ts uint64, v uint32) nvml.Sample {
	s := nvml.Sample{TimeStamp: ts}
	binary.NativeEndian.PutUint32(s.SampleValue[:], v)
	return s
}

func newFakeMachine(clock *gpuClock, gpus ...*fakeGPU) *fakeMachine {
	fm := &fakeMachine{}
	for _, g := range gpus {
		g := g
		first := true
		fm.devs = append(fm.devs, &mock.Device{
			GetNameFunc: func() (string, nvml.Return) { return g.name, nvml.SUCCESS },
			GetSamplesFunc: func(st nvml.SamplingType, last uint64) (nvml.ValueType, []nvml.Sample, nvml.Return) {
				if g.samplesUnsupported {
					return 0, nil, nvml.ERROR_NOT_SUPPORTED
				}
				if st != nvml.GPU_UTILIZATION_SAMPLES {
					return 0, nil, nvml.ERROR_INVALID_ARGUMENT
				}
				ts := uint64(clock.now().UnixMicro())
				if ts <= last {
					return nvml.VALUE_TYPE_UNSIGNED_INT, nil, nvml.ERROR_NOT_FOUND
				}
				var out []nvml.Sample
				if first {
					out = append(out, g.history...)
					first = false
				}
				return nvml.VALUE_TYPE_UNSIGNED_INT, append(out, u32Sample(ts, g.busy.Load())), nvml.SUCCESS
			},
			GetUtilizationRatesFunc: func() (nvml.Utilization, nvml.Return) {
				if g.utilUnsupported {
					return nvml.Utilization{}, nvml.ERROR_NOT_SUPPORTED
				}
				return nvml.Utilization{Gpu: g.busy.Load(), Memory: 5}, nvml.SUCCESS
			},
			GpmQueryDeviceSupportFunc: func() (nvml.GpmSupport, nvml.Return) {
				sup := nvml.GpmSupport{Version: 1}
				if g.gpm {
					sup.IsSupportedDevice = 1
				}
				return sup, nvml.SUCCESS
			},
		})
	}
	gpmOf := map[nvml.GpmSample]*fakeGPU{}
	var gpmMu sync.Mutex
	fm.lib = &mock.Interface{
		InitFunc:           func() nvml.Return { return nvml.SUCCESS },
		ShutdownFunc:       func() nvml.Return { fm.shutdown.Add(1); return nvml.SUCCESS },
		DeviceGetCountFunc: func() (int, nvml.Return) { return len(fm.devs), nvml.SUCCESS },
		DeviceGetHandleByIndexFunc: func(i int) (nvml.Device, nvml.Return) {
			if i < 0 || i >= len(fm.devs) {
				return nil, nvml.ERROR_INVALID_ARGUMENT
			}
			return fm.devs[i], nvml.SUCCESS
		},
		ExtensionsFunc: func() nvml.ExtendedInterface {
			return &mock.ExtendedInterface{LookupSymbolFunc: func(string) error { return nil }}
		},
		GpmSampleAllocFunc: func() (nvml.GpmSample, nvml.Return) {
			s := &mock.GpmSample{FreeFunc: func() nvml.Return { fm.gpmFreed.Add(1); return nvml.SUCCESS }}
			s.GetFunc = func(d nvml.Device) nvml.Return {
				for i, md := range fm.devs {
					if md == d {
						gpmMu.Lock()
						gpmOf[s] = gpus[i]
						gpmMu.Unlock()
						return nvml.SUCCESS
					}
				}
				return nvml.ERROR_INVALID_ARGUMENT
			}
			return s, nvml.SUCCESS
		},
		GpmMetricsGetFunc: func(mg *nvml.GpmMetricsGetType) nvml.Return {
			gpmMu.Lock()
			g1, g2 := gpmOf[mg.Sample1], gpmOf[mg.Sample2]
			gpmMu.Unlock()
			if mg.NumMetrics != 1 || mg.Metrics[0].MetricId != uint32(nvml.GPM_METRIC_SM_UTIL) ||
				g1 == nil || g1 != g2 || mg.Sample1 == mg.Sample2 {
				return nvml.ERROR_INVALID_ARGUMENT
			}
			mg.Metrics[0].Value = g1.smUtil
			mg.Metrics[0].NvmlReturn = uint32(nvml.SUCCESS)
			return nvml.SUCCESS
		},
	}
	return fm
}

func newFakeGPU(name string, busy uint32) *fakeGPU {
	g := &fakeGPU{name: name}
	g.busy.Store(busy)
	return g
}

// tickFor advances the clock by d in 200 ms steps, polling after each.
func tickFor(m Monitor, clock *gpuClock, d time.Duration) {
	nm := m.(*nvmlMonitor)
	for t := time.Duration(0); t < d; t += 200 * time.Millisecond {
		clock.advance(200 * time.Millisecond)
		nm.tick()
	}
}

func near(a, b float64) bool { return math.Abs(a-b) < 1e-9 }

func newTestMonitor(t *testing.T, fm *fakeMachine, clock *gpuClock, sel string) Monitor {
	t.Helper()
	s, err := ParseSelection(sel)
	if err != nil {
		t.Fatal(err)
	}
	m := NewMonitor(s, 5*time.Second, WithNVML(fm.lib), withGPUInterval(0), withGPUClock(clock.now))
	t.Cleanup(func() { m.Close() })
	return m
}

func TestGPUMonitorBusyAndIdle(t *testing.T) {
	clock := newGPUClock()
	g0, g1 := newFakeGPU("NVIDIA H100 80GB HBM3", 90), newFakeGPU("NVIDIA H100 80GB HBM3", 0)
	fm := newFakeMachine(clock, g0, g1)
	m := newTestMonitor(t, fm, clock, "all")
	tickFor(m, clock, 2*time.Second)

	s := m.Sample()
	if !s.Available || s.Reason != "" || len(s.Devices) != 2 {
		t.Fatalf("Sample() = %+v; want available, 2 devices", s)
	}
	for i, want := range []float64{0.9, 0} {
		d := s.Devices[i]
		if d.Index != i || d.Name != "NVIDIA H100 80GB HBM3" || !near(d.Busy, want) || d.Source != "samples" ||
			d.SMActivity != -1 || d.Err != "" {
			t.Errorf("device %d = %+v; want busy %v from samples, no GPM", i, d, want)
		}
	}
	if !near(s.IdleRatio, 0.55) {
		t.Errorf("IdleRatio = %v; want 0.55 (mean busy 0.45)", s.IdleRatio)
	}

	// The window slides: after more than 5 s at 10%, the 90% is gone.
	g0.busy.Store(10)
	tickFor(m, clock, 6*time.Second)
	s = m.Sample()
	if !near(s.Devices[0].Busy, 0.1) || !near(s.IdleRatio, 0.95) {
		t.Errorf("after the window: device 0 busy %v, IdleRatio %v; want 0.1, 0.95", s.Devices[0].Busy, s.IdleRatio)
	}
	// Each poll asked only for samples newer than the last one seen.
	calls := fm.devs[0].GetSamplesCalls()
	if len(calls) < 2 || calls[0].V != 0 || calls[len(calls)-1].V == 0 {
		t.Errorf("GetSamples lastSeen args: first %d, last %d; want 0 then the previous timestamp", calls[0].V, calls[len(calls)-1].V)
	}
}

// The driver's buffer, on the first read, holds samples older than the
// window: only those within it count.
func TestGPUMonitorSampleHistoryWindow(t *testing.T) {
	clock := newGPUClock()
	g := newFakeGPU("gpu", 20)
	base := clock.now().Add(200 * time.Millisecond) // the first read's time
	for age := 10 * time.Second; age > 0; age -= time.Second {
		v := uint32(20)
		if age > 5*time.Second {
			v = 100
		}
		g.history = append(g.history, u32Sample(uint64(base.Add(-age).UnixMicro()), v))
	}
	fm := newFakeMachine(clock, g)
	clock.advance(200 * time.Millisecond)
	m := newTestMonitor(t, fm, clock, "0")
	s := m.Sample()
	if !s.Available || !near(s.Devices[0].Busy, 0.2) {
		t.Fatalf("Sample() = %+v; want busy 0.2 (the 100%% samples are older than the window)", s)
	}
}

func TestGPUMonitorSelectsOne(t *testing.T) {
	clock := newGPUClock()
	fm := newFakeMachine(clock, newFakeGPU("a", 90), newFakeGPU("b", 0))
	m := newTestMonitor(t, fm, clock, "1")
	tickFor(m, clock, time.Second)
	s := m.Sample()
	if !s.Available || len(s.Devices) != 1 || s.Devices[0].Index != 1 || s.Devices[0].Name != "b" || !near(s.IdleRatio, 1) {
		t.Fatalf("--gpus 1: Sample() = %+v; want device 1 alone, idle", s)
	}
	for _, c := range fm.lib.DeviceGetHandleByIndexCalls() {
		if c.N != 1 {
			t.Errorf("DeviceGetHandleByIndex(%d) called; want only 1", c.N)
		}
	}
	if n := len(fm.devs[0].GetSamplesCalls()); n != 0 {
		t.Errorf("device 0 polled %d times; want 0", n)
	}
}

func TestGPUMonitorMissingIndex(t *testing.T) {
	clock := newGPUClock()
	fm := newFakeMachine(clock, newFakeGPU("a", 90), newFakeGPU("b", 0))
	m := newTestMonitor(t, fm, clock, "0,3")
	s := m.Sample()
	if s.Available || !strings.Contains(s.Reason, "no GPU 3 (2 visible)") || s.IdleRatio != -1 {
		t.Fatalf("--gpus 0,3 on 2 GPUs: Sample() = %+v; want unavailable, no GPU 3", s)
	}
	if fm.shutdown.Load() != 1 {
		t.Errorf("Shutdown called %d times; want 1 (init succeeded)", fm.shutdown.Load())
	}
}

func TestGPUMonitorUtilizationFallback(t *testing.T) {
	clock := newGPUClock()
	g := newFakeGPU("old", 75)
	g.samplesUnsupported = true
	fm := newFakeMachine(clock, g)
	m := newTestMonitor(t, fm, clock, "all")
	tickFor(m, clock, time.Second)
	s := m.Sample()
	d := s.Devices[0]
	if !s.Available || !near(d.Busy, 0.75) || d.Source != "utilization" || d.Err != "" || !near(s.IdleRatio, 0.25) {
		t.Fatalf("Sample() = %+v; want busy 0.75 from utilization", s)
	}
	if n := len(fm.devs[0].GetSamplesCalls()); n != 1 {
		t.Errorf("GetSamples called %d times; want 1 (not supported: never again)", n)
	}
	if n := len(fm.devs[0].GetUtilizationRatesCalls()); n != 6 {
		t.Errorf("GetUtilizationRates called %d times; want 6 (every poll)", n)
	}
}

func TestGPUMonitorDeviceErrors(t *testing.T) {
	clock := newGPUClock()
	g := newFakeGPU("mig", 50)
	g.samplesUnsupported, g.utilUnsupported = true, true
	fm := newFakeMachine(clock, g)
	m := newTestMonitor(t, fm, clock, "all")
	tickFor(m, clock, time.Second)
	s := m.Sample()
	if s.Available || s.IdleRatio != -1 || !strings.Contains(s.Reason, "GPU 0: GetUtilizationRates: ERROR_NOT_SUPPORTED") ||
		len(s.Devices) != 1 || s.Devices[0].Busy != -1 || s.Devices[0].Source != "" {
		t.Fatalf("Sample() = %+v; want unavailable with the device's error", s)
	}
}

func TestGPUMonitorGPM(t *testing.T) {
	clock := newGPUClock()
	hopper, ampere := newFakeGPU("H100", 80), newFakeGPU("A100", 80)
	hopper.gpm, hopper.smUtil = true, 42
	fm := newFakeMachine(clock, hopper, ampere)
	m := newTestMonitor(t, fm, clock, "all")
	tickFor(m, clock, time.Second)
	s := m.Sample()
	if !near(s.Devices[0].SMActivity, 0.42) || !near(s.Devices[0].Busy, 0.8) || s.Devices[0].Source != "samples" {
		t.Errorf("Hopper = %+v; want SMActivity 0.42, busy 0.8 from samples", s.Devices[0])
	}
	if s.Devices[1].SMActivity != -1 {
		t.Errorf("Ampere = %+v; want SMActivity -1 (no GPM)", s.Devices[1])
	}
	if n := len(fm.lib.GpmSampleAllocCalls()); n != 2 {
		t.Errorf("GpmSampleAlloc called %d times; want 2 (the Hopper's pair)", n)
	}
	if err := m.Close(); err != nil {
		t.Fatal(err)
	}
	if fm.gpmFreed.Load() != 2 {
		t.Errorf("GPM samples freed: %d; want 2", fm.gpmFreed.Load())
	}
}

// Without samples or utilization rates (MIG-like), GPM's SM activity stands
// in for Busy.
func TestGPUMonitorGPMOnly(t *testing.T) {
	clock := newGPUClock()
	g := newFakeGPU("H100", 0)
	g.samplesUnsupported, g.utilUnsupported, g.gpm, g.smUtil = true, true, true, 30
	fm := newFakeMachine(clock, g)
	m := newTestMonitor(t, fm, clock, "all")
	tickFor(m, clock, time.Second)
	s := m.Sample()
	if !s.Available || s.Devices[0].Source != "gpm" || !near(s.Devices[0].Busy, 0.3) || !near(s.IdleRatio, 0.7) {
		t.Fatalf("Sample() = %+v; want busy 0.3 from gpm", s)
	}
}

// A driver without GPM's symbols is never asked about GPM.
func TestGPUMonitorGPMSymbolsMissing(t *testing.T) {
	clock := newGPUClock()
	g := newFakeGPU("H100", 80)
	g.gpm, g.smUtil = true, 42
	fm := newFakeMachine(clock, g)
	fm.lib.ExtensionsFunc = func() nvml.ExtendedInterface {
		return &mock.ExtendedInterface{LookupSymbolFunc: func(s string) error { return errors.New(s + ": undefined symbol") }}
	}
	m := newTestMonitor(t, fm, clock, "all")
	tickFor(m, clock, time.Second)
	if s := m.Sample(); s.Devices[0].SMActivity != -1 || !near(s.Devices[0].Busy, 0.8) {
		t.Errorf("Sample() = %+v; want no GPM, busy 0.8", s)
	}
	if n := len(fm.devs[0].GpmQueryDeviceSupportCalls()); n != 0 {
		t.Errorf("GpmQueryDeviceSupport called %d times; want 0", n)
	}
}

func TestGPUMonitorInitFails(t *testing.T) {
	for _, tc := range []struct {
		name   string
		init   func() nvml.Return
		reason string
	}{
		{"no library", func() nvml.Return { return nvml.ERROR_LIBRARY_NOT_FOUND }, "libnvidia-ml.so.1 not found"},
		{"no driver", func() nvml.Return { return nvml.ERROR_DRIVER_NOT_LOADED }, "driver not loaded"},
		{"other", func() nvml.Return { return nvml.ERROR_NO_PERMISSION }, "init: ERROR_NO_PERMISSION"},
		{"panic", func() nvml.Return { panic("dlopen: boom") }, "dlopen: boom"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var shutdown atomic.Int32
			lib := &mock.Interface{
				InitFunc:     tc.init,
				ShutdownFunc: func() nvml.Return { shutdown.Add(1); return nvml.SUCCESS },
			}
			m := NewMonitor(Selection{All: true}, time.Second, WithNVML(lib))
			for range 3 {
				s := m.Sample()
				if s.Available || !strings.Contains(s.Reason, tc.reason) || s.IdleRatio != -1 || s.Devices != nil {
					t.Fatalf("Sample() = %+v; want unavailable, reason containing %q", s, tc.reason)
				}
			}
			if err := m.Close(); err != nil {
				t.Errorf("Close: %v", err)
			}
			if shutdown.Load() != 0 {
				t.Errorf("Shutdown called %d times after a failed init; want 0", shutdown.Load())
			}
		})
	}
}

// An NVML that panics mid-poll (here a mock missing its functions) makes
// an unavailable sample, not a crash.
func TestGPUMonitorPollPanics(t *testing.T) {
	dev := &mock.Device{GetNameFunc: func() (string, nvml.Return) { return "x", nvml.SUCCESS }}
	lib := &mock.Interface{
		InitFunc:                   func() nvml.Return { return nvml.SUCCESS },
		ShutdownFunc:               func() nvml.Return { return nvml.SUCCESS },
		DeviceGetCountFunc:         func() (int, nvml.Return) { return 1, nvml.SUCCESS },
		DeviceGetHandleByIndexFunc: func(int) (nvml.Device, nvml.Return) { return dev, nvml.SUCCESS },
	}
	m := NewMonitor(Selection{All: true}, time.Second, WithNVML(lib), withGPUInterval(0))
	defer m.Close()
	m.(*nvmlMonitor).tick()
	s := m.Sample()
	if s.Available || !strings.Contains(s.Reason, "panicked") || len(s.Devices) != 1 {
		t.Fatalf("Sample() = %+v; want unavailable, the panic as reason", s)
	}
}

// Close stops the sampler goroutine (no more NVML calls) and shuts NVML down
// once. In a synctest bubble: the sampler's ticker runs on the fake clock,
// so "it polled" and "it polls no more" are each a matter of intervals, not
// of how busy the machine is.
func TestGPUMonitorCloseStopsSampler(t *testing.T) {
	synctest.Test(t, testGPUMonitorCloseStopsSampler)
}

func testGPUMonitorCloseStopsSampler(t *testing.T) {
	const interval = 2 * time.Millisecond
	clock := newGPUClock()
	fm := newFakeMachine(clock, newFakeGPU("a", 50))
	m := NewMonitor(Selection{All: true}, time.Second, WithNVML(fm.lib), withGPUInterval(interval))
	nm := m.(*nvmlMonitor)
	polls := func() int { return len(fm.devs[0].GetSamplesCalls()) + len(fm.devs[0].GetUtilizationRatesCalls()) }
	// NewMonitor's own poll, then one a tick: five ticks, five more polls.
	for range 5 {
		clock.advance(100 * time.Millisecond)
		time.Sleep(interval)
		synctest.Wait()
	}
	if n := polls(); n < 6 {
		t.Fatalf("%d polls in NewMonitor and 5 intervals, want 6", n)
	}
	if s := m.Sample(); !s.Available {
		t.Fatalf("Sample() = %+v; want available", s)
	}
	if err := m.Close(); err != nil {
		t.Fatal(err)
	}
	select {
	case <-nm.done:
	default:
		t.Fatal("Close returned with the sampler still running")
	}
	n := polls()
	time.Sleep(10 * interval)
	synctest.Wait()
	if polls() != n {
		t.Errorf("NVML polled after Close: %d then %d calls", n, polls())
	}
	if err := m.Close(); err != nil {
		t.Errorf("second Close: %v", err)
	}
	if fm.shutdown.Load() != 1 {
		t.Errorf("Shutdown called %d times; want 1", fm.shutdown.Load())
	}
	if s := m.Sample(); s.Available || !strings.Contains(s.Reason, "closed") {
		t.Errorf("Sample() after Close = %+v; want unavailable, closed", s)
	}
}
