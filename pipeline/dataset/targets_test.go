package dataset

import "testing"

// TestSourceBoxes checks the conversions of the files' boxes to XYXY
// pixels: COCO's XYWH as float32 then x + w; YOLO's normalized CXCYWH
// scaled, then cx - w/2 and x1 + w.
func TestSourceBoxes(t *testing.T) {
	got := xywhToXYXY([4]float64{0.1, 0.2, 0.3, 1e8 + 1})
	x, y := float32(0.1), float32(0.2)
	if want := [4]float32{x, y, x + float32(0.3), y + float32(1e8+1)}; got != want {
		t.Errorf("xywh: %v, want %v", got, want)
	}
	yb := yoloToXYXY([4]float32{0.5, 0.25, 0.1, 0.3}, 333, 250)
	cx, cy, w, h := float32(0.5)*333, float32(0.25)*250, float32(0.1)*333, float32(0.3)*250
	if want := [4]float32{cx - w/2, cy - h/2, cx - w/2 + w, cy - h/2 + h}; yb != want {
		t.Errorf("yolo: %v, want %v", yb, want)
	}
}
