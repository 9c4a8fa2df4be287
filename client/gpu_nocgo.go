//go:build !cgo || nonvml

package client

import "time"

// gpuOptions is empty without cgo or with the nonvml tag (the static build,
// where glibc's dlopen cannot load libnvidia-ml.so safely): there is no
// NVML to configure.
type gpuOptions struct{}

// NewGPUMonitor without cgo cannot reach NVML (go-nvml dlopens
// libnvidia-ml.so through cgo), nor in a static build (tag nonvml): the
// monitor reports unavailable and why, unless the selection is none.
func NewGPUMonitor(sel GPUSelection, window time.Duration, opts ...GPUOption) GPUMonitor {
	if sel.None() {
		return unavailableGPU{reason: reasonNone}
	}
	return unavailableGPU{reason: "NVML unavailable: built without cgo, or static (tag nonvml)"}
}
