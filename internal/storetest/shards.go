package storetest

import (
	"archive/tar"
	"bytes"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"time"
)

// ShardSample is one sample WriteShards wrote.
type ShardSample struct {
	Shard  string // the shard's file name, shard-000000.tar
	Member string // the image's member name in it, <class>/<stem>.jpg
	Label  int    // the class's index among the classes in name order
	Source string // the image's path under the ImageFolder, <class>/<file>
	Offset int64  // where the image's bytes start in the shard
	Size   int64  // how many they are
}

// shardEpoch is every member's modification time, so a shard's bytes
// depend on its members alone.
var shardEpoch = time.Unix(1_700_000_000, 0)

// WriteShards writes the ImageFolder at src (src/<class>/<image>) into dst
// as WebDataset shards of perShard samples each, shard-000000.tar,
// shard-000001.tar, ..., and returns the samples in order. A sample is two
// members, <class>/<stem><ext> (the image's bytes) and <class>/<stem>.cls
// (its label in decimal), stem being the file name up to its first dot.
// Classes and files are taken in name order and labels are class indices,
// as for the ImageFolder, so sample i of the shards is sample i of src.
// The same src gives the same bytes on every run.
//
// Only flat classes of .jpg, .jpeg and .png files are taken (anything else
// in a class fails the test, rather than go missing from the shards);
// files and directories directly under src other than classes are left
// out, as an ImageFolder leaves them out.
func WriteShards(t T, src, dst string, perShard int) []ShardSample {
	t.Helper()
	if perShard < 1 {
		t.Fatalf("WriteShards: %d samples per shard", perShard)
	}
	samples, err := folderSamples(src)
	if err != nil {
		t.Fatalf("WriteShards: %v", err)
	}
	if err := os.MkdirAll(dst, 0o755); err != nil {
		t.Fatal(err)
	}
	for start := 0; start < len(samples); start += perShard {
		shard := samples[start:min(start+perShard, len(samples))]
		name := fmt.Sprintf("shard-%06d.tar", start/perShard)
		if err := writeShard(filepath.Join(dst, name), src, shard); err != nil {
			t.Fatalf("WriteShards: %v", err)
		}
		for i := range shard {
			shard[i].Shard = name
		}
	}
	return samples
}

// folderSamples lists the ImageFolder at src in its sample order.
func folderSamples(src string) ([]ShardSample, error) {
	ents, err := os.ReadDir(src) // sorted by name
	if err != nil {
		return nil, err
	}
	var samples []ShardSample
	label := 0
	for _, c := range ents {
		if !c.IsDir() || strings.HasPrefix(c.Name(), ".") {
			continue
		}
		files, err := os.ReadDir(filepath.Join(src, c.Name()))
		if err != nil {
			return nil, err
		}
		stems := map[string]bool{}
		for _, f := range files {
			ext := strings.ToLower(filepath.Ext(f.Name()))
			if !f.Type().IsRegular() || (ext != ".jpg" && ext != ".jpeg" && ext != ".png") {
				return nil, fmt.Errorf("%s/%s: not a .jpg, .jpeg or .png file", c.Name(), f.Name())
			}
			stem, _, _ := strings.Cut(f.Name(), ".")
			if stems[stem] {
				return nil, fmt.Errorf("%s/%s: a second image of the sample %s", c.Name(), f.Name(), stem)
			}
			stems[stem] = true
			samples = append(samples, ShardSample{
				Member: c.Name() + "/" + stem + ext,
				Label:  label,
				Source: c.Name() + "/" + f.Name(),
			})
		}
		label++
	}
	if len(samples) == 0 {
		return nil, fmt.Errorf("no images in %s (want %s/<class>/<image>)", src, src)
	}
	return samples, nil
}

// writeShard writes one shard: each sample's image, then its label.
func writeShard(path, src string, samples []ShardSample) error {
	var buf bytes.Buffer
	tw := tar.NewWriter(&buf)
	// add writes a member and returns where its data starts: the writer
	// writes each header block to buf as it comes.
	add := func(name string, data []byte) (int64, error) {
		hd := &tar.Header{
			Typeflag: tar.TypeReg, Name: name, Mode: 0o644, Size: int64(len(data)),
			ModTime: shardEpoch, Format: tar.FormatUSTAR,
		}
		if err := tw.WriteHeader(hd); err != nil {
			return 0, fmt.Errorf("%s: %s: %w", path, name, err)
		}
		off := int64(buf.Len())
		_, err := tw.Write(data)
		return off, err
	}
	for i, s := range samples {
		data, err := os.ReadFile(filepath.Join(src, filepath.FromSlash(s.Source)))
		if err != nil {
			return err
		}
		if samples[i].Offset, err = add(s.Member, data); err != nil {
			return err
		}
		samples[i].Size = int64(len(data))
		key := strings.TrimSuffix(s.Member, filepath.Ext(s.Member))
		if _, err := add(key+".cls", []byte(strconv.Itoa(s.Label))); err != nil {
			return err
		}
	}
	if err := tw.Close(); err != nil {
		return err
	}
	return os.WriteFile(path, buf.Bytes(), 0o644)
}
