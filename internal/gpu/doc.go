// Package gpu samples the trainer's GPUs through NVML (go-nvml): the idle
// share over a window, per device and in all, from the driver's
// utilization samples (nvmlDeviceGetSamples), its polled utilization rates
// where samples are not supported, and GPM's SM activity where the device
// has it (Hopper and later). Without a driver, without cgo or in the
// static build (tag nonvml) the monitor reports unavailable with the
// reason. NewFileMonitor reads a simulated GPU's idle share from a file
// instead, for benchmarks (stoker serve --bench-gpu-idle-file). Tests use
// go-nvml's mock.
package gpu
