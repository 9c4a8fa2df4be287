package bench

// `stoker bench store --fields`: the image-text shards it serves, CLIP's
// layout as img2dataset writes it (each KEY.jpg beside KEY.txt, its
// caption, and KEY.json, its metadata; no .cls: the dataset is
// unlabelled), made from an ImageFolder's photos.

import (
	"archive/tar"
	"bytes"
	"encoding/json"
	"fmt"
	"image"
	_ "image/jpeg" // DecodeConfig of the photos, for their metadata
	"math/rand/v2"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"time"
)

// Caption and metadata sizes the shards keep to: LAION's and CC12M's
// captions are mostly 50-300 bytes, img2dataset's .json 200-500.
const (
	captionMin, captionMax = 50, 300
	metaMin, metaMax       = 200, 500
)

// captionWords make the captions: alt-text-like phrases of a photo.
var captionWords = []string{
	"a", "photo", "of", "the", "autumn", "leaves", "on", "a", "quiet", "lake", "at", "sunset", "with",
	"mountains", "in", "background", "close-up", "colorful", "cups", "stock", "image", "wallpaper",
	"high", "resolution", "beautiful", "landscape", "evening", "glow", "over", "water", "abstract",
	"blue", "waves", "texture", "nature", "forest", "path", "golden", "hour", "light", "fallen",
	"grey", "clouds", "sky", "honey", "minimal", "design", "for", "desktop", "free", "download",
}

// captionOf is sample i's caption: words drawn from i, within
// captionMin..captionMax bytes.
func captionOf(i int) []byte {
	r := rand.New(rand.NewPCG(uint64(i), 39))
	want := captionMin + r.IntN(captionMax-captionMin+1)
	var b []byte
	for len(b) < want {
		if len(b) > 0 {
			b = append(b, ' ')
		}
		b = append(b, captionWords[r.IntN(len(captionWords))]...)
	}
	return b[:want]
}

// metaOf is sample i's .json, as img2dataset writes it: its key, URL,
// caption, status and sizes, within metaMin..metaMax bytes.
func metaOf(i int, key string, caption []byte, w, h int) []byte {
	r := rand.New(rand.NewPCG(uint64(i), 40))
	m := map[string]any{
		"key": key, "status": "success", "error_message": nil,
		"url":     fmt.Sprintf("https://images.example.com/%x/%d.jpg", r.Uint64(), i),
		"caption": string(caption[:min(len(caption), 120+r.IntN(150))]),
		"width":   w, "height": h, "original_width": 2 * w, "original_height": 2 * h,
		"sha256":     fmt.Sprintf("%016x%016x%016x%016x", r.Uint64(), r.Uint64(), r.Uint64(), r.Uint64()),
		"similarity": 0.25 + r.Float64()/5,
		"punsafe":    r.Float64() / 100,
		"LICENSE":    "?",
	}
	b, err := json.Marshal(m)
	if err != nil {
		panic(err) // a map of strings and numbers
	}
	for len(b) > metaMax { // a long caption: shorter
		m["caption"] = m["caption"].(string)[:len(m["caption"].(string))-(len(b)-metaMax)]
		b, _ = json.Marshal(m)
	}
	if len(b) < metaMin {
		m["exif"] = strings.Repeat(" ", metaMin-len(b))
		b, _ = json.Marshal(m)
	}
	return b
}

// writeCaptionShards writes the ImageFolder at src as unlabelled
// WebDataset shards of perShard samples into dst, the images in
// ImageFolder order, sample i's key %05d%04d (shard, place) as
// img2dataset names them. It returns how many samples it wrote.
func writeCaptionShards(src, dst string, perShard int) (int, error) {
	photos, err := filepath.Glob(filepath.Join(src, "*", "*.jpg"))
	if err != nil {
		return 0, err
	}
	if len(photos) == 0 {
		return 0, fmt.Errorf("no %s/<class>/*.jpg", src)
	}
	slices.Sort(photos)
	if err := os.MkdirAll(dst, 0o755); err != nil {
		return 0, err
	}
	mtime := time.Unix(1_700_000_000, 0)
	for start := 0; start < len(photos); start += perShard {
		var buf bytes.Buffer
		tw := tar.NewWriter(&buf)
		for j, p := range photos[start:min(start+perShard, len(photos))] {
			i := start + j
			jpg, err := os.ReadFile(p)
			if err != nil {
				return 0, err
			}
			cfg, _, err := image.DecodeConfig(bytes.NewReader(jpg))
			if err != nil {
				return 0, fmt.Errorf("%s: %w", p, err)
			}
			key := fmt.Sprintf("%05d%04d", start/perShard, j)
			caption := captionOf(i)
			for _, m := range []struct {
				ext  string
				data []byte
			}{{"jpg", jpg}, {"txt", caption}, {"json", metaOf(i, key, caption, cfg.Width, cfg.Height)}} {
				hd := &tar.Header{Typeflag: tar.TypeReg, Name: key + "." + m.ext, Mode: 0o644,
					Size: int64(len(m.data)), ModTime: mtime, Format: tar.FormatUSTAR}
				if err := tw.WriteHeader(hd); err != nil {
					return 0, err
				}
				if _, err := tw.Write(m.data); err != nil {
					return 0, err
				}
			}
		}
		if err := tw.Close(); err != nil {
			return 0, err
		}
		name := filepath.Join(dst, fmt.Sprintf("shard-%06d.tar", start/perShard))
		if err := os.WriteFile(name, buf.Bytes(), 0o644); err != nil {
			return 0, err
		}
	}
	return len(photos), nil
}
