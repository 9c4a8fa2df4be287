package gpu

import (
	"fmt"
	"os"
	"strconv"
	"strings"
	"time"
)

// FileMaxAge is how old the file of a FileMonitor may be before its
// figure counts as gone: a simulator that stopped writing no longer speaks
// for a GPU.
const FileMaxAge = 5 * time.Second

// NewFileMonitor is a Monitor for benchmarks only, standing in for NVML at
// the hardware edge: a simulated trainer writes its simulated GPU's idle
// share over its last few seconds to path (one decimal number in 0..1,
// replaced whole, by rename), and every Sample reads it. A file that is
// missing, not a number in 0..1, or older than maxAge (FileMaxAge when
// maxAge <= 0) makes the sample unavailable, with the reason.
func NewFileMonitor(path string, maxAge time.Duration) Monitor {
	if maxAge <= 0 {
		maxAge = FileMaxAge
	}
	return fileGPU{path: path, maxAge: maxAge, now: time.Now}
}

type fileGPU struct {
	path   string
	maxAge time.Duration
	now    func() time.Time
}

func (f fileGPU) Sample() Sample {
	idle, err := f.read()
	if err != nil {
		return Sample{Reason: "simulated GPU (--bench-gpu-idle-file): " + err.Error(), IdleRatio: -1}
	}
	return Sample{
		Available: true,
		Devices:   []DeviceSample{{Index: 0, Name: "simulated (" + f.path + ")", Busy: 1 - idle, SMActivity: -1, Source: "file"}},
		IdleRatio: idle,
	}
}

func (f fileGPU) read() (float64, error) {
	fi, err := os.Stat(f.path)
	if err != nil {
		return 0, err
	}
	if age := f.now().Sub(fi.ModTime()); age > f.maxAge {
		return 0, fmt.Errorf("%s was last written %v ago (stale after %v)", f.path, age.Round(time.Millisecond), f.maxAge)
	}
	data, err := os.ReadFile(f.path)
	if err != nil {
		return 0, err
	}
	s := strings.TrimSpace(string(data))
	v, err := strconv.ParseFloat(s, 64)
	if err != nil || !(v >= 0 && v <= 1) {
		return 0, fmt.Errorf("%s: %.32q is not an idle ratio in 0..1", f.path, s)
	}
	return v, nil
}

func (fileGPU) Close() error { return nil }
