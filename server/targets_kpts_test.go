package server

import (
	"encoding/binary"
	"encoding/json"
	"math"
	"os"
	"testing"

	"github.com/stoker-dev/stoker/internal/opspec"
)

// photosKeypoints is photosCOCO's file with keypoints: category 1 names 3,
// and each of its annotations has 3 points inside its box (visibilities 2,
// 1, 0); category 3's annotations have none (zeros, visibility 0, in the
// targets).
func photosKeypoints(t *testing.T) (string, []int) {
	t.Helper()
	path, counts := photosCOCO(t)
	raw, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	var doc map[string]any
	if err := json.Unmarshal(raw, &doc); err != nil {
		t.Fatal(err)
	}
	doc["categories"].([]any)[0].(map[string]any)["keypoints"] = []string{"p0", "p1", "p2"}
	for _, a := range doc["annotations"].([]any) {
		a := a.(map[string]any)
		if a["category_id"].(float64) != 1 {
			continue
		}
		b := a["bbox"].([]any)
		x, y, w, h := b[0].(float64), b[1].(float64), b[2].(float64), b[3].(float64)
		a["keypoints"] = []float64{x + w/3, y + h/4, 2, x + w/2, y + h/2, 1, 0, 0, 0}
		a["num_keypoints"] = 2
	}
	kp := writeJSON(t, "person_keypoints.json", doc)
	return kp, counts
}

// TestTargetsKeypointsAnyTopology: a dataset with keypoints gives each
// sample's targets its instances' points after the labels, P in the
// header (docs/detection.md's layout), the visibilities as the file's; the
// same bytes whether the server makes the batches alone or leases them to
// 3 peers with every slot verified.
func TestTargetsKeypointsAnyTopology(t *testing.T) {
	ann, counts := photosKeypoints(t)
	cfg := func() Config {
		return Config{Datasets: map[string]string{"det": "../testdata/photos"}, Annotations: map[string]string{"det": ann}, Workers: 1}
	}
	job := smallJob("det", 8)
	job.Job.Targets = true
	job.Job.Transform.Ops = append(job.Job.Transform.Ops,
		opspec.Wire("RandomRotation", "degrees", []float64{-30, 30}))
	const p = 3
	var alone epoch
	for _, n := range []int{0, 3} {
		e := topology(t, cfg, n)
		ep := e.collect(t, job)
		seen, points := 0, 0
		for _, b := range ep.batches {
			h := b.hdr
			fs := h.GetFields()
			if len(fs) != 1 || fs[0].GetName() != "targets" {
				t.Fatalf("%d peers: batch %d: fields %v", n, h.GetNumber(), fs)
			}
			for i, v := range fs[0].GetValues() {
				le := binary.LittleEndian
				idx := h.GetIndices()[i]
				k := int(le.Uint32(v[16:]))
				if k != counts[idx] || le.Uint32(v[20:]) != p<<8 || len(v) != 24+25*k+9*k*p {
					t.Errorf("%d peers: sample %d: header % x, %d bytes; want %d instances of %d points", n, idx, v[:min(len(v), 24)], len(v), counts[idx], p)
					continue
				}
				vis := v[24+25*k+8*k*p:]
				for c := range k {
					want := "\x02\x01\x00"
					if c%2 == 1 { // category 3: no keypoints
						want = "\x00\x00\x00"
					}
					if got := string(vis[c*p : (c+1)*p]); got != want {
						t.Errorf("%d peers: sample %d: instance %d's visibilities % x, want % x", n, idx, c, got, want)
					}
					for j := range p {
						at := 24 + 24*k + 8*(c*p+j)
						x, y := math.Float32frombits(le.Uint32(v[at:])), math.Float32frombits(le.Uint32(v[at+4:]))
						if math.IsNaN(float64(x)) || math.IsNaN(float64(y)) {
							t.Errorf("%d peers: sample %d: point %d of %d is (%v, %v)", n, idx, j, c, x, y)
						}
						points++
					}
				}
				seen++
			}
		}
		if seen != len(counts) || points == 0 {
			t.Errorf("%d peers: %d samples, %d points; want %d samples", n, seen, points, len(counts))
		}
		if n == 0 {
			alone = ep
			continue
		}
		sameAsAlone(t, e, n, ep, alone)
	}
}
