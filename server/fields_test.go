package server

import (
	"archive/tar"
	"bytes"
	"context"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	pb "github.com/stoker-dev/stoker/proto/stoker/v1"
)

// clipDir is an unlabelled WebDataset of testdata/photos's JPEGs in 3
// shards, CLIP's layout: each KEY.jpg beside KEY.txt (its caption; one in
// invalid UTF-8) and KEY.json, but for one sample whose .json is 100 KB
// (over the default bound of a field: it fails by itself) and one key
// with a caption and no image (it fails by itself). want maps each key
// to its caption.
func clipDir(t testing.TB) (dir string, want map[string]string) {
	t.Helper()
	photos, err := filepath.Glob("../testdata/photos/*/*.jpg")
	if err != nil || len(photos) == 0 {
		t.Fatalf("photos: %v", err)
	}
	slices.Sort(photos)
	dir = t.TempDir()
	want = map[string]string{}
	var bufs [3]bytes.Buffer
	var tws [3]*tar.Writer
	for s := range tws {
		tws[s] = tar.NewWriter(&bufs[s])
	}
	put := func(tw *tar.Writer, name string, data []byte) {
		if err := tw.WriteHeader(&tar.Header{Name: name, Mode: 0o644, Size: int64(len(data)), Typeflag: tar.TypeReg}); err != nil {
			t.Fatal(err)
		}
		tw.Write(data)
	}
	for i, p := range photos {
		jpg, err := os.ReadFile(p)
		if err != nil {
			t.Fatal(err)
		}
		key := fmt.Sprintf("s%d/%04d", i%3, i)
		caption := fmt.Sprintf("a photo of %s, number %d", filepath.Base(filepath.Dir(p)), i)
		if i == 7 {
			caption = "caf\xe9 \xff\xfe" // not UTF-8: passed through
		}
		want[key] = caption
		tw := tws[i%3]
		put(tw, key+".jpg", jpg)
		put(tw, key+".txt", []byte(caption))
		js := fmt.Sprintf(`{"key": %q, "i": %d}`, key, i)
		if i == 11 {
			js = `{"pad": "` + strings.Repeat("x", 100_000) + `"}`
		}
		put(tw, key+".json", []byte(js))
	}
	put(tws[1], "s1/9999.txt", []byte("a caption without its image"))
	want["s1/9999"] = "a caption without its image"
	for s, tw := range tws {
		tw.Close()
		if err := os.WriteFile(filepath.Join(dir, fmt.Sprintf("clip-%03d.tar", s)), bufs[s].Bytes(), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	return dir, want
}

// clipJob asks for the captions, metadata, keys and sources of clipDir's
// samples.
func clipJob(shuffle pb.ShuffleMode, policy pb.FailPolicy) *pb.OpenJob {
	o := smallJob("clip", 8)
	o.Job.ShuffleMode, o.Job.FailPolicy = shuffle, policy
	o.Job.ShuffleWindow = 2
	o.Job.Fields = []string{"txt", "__key__", "json", "__source__"}
	return o
}

// checkFields checks that every sample of ep carries its own fields: its
// caption and key as the dataset has them, its source, a .json (none
// over the bound, which fails its sample); and that the failed samples
// are the two bad ones.
func checkFields(t *testing.T, ep epoch, want map[string]string) {
	t.Helper()
	failed := map[string]bool{}
	for _, b := range ep.batches {
		h := b.hdr
		n := len(h.GetLabels())
		fs := h.GetFields()
		if len(fs) != 4 {
			t.Fatalf("batch %d: %d fields, want 4", h.GetNumber(), len(fs))
		}
		for _, e := range h.GetErrors() {
			failed[e.GetName()] = true
		}
		for i := range n {
			txt, key, js, src := fs[0].GetValues()[i], string(fs[1].GetValues()[i]), fs[2].GetValues()[i], string(fs[3].GetValues()[i])
			if got, ok := want[key]; !ok || string(txt) != got {
				t.Errorf("batch %d slot %d (sample %d): key %q, caption %q; want %q", h.GetNumber(), i, h.GetIndices()[i], key, txt, got)
			}
			if src != "clip" || h.GetLabels()[i] != -1 {
				t.Errorf("batch %d slot %d: source %q label %d", h.GetNumber(), i, src, h.GetLabels()[i])
			}
			if !bytes.Contains(js, []byte(fmt.Sprintf("%q", key))) {
				t.Errorf("batch %d slot %d (%s): json %.80q", h.GetNumber(), i, key, js)
			}
		}
		for _, f := range fs {
			if len(f.GetMissing()) != 0 {
				t.Errorf("batch %d: field %s missing for %v", h.GetNumber(), f.GetName(), f.GetMissing())
			}
		}
	}
	if len(failed) != 2 || !failed["clip-001.tar/s1/9999"] {
		t.Errorf("failed samples %v, want the key without an image and the one with a 100 KB .json", failed)
	}
}

// TestFieldsAnyTopology: a job with fields gets every sample's own, in
// batch order, under the global and the block shuffle, padded or dropped
// with their samples, whether the server makes the batches alone, leases
// them whole to a peer, or in parts to 3 (cache affinity): the same
// headers and pixels on every topology.
func TestFieldsAnyTopology(t *testing.T) {
	dir, want := clipDir(t)
	type run struct {
		shuffle pb.ShuffleMode
		policy  pb.FailPolicy
	}
	runs := []run{
		{pb.ShuffleMode_SHUFFLE_MODE_GLOBAL, pb.FailPolicy_FAIL_POLICY_PAD},
		{pb.ShuffleMode_SHUFFLE_MODE_BLOCK, pb.FailPolicy_FAIL_POLICY_PAD},
		{pb.ShuffleMode_SHUFFLE_MODE_BLOCK, pb.FailPolicy_FAIL_POLICY_DROP},
	}
	wantEp := map[run]epoch{}
	for _, n := range []int{0, 1, 3} {
		var e *testEnv
		if n == 0 {
			e = startServer(t, Config{Datasets: map[string]string{"clip": dir}, Workers: 2})
		} else {
			var addrs []string
			for range n {
				addrs = append(addrs, startServer(t, Config{Datasets: map[string]string{"clip": dir}, Workers: 1}).addr)
			}
			e = startServer(t, Config{Datasets: map[string]string{"clip": dir}, Peers: strings.Join(addrs, ",")})
			waitPeers(t, e, n)
		}
		for _, r := range runs {
			ep := e.collect(t, clipJob(r.shuffle, r.policy))
			checkFields(t, ep, want)
			if n == 0 {
				wantEp[r] = ep
				continue
			}
			w := wantEp[r]
			if len(ep.batches) != len(w.batches) {
				t.Fatalf("%d peers, %v: %d batches, want %d", n, r, len(ep.batches), len(w.batches))
			}
			for i, b := range ep.batches {
				if !sameFields(b.hdr, w.batches[i].hdr) || !bytes.Equal(b.data, w.batches[i].data) ||
					!slices.Equal(b.hdr.GetIndices(), w.batches[i].hdr.GetIndices()) {
					t.Errorf("%d peers, %v: batch %d differs from the lone server's", n, r, i)
				}
			}
		}
	}
}

func sameFields(a, b *pb.BatchHeader) bool {
	fa, fb := a.GetFields(), b.GetFields()
	if len(fa) != len(fb) {
		return false
	}
	for i := range fa {
		if fa[i].GetName() != fb[i].GetName() || !slices.Equal(fa[i].GetMissing(), fb[i].GetMissing()) ||
			!slices.EqualFunc(fa[i].GetValues(), fb[i].GetValues(), bytes.Equal) {
			return false
		}
	}
	return true
}

// TestFieldsRefused: fields a dataset has no sample with, too many, named
// twice, or a bound a batch cannot hold are refused at open, saying what
// is allowed.
func TestFieldsRefused(t *testing.T) {
	dir, _ := clipDir(t)
	e := startServer(t, Config{Datasets: map[string]string{"clip": dir, "tiny": "../testdata/photos"}, Workers: 1})
	for _, c := range []struct {
		name, dataset string
		fields        []string
		max           uint32
		batch         uint32
		want          string
	}{
		{"unknown", "clip", []string{"text"}, 0, 8, `no sample has a field "text"; the dataset's fields are jpg, json, txt, __key__, __source__`},
		{"imagefolder", "tiny", []string{"txt"}, 0, 8, "fields are path, __key__, __source__"},
		{"twice", "clip", []string{"txt", "txt"}, 0, 8, `field "txt" asked for twice`},
		{"too many", "clip", slices.Repeat([]string{"txt"}, 17), 0, 8, "17 fields: the limit is 16"},
		{"bound", "clip", []string{"txt", "json"}, 1 << 20, 64, "max_field_bytes may be at most 262144"},
		{"bound without fields", "clip", nil, 100, 8, "max_field_bytes 100 without fields"},
	} {
		t.Run(c.name, func(t *testing.T) {
			o := smallJob(c.dataset, c.batch)
			o.Job.Fields, o.Job.MaxFieldBytes = c.fields, c.max
			ctx, cancel := context.WithTimeout(context.Background(), hangGuard)
			defer cancel()
			_, err := readEpoch(e.feedStream(t, ctx, o))
			if status.Code(err) != codes.InvalidArgument || !strings.Contains(err.Error(), c.want) {
				t.Errorf("%v; want InvalidArgument saying %q", err, c.want)
			}
		})
	}
}
