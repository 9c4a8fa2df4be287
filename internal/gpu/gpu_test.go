package gpu

import (
	"slices"
	"strings"
	"testing"
	"time"
)

func TestParseGPUs(t *testing.T) {
	for _, tc := range []struct {
		in      string
		want    Selection
		str     string
		wantErr string
	}{
		{in: "all", want: Selection{All: true}, str: "all"},
		{in: " ALL ", want: Selection{All: true}, str: "all"},
		{in: "none", want: Selection{}, str: "none"},
		{in: "None", want: Selection{}, str: "none"},
		{in: "0", want: Selection{Indices: []int{0}}, str: "0"},
		{in: "0,1", want: Selection{Indices: []int{0, 1}}, str: "0,1"},
		{in: "3, 1 ,2", want: Selection{Indices: []int{1, 2, 3}}, str: "1,2,3"},
		{in: "", wantErr: "empty"},
		{in: "  ", wantErr: "empty"},
		{in: "0,,1", wantErr: "empty element"},
		{in: "0,", wantErr: "empty element"},
		{in: "-1", wantErr: "not a device index"},
		{in: "gpu0", wantErr: "not a device index"},
		{in: "0-3", wantErr: "not a device index"},
		{in: "1.5", wantErr: "not a device index"},
		{in: "all,0", wantErr: "not a device index"},
		{in: "1,1", wantErr: "listed twice"},
	} {
		got, err := ParseSelection(tc.in)
		if tc.wantErr != "" {
			if err == nil || !strings.Contains(err.Error(), tc.wantErr) {
				t.Errorf("ParseSelection(%q) = %+v, %v; want an error containing %q", tc.in, got, err, tc.wantErr)
			}
			continue
		}
		if err != nil {
			t.Errorf("ParseSelection(%q): %v", tc.in, err)
			continue
		}
		if got.All != tc.want.All || !slices.Equal(got.Indices, tc.want.Indices) {
			t.Errorf("ParseSelection(%q) = %+v; want %+v", tc.in, got, tc.want)
		}
		if got.String() != tc.str {
			t.Errorf("ParseSelection(%q).String() = %q; want %q", tc.in, got.String(), tc.str)
		}
		if got.None() != (tc.str == "none") {
			t.Errorf("ParseSelection(%q).None() = %v", tc.in, got.None())
		}
	}
}

func TestGPUSelectionFlagValue(t *testing.T) {
	var sel Selection
	if !sel.None() || sel.String() != "none" {
		t.Fatalf("zero Selection = %q, None %v; want none", sel.String(), sel.None())
	}
	if err := sel.Set("1,0"); err != nil || sel.String() != "0,1" {
		t.Fatalf("Set(1,0) = %v, %q", err, sel.String())
	}
	if err := sel.Set("x"); err == nil || sel.String() != "0,1" {
		t.Fatalf("Set(x) = %v, left %q; want an error, selection unchanged", err, sel.String())
	}
}

func TestGPUMonitorNone(t *testing.T) {
	m := NewMonitor(Selection{}, time.Second)
	s := m.Sample()
	if s.Available || !strings.Contains(s.Reason, "none") || s.IdleRatio != -1 || len(s.Devices) != 0 {
		t.Errorf("none: Sample() = %+v; want unavailable, disabled", s)
	}
	if err := m.Close(); err != nil {
		t.Errorf("Close: %v", err)
	}
}

// TestGPUMonitorSystem runs the real monitor on this machine: without an
// NVIDIA driver (or without cgo) it must say unavailable and why, without
// panicking; with one, it must give sane numbers.
func TestGPUMonitorSystem(t *testing.T) {
	m := NewMonitor(Selection{All: true}, time.Second)
	defer func() {
		if err := m.Close(); err != nil {
			t.Errorf("Close: %v", err)
		}
	}()
	for range 2 {
		s := m.Sample()
		if !s.Available {
			if s.Reason == "" || s.IdleRatio != -1 {
				t.Fatalf("unavailable Sample() = %+v; want a reason and IdleRatio -1", s)
			}
			t.Logf("no GPU here: %s", s.Reason)
			continue
		}
		if s.IdleRatio < 0 || s.IdleRatio > 1 || len(s.Devices) == 0 {
			t.Fatalf("Sample() = %+v; want IdleRatio in [0,1] and devices", s)
		}
		t.Logf("GPUs: %+v", s)
	}
}
