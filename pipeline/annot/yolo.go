package annot

import (
	"bytes"
	"fmt"
	"io"
	"math"
	"os"
	"path/filepath"
	"sort"
	"strconv"
	"strings"
	"syscall"
)

// The YOLO layout, as ultralytics reads it: for images/.../x.jpg the
// labels are in labels/.../x.txt, a line per instance; class names (and,
// for pose, kpt_shape) in the dataset's YAML.

// MaxLabelFile bounds a YOLO label file's size.
const MaxLabelFile = 16 << 20

// LabelPath is the label file of the image at path, as ultralytics'
// img2label_paths: the last "/images/" of the path becomes "/labels/",
// and the extension ".txt".
func LabelPath(path string) string {
	sep := string(filepath.Separator)
	sa, sb := sep+"images"+sep, sep+"labels"+sep
	if i := strings.LastIndex(path, sa); i >= 0 {
		path = path[:i] + sb + path[i+len(sa):]
	}
	if i := strings.LastIndex(path, "."); i >= 0 {
		path = path[:i]
	}
	return path + ".txt"
}

// YOLOConfig is what the dataset's YAML says of its labels.
type YOLOConfig struct {
	// Names are the class names by class index.
	Names []string
	// KptShape is [keypoints, dims] (dims 2 or 3) for pose; zero otherwise.
	KptShape [2]int
}

// YOLOInstance is one line of a label file: a box in normalized
// (cx, cy, w, h), and the polygon or keypoints when the line has them.
type YOLOInstance struct {
	Class int
	// Box is normalized centre x, centre y, width, height (for a polygon:
	// the box around its points, as ultralytics' segments2boxes).
	Box [4]float32
	// Polygon is normalized x0, y0, x1, y1, ...; nil for a box.
	Polygon []float32
	// Keypoints are normalized (x, y, visibility) triplets, KptShape[0]
	// of them (visibility 1 or 0 when the dataset's dims are 2, as
	// ultralytics: 0 where x or y is negative); nil unless pose.
	Keypoints []float32
}

// ParseYOLOLabels parses a label file's bytes (name for messages) as
// ultralytics' verify_image_label: lines of 5 numbers are boxes; if any
// line has more than 6 (and the dataset is not pose) every line is a
// polygon (class x0 y0 x1 y1 ...); with kpt_shape, every line is class cx
// cy w h and the keypoints. Classes must be below nc; coordinates within
// [-0.01, 1.01], as ultralytics checks. Any bad line is an error naming
// the file, the line and the field. (Ultralytics also drops duplicate
// lines, with a warning, reordering the rest; they are kept here.)
func ParseYOLOLabels(name string, data []byte, cfg *YOLOConfig) ([]YOLOInstance, error) {
	if len(data) > MaxLabelFile {
		return nil, &SampleError{File: name, Annotation: "file", Field: "size", Err: fmt.Errorf("%d bytes, more than the %d allowed", len(data), MaxLabelFile)}
	}
	type line struct {
		no     int
		fields [][]byte
	}
	var lines []line
	segments := false
	for i, l := range bytes.Split(bytes.TrimSpace(data), []byte("\n")) {
		f := bytes.Fields(l)
		if len(f) == 0 {
			continue
		}
		if len(f) > 6 && cfg.KptShape[0] == 0 {
			segments = true
		}
		lines = append(lines, line{i + 1, f})
	}
	if len(lines) > MaxInstances {
		return nil, &SampleError{File: name, Annotation: fmt.Sprintf("line %d", lines[MaxInstances].no), Field: "instances",
			Err: fmt.Errorf("more than %d instances", MaxInstances)}
	}
	out := make([]YOLOInstance, 0, len(lines))
	nkpt, ndim := cfg.KptShape[0], cfg.KptShape[1]
	for _, l := range lines {
		bad := func(field string, format string, args ...any) error {
			return &SampleError{File: name, Annotation: fmt.Sprintf("line %d", l.no), Field: field, Err: fmt.Errorf(format, args...)}
		}
		v := make([]float32, len(l.fields))
		for j, f := range l.fields {
			x, err := strconv.ParseFloat(string(f), 32)
			if err != nil || math.IsNaN(x) || math.IsInf(x, 0) {
				return nil, bad(fieldName(j, segments, nkpt), "%q is not a finite number", f)
			}
			v[j] = float32(x)
		}
		// Compared as a float before it is made an int: a class past
		// int's range (99999999999999999999999) converts to anything.
		cls := v[0]
		if cls < 0 || cls != float32(math.Trunc(float64(cls))) || float64(cls) >= float64(len(cfg.Names)) {
			return nil, bad("class", "%s: want an integer class below nc=%d", l.fields[0], len(cfg.Names))
		}
		in := YOLOInstance{Class: int(cls)}
		var points []float32
		switch {
		case nkpt > 0:
			if want := 5 + nkpt*ndim; len(v) != want {
				return nil, bad("keypoints", "%d columns: kpt_shape [%d, %d] wants %d (class cx cy w h and %d per keypoint)", len(v), nkpt, ndim, want, ndim)
			}
			copy(in.Box[:], v[1:5])
			in.Keypoints = make([]float32, 0, 3*nkpt)
			for k := range nkpt {
				p := v[5+k*ndim : 5+(k+1)*ndim]
				vis := float32(1)
				if ndim == 3 {
					vis = p[2]
				} else if p[0] < 0 || p[1] < 0 {
					vis = 0
				}
				in.Keypoints = append(in.Keypoints, p[0], p[1], vis)
				points = append(points, p[0], p[1])
			}
		case segments:
			xy := v[1:]
			if len(xy)%2 != 0 {
				return nil, bad("polygon", "%d coordinates: want x y pairs", len(xy))
			}
			if len(xy) > 2*MaxPolygonVertices {
				return nil, bad("polygon", "%d points, more than the %d allowed", len(xy)/2, MaxPolygonVertices)
			}
			// A box line among polygons (4 numbers): ultralytics reads it
			// as two points, and so does this; fewer is an error.
			if len(xy) < 4 {
				return nil, bad("polygon", "%d coordinates: want at least 3 points", len(xy))
			}
			in.Polygon = xy
			x0, y0, x1, y1 := float32(math.Inf(1)), float32(math.Inf(1)), float32(math.Inf(-1)), float32(math.Inf(-1))
			for j := 0; j < len(xy); j += 2 {
				x0, x1 = min(x0, xy[j]), max(x1, xy[j])
				y0, y1 = min(y0, xy[j+1]), max(y1, xy[j+1])
			}
			in.Box = [4]float32{(x0 + x1) / 2, (y0 + y1) / 2, x1 - x0, y1 - y0}
			points = xy
		default:
			if len(v) != 5 {
				return nil, bad("box", "%d columns: want 5 (class cx cy w h)", len(v))
			}
			copy(in.Box[:], v[1:])
			points = v[1:]
		}
		points = append(points, in.Box[:]...)
		for _, p := range points {
			if p > 1.01 {
				return nil, bad(fieldName(1, segments, nkpt), "coordinate %v: want normalized coordinates, at most 1.01", p)
			}
		}
		for _, p := range v {
			if p < -0.01 {
				return nil, bad(fieldName(1, segments, nkpt), "%v: negative class or coordinate", p)
			}
		}
		out = append(out, in)
	}
	return out, nil
}

func fieldName(col int, segments bool, nkpt int) string {
	switch {
	case col == 0:
		return "class"
	case nkpt > 0 && col >= 5:
		return "keypoints"
	case segments:
		return "polygon"
	}
	return "box"
}

// ReadYOLOLabels reads the labels of the image at imagePath: none when
// its label file does not exist (as ultralytics: an image without
// instances).
func ReadYOLOLabels(imagePath string, cfg *YOLOConfig) ([]YOLOInstance, error) {
	lp := LabelPath(imagePath)
	f, err := openRegular(lp, MaxLabelFile)
	if os.IsNotExist(err) {
		return nil, nil
	}
	if err != nil {
		return nil, err
	}
	defer f.Close()
	data, err := readAtMost(f, MaxLabelFile+1)
	if err != nil {
		return nil, fmt.Errorf("%s: %v", lp, err)
	}
	return ParseYOLOLabels(lp, data, cfg)
}

func readAtMost(f *os.File, n int64) ([]byte, error) {
	var buf bytes.Buffer
	_, err := buf.ReadFrom(&limited{f, n})
	return buf.Bytes(), err
}

type limited struct {
	f *os.File
	n int64
}

func (l *limited) Read(p []byte) (int, error) {
	if l.n <= 0 {
		return 0, io.EOF // (0, nil) would have bytes.Buffer.ReadFrom ask forever
	}
	if int64(len(p)) > l.n {
		p = p[:l.n]
	}
	k, err := l.f.Read(p)
	l.n -= int64(k)
	return k, err
}

// ParseYOLOConfig reads the class names and kpt_shape of a dataset YAML
// as ultralytics writes them: `names:` as a list (block `- person` or
// flow `[person, car]`) or a map (block `0: person` or flow `{0: person}`),
// `nc:` (checked against the names), `kpt_shape: [17, 3]`. Only these keys
// are read, and only this much YAML (no anchors, no multi-line strings).
func ParseYOLOConfig(name string, data []byte) (*YOLOConfig, error) {
	cfg := &YOLOConfig{}
	nc := -1
	lines := strings.Split(string(data), "\n")
	named := map[int]string{}
	haveNames := false
	for i := 0; i < len(lines); i++ {
		l := stripComment(lines[i])
		if strings.TrimSpace(l) == "" || l[0] == ' ' || l[0] == '\t' {
			continue
		}
		key, val, ok := strings.Cut(l, ":")
		if !ok {
			continue
		}
		val = strings.TrimSpace(val)
		switch strings.TrimSpace(key) {
		case "nc":
			n, err := strconv.Atoi(val)
			if err != nil || n < 0 {
				return nil, fmt.Errorf("%s: nc: %q is not a count", name, val)
			}
			nc = n
		case "kpt_shape":
			items, ok := flowItems(val, '[', ']')
			if !ok || len(items) != 2 {
				return nil, fmt.Errorf("%s: kpt_shape: %q: want [keypoints, dims]", name, val)
			}
			k, err1 := strconv.Atoi(items[0])
			d, err2 := strconv.Atoi(items[1])
			if err1 != nil || err2 != nil || k < 1 || k > MaxKeypoints || (d != 2 && d != 3) {
				return nil, fmt.Errorf("%s: kpt_shape: %q: want [keypoints, 2 or 3]", name, val)
			}
			cfg.KptShape = [2]int{k, d}
		case "names":
			haveNames = true
			switch {
			case strings.HasPrefix(val, "["):
				items, ok := flowItems(val, '[', ']')
				if !ok {
					return nil, fmt.Errorf("%s: names: %q is not a list", name, val)
				}
				for j, it := range items {
					named[j] = unquote(it)
				}
			case strings.HasPrefix(val, "{"):
				items, ok := flowItems(val, '{', '}')
				if !ok {
					return nil, fmt.Errorf("%s: names: %q is not a map", name, val)
				}
				for _, it := range items {
					if err := putNamed(named, it); err != nil {
						return nil, fmt.Errorf("%s: names: %v", name, err)
					}
				}
			case val == "":
				for i+1 < len(lines) {
					n := stripComment(lines[i+1])
					if strings.TrimSpace(n) == "" {
						i++
						continue
					}
					if n[0] != ' ' && n[0] != '\t' && n[0] != '-' {
						break
					}
					i++
					t := strings.TrimSpace(n)
					if rest, ok := strings.CutPrefix(t, "-"); ok {
						named[len(named)] = unquote(strings.TrimSpace(rest))
					} else if err := putNamed(named, t); err != nil {
						return nil, fmt.Errorf("%s: names: line %d: %v", name, i+1, err)
					}
				}
			default:
				return nil, fmt.Errorf("%s: names: %q: want a list or a map of class names", name, val)
			}
		}
	}
	if !haveNames {
		return nil, fmt.Errorf("%s: no names: want the class names (names: [a, b] or names: {0: a, 1: b})", name)
	}
	ids := make([]int, 0, len(named))
	for k := range named {
		ids = append(ids, k)
	}
	sort.Ints(ids)
	for j, k := range ids {
		if k != j {
			return nil, fmt.Errorf("%s: names: class %d has no name (want 0..%d)", name, j, len(ids)-1)
		}
		cfg.Names = append(cfg.Names, named[k])
	}
	if nc >= 0 && nc != len(cfg.Names) {
		return nil, fmt.Errorf("%s: nc is %d but names has %d", name, nc, len(cfg.Names))
	}
	return cfg, nil
}

// OpenYOLOConfig reads the dataset YAML at path (a regular file of at
// most MaxLabelFile bytes, openRegular).
func OpenYOLOConfig(path string) (*YOLOConfig, error) {
	f, err := openRegular(path, MaxLabelFile)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	data, err := readAtMost(f, MaxLabelFile+1)
	if err != nil {
		return nil, fmt.Errorf("%s: %v", path, err)
	}
	if len(data) > MaxLabelFile {
		return nil, fmt.Errorf("%s: more than the %d bytes allowed", path, MaxLabelFile)
	}
	return ParseYOLOConfig(filepath.Base(path), data)
}

// OpenStat opens path for reading without blocking (a FIFO never holds
// the caller) and gives its open descriptor's fstat: what a caller checks
// (a regular file, its size) is the file it reads, not what the path
// named a moment before. The dataset room's annotation files open so too.
func OpenStat(path string) (*os.File, os.FileInfo, error) {
	f, err := os.OpenFile(path, os.O_RDONLY|syscall.O_NONBLOCK|syscall.O_NOCTTY, 0)
	if err != nil {
		return nil, nil, err
	}
	st, err := f.Stat()
	if err != nil {
		f.Close()
		return nil, nil, err
	}
	return f, st, nil
}

// openRegular opens path for reading without blocking (OpenStat),
// refusing a file that is not regular or is over max bytes.
func openRegular(path string, max int64) (*os.File, error) {
	f, st, err := OpenStat(path)
	if err != nil {
		return nil, err
	}
	switch {
	case !st.Mode().IsRegular():
		err = fmt.Errorf("%s is not a regular file (%v)", path, st.Mode().Type())
	case st.Size() > max:
		err = fmt.Errorf("%s is %d bytes, more than the %d allowed", path, st.Size(), max)
	}
	if err != nil {
		f.Close()
		return nil, err
	}
	return f, nil
}

func putNamed(named map[int]string, item string) error {
	k, v, ok := strings.Cut(item, ":")
	if !ok {
		return fmt.Errorf("%q: want INDEX: NAME", item)
	}
	n, err := strconv.Atoi(strings.TrimSpace(k))
	if err != nil || n < 0 || n > 1<<20 {
		return fmt.Errorf("%q: the key is not a class index", item)
	}
	if _, dup := named[n]; dup {
		return fmt.Errorf("class %d named twice", n)
	}
	named[n] = unquote(strings.TrimSpace(v))
	return nil
}

func stripComment(l string) string {
	l = strings.TrimRight(l, "\r")
	inQ := byte(0)
	for i := 0; i < len(l); i++ {
		switch c := l[i]; {
		case inQ != 0:
			if c == inQ {
				inQ = 0
			}
		case c == '\'' || c == '"':
			inQ = c
		case c == '#' && (i == 0 || l[i-1] == ' ' || l[i-1] == '\t'):
			return l[:i]
		}
	}
	return l
}

// flowItems splits a one-line flow collection "[a, 'b, c']" into items.
func flowItems(s string, open, close byte) ([]string, bool) {
	s = strings.TrimSpace(s)
	if len(s) < 2 || s[0] != open || s[len(s)-1] != close {
		return nil, false
	}
	s = s[1 : len(s)-1]
	var items []string
	inQ := byte(0)
	start := 0
	for i := 0; i <= len(s); i++ {
		if i == len(s) || (inQ == 0 && s[i] == ',') {
			if t := strings.TrimSpace(s[start:i]); t != "" {
				items = append(items, t)
			}
			start = i + 1
			continue
		}
		switch c := s[i]; {
		case inQ != 0:
			if c == inQ {
				inQ = 0
			}
		case c == '\'' || c == '"':
			inQ = c
		}
	}
	return items, inQ == 0
}

func unquote(s string) string {
	if len(s) >= 2 && (s[0] == '"' || s[0] == '\'') && s[len(s)-1] == s[0] {
		if s[0] == '"' {
			if u, err := strconv.Unquote(s); err == nil {
				return u
			}
		}
		return strings.ReplaceAll(s[1:len(s)-1], "''", "'")
	}
	return s
}
