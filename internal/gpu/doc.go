// Package gpu samples the trainer's GPUs through NVML (go-nvml): the idle
// share over a window, per device and in all. Without a driver, without
// cgo or in the static build (tag nonvml) the monitor reports unavailable
// with the reason. Tests use go-nvml's mock.
package gpu
