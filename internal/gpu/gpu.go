package gpu

import (
	"fmt"
	"slices"
	"strconv"
	"strings"
)

// GPU monitoring: NVML's view of the trainer's GPUs. Where a monitor is
// available, the GPUs' idle share over the window is the starvation the
// window controller and the advisor act on, the trainer's measured wait
// corroborating it (the least of the two: a GPU idle while the trainer
// never waits is not starved of input); without one, the trainer's wait
// stands in (server/internal/coord, advisor.go).
//
// What NVML's numbers mean. The driver's "GPU utilization" is the share of a
// sample period (1/6 s to 1 s, depending on the product) during which at
// least one kernel was running on the device. It is coarse on both axes: a
// single small kernel makes a period count as busy, and a trainer that waits
// 30 ms for every batch between 100 ms steps still shows mostly busy periods.
// So it tells saturated from idle (a GPU that stays near 100% is not starved;
// one near 0% while the trainer reports waiting is starved), and its idle
// share is closer to what the GPU lost for want of input than the
// trainer's wait, which CUDA's running ahead inflates (a trainer waits in
// next() while its GPU still works on the step before). GPM's SM activity
// (Hopper and later) is finer: the share of SMs busy, averaged over the
// interval between two samples; a GPU that runs one kernel at a time on a few
// SMs is "busy" to the utilization counter and barely active to GPM.

// Monitor samples the utilization of the selected GPUs in the background.
// Sample and Close are safe for concurrent use.
type Monitor interface {
	// Sample is the monitor's view over its window, as of now. It never
	// blocks on NVML and never panics; without NVML it says why.
	Sample() Sample
	// Close stops the sampler and shuts NVML down. It is idempotent.
	Close() error
}

// Sample is a Monitor's view of its GPUs over its window.
type Sample struct {
	// Available says the sample carries a measurement: NVML is there and
	// at least one selected device gave utilization within the window.
	Available bool
	// Reason says why not when Available is false ("no NVIDIA driver",
	// "built without cgo", "disabled (--gpus none)", a device's error).
	Reason string
	// Devices are the selected devices, in the selection's order (empty
	// when NVML is unavailable).
	Devices []DeviceSample
	// IdleRatio is 1 - the mean of Busy over the devices that have data:
	// 0 for saturated GPUs, 1 for idle ones. Meaningful only when
	// Available; -1 otherwise.
	IdleRatio float64
}

// DeviceSample is one device's utilization over the monitor's window.
type DeviceSample struct {
	// Index is the device's NVML index (nvidia-smi's order, by PCI bus;
	// not necessarily CUDA's, which depends on CUDA_DEVICE_ORDER and
	// CUDA_VISIBLE_DEVICES).
	Index int
	// Name is the product name NVML reports ("NVIDIA H100 80GB HBM3").
	Name string
	// Busy is the mean, over the window, of the share of time at least one
	// kernel was running (0..1); -1 when the device gave none in the window.
	Busy float64
	// SMActivity is GPM's SM utilization, the share of SMs busy, averaged
	// over the window (0..1); -1 where GPM is not supported (before
	// Hopper, older drivers, MIG) or gave nothing in the window.
	SMActivity float64
	// Source is where Busy came from: "samples" (nvmlDeviceGetSamples, the
	// driver's own per-period samples), "utilization"
	// (nvmlDeviceGetUtilizationRates, polled, where samples are not
	// supported or have stopped), "gpm" (neither answers but GPM does:
	// Busy is then SMActivity, a lower bound of the kernel-running share),
	// or "" when there is no data. SMActivity always comes from GPM.
	Source string
	// Err is the device's last NVML error, if its last poll failed.
	Err string
}

// Selection is the set of GPUs a monitor watches: all that NVML sees, an
// explicit list of NVML indices, or none. The zero value is none; ParseSelection
// makes one from the --gpus flag. A *Selection is a flag.Value.
type Selection struct {
	// All selects every device NVML sees; Indices is then ignored.
	All bool
	// Indices are NVML device indices, ascending and distinct.
	Indices []int
}

// None says the selection watches nothing (monitoring off).
func (s Selection) None() bool { return !s.All && len(s.Indices) == 0 }

// String is the selection in ParseSelection's syntax: "all", "none" or "0,1".
func (s Selection) String() string {
	if s.All {
		return "all"
	}
	if len(s.Indices) == 0 {
		return "none"
	}
	parts := make([]string, len(s.Indices))
	for i, n := range s.Indices {
		parts[i] = strconv.Itoa(n)
	}
	return strings.Join(parts, ",")
}

// Set parses v with ParseSelection (flag.Value).
func (s *Selection) Set(v string) error {
	sel, err := ParseSelection(v)
	if err != nil {
		return err
	}
	*s = sel
	return nil
}

// ParseSelection parses a --gpus value: "all" (every device NVML sees), "none"
// (no monitoring), or a comma-separated list of NVML device indices ("0,1").
// Case and surrounding spaces are ignored; the list is sorted. An empty
// value, an empty element, a negative or non-numeric index, or an index
// listed twice is an error.
func ParseSelection(s string) (Selection, error) {
	v := strings.TrimSpace(s)
	switch strings.ToLower(v) {
	case "all":
		return Selection{All: true}, nil
	case "none":
		return Selection{}, nil
	case "":
		return Selection{}, fmt.Errorf(`gpus: empty; want "all", "none" or indices like "0,1"`)
	}
	var idx []int
	for _, part := range strings.Split(v, ",") {
		p := strings.TrimSpace(part)
		if p == "" {
			return Selection{}, fmt.Errorf(`gpus %q: empty element; want "all", "none" or indices like "0,1"`, s)
		}
		n, err := strconv.Atoi(p)
		if err != nil || n < 0 {
			return Selection{}, fmt.Errorf(`gpus %q: %q is not a device index; want "all", "none" or indices like "0,1"`, s, p)
		}
		if slices.Contains(idx, n) {
			return Selection{}, fmt.Errorf("gpus %q: device %d listed twice", s, n)
		}
		idx = append(idx, n)
	}
	slices.Sort(idx)
	return Selection{Indices: idx}, nil
}

// Option configures NewMonitor.
type Option func(*options)

// unavailableGPU is the monitor without NVML: every Sample says why.
type unavailableGPU struct{ reason string }

func (u unavailableGPU) Sample() Sample {
	return Sample{Reason: u.reason, IdleRatio: -1}
}

func (unavailableGPU) Close() error { return nil }

// reasonNone is the Reason of a monitor with an empty selection.
const reasonNone = "disabled (--gpus none)"
