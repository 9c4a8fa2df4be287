//go:build !cgo || nonvml

package gpu

import "time"

// options is empty without cgo or with the nonvml tag (the static build,
// where glibc's dlopen cannot load libnvidia-ml.so safely): there is no
// NVML to configure.
type options struct{}

// NewMonitor without cgo cannot reach NVML (go-nvml dlopens
// libnvidia-ml.so through cgo), nor in a static build (tag nonvml): the
// monitor reports unavailable and why, unless the selection is none.
func NewMonitor(sel Selection, window time.Duration, opts ...Option) Monitor {
	if sel.None() {
		return unavailableGPU{reason: reasonNone}
	}
	return unavailableGPU{reason: "NVML unavailable: built without cgo, or static (tag nonvml)"}
}
