//go:build !cgo

package client

import "time"

// gpuOptions is empty without cgo: go-nvml needs cgo, so there is nothing to
// configure.
type gpuOptions struct{}

// NewGPUMonitor without cgo cannot reach NVML (go-nvml dlopens
// libnvidia-ml.so through cgo): the monitor reports unavailable, "built
// without cgo", unless the selection is none.
func NewGPUMonitor(sel GPUSelection, window time.Duration, opts ...GPUOption) GPUMonitor {
	if sel.None() {
		return unavailableGPU{reason: reasonNone}
	}
	return unavailableGPU{reason: "NVML unavailable: built without cgo"}
}
