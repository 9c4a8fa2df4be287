package gpu

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

func TestFileMonitor(t *testing.T) {
	dir := t.TempDir()
	path := filepath.Join(dir, "idle")
	written := time.Now()
	for _, tc := range []struct {
		name     string
		content  string // "" with noFile: no file
		noFile   bool
		age      time.Duration // how long after the write Sample looks
		want     float64
		wantErr  string
		wantBusy float64
	}{
		{name: "missing", noFile: true, wantErr: "no such file"},
		{name: "idle", content: "0.25\n", want: 0.25, wantBusy: 0.75},
		{name: "saturated", content: "0", want: 0, wantBusy: 1},
		{name: "starved", content: " 1 ", want: 1, wantBusy: 0},
		{name: "not a number", content: "idle", wantErr: "not an idle ratio"},
		{name: "NaN", content: "NaN", wantErr: "not an idle ratio"},
		{name: "above 1", content: "1.5", wantErr: "not an idle ratio"},
		{name: "negative", content: "-0.1", wantErr: "not an idle ratio"},
		{name: "empty", content: "", wantErr: "not an idle ratio"},
		{name: "fresh enough", content: "0.5", age: FileMaxAge - time.Second, want: 0.5, wantBusy: 0.5},
		{name: "stale", content: "0.5", age: FileMaxAge + time.Second, wantErr: "stale after"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			os.Remove(path)
			if !tc.noFile {
				if err := os.WriteFile(path, []byte(tc.content), 0o644); err != nil {
					t.Fatal(err)
				}
				if err := os.Chtimes(path, written, written); err != nil {
					t.Fatal(err)
				}
			}
			m := NewFileMonitor(path, 0)
			f := m.(fileGPU)
			f.now = func() time.Time { return written.Add(tc.age) }
			s := f.Sample()
			if tc.wantErr != "" {
				if s.Available || s.IdleRatio != -1 || !strings.Contains(s.Reason, tc.wantErr) || !strings.Contains(s.Reason, "--bench-gpu-idle-file") {
					t.Errorf("Sample() = %+v; want unavailable, reason containing %q", s, tc.wantErr)
				}
				return
			}
			if !s.Available || s.IdleRatio != tc.want || len(s.Devices) != 1 || s.Devices[0].Busy != tc.wantBusy || s.Devices[0].Source != "file" {
				t.Errorf("Sample() = %+v; want available, idle %v", s, tc.want)
			}
			if err := m.Close(); err != nil {
				t.Errorf("Close: %v", err)
			}
		})
	}
}
