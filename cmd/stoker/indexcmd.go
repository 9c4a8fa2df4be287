package main

import (
	"bytes"
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"runtime/debug"
	"strings"
	"time"

	"github.com/stoker-dev/stoker/internal/helptext"
	"github.com/stoker-dev/stoker/internal/progress"
	"github.com/stoker-dev/stoker/pipeline"
	"github.com/stoker-dev/stoker/pipeline/dataset"
	"github.com/stoker-dev/stoker/pipeline/source"
	"github.com/stoker-dev/stoker/server"
)

const indexUsage = "usage: stoker index URL|DIR [--annotations FILE] [--out PATH|URL] [flags]"

// runIndex is `stoker index`: it lists a dataset (reading each WebDataset
// shard once, as a stream) and writes its manifest beside the data
// (ROOT/.stoker/manifest) or to --out, so that serve starts without
// listing or scanning.
func runIndex(args []string) error {
	ctx := cmdContext()
	fs := flag.NewFlagSet("index", flag.ExitOnError)
	out := fs.String("out", "", "write the manifest to this path or s3://, gs://, azblob:// URL (for a read-only bucket; serve then takes --manifest NAME=it); default ROOT/.stoker/manifest, beside the data")
	conc := fs.Int("concurrency", 8, "WebDataset shards read at once")
	ann := fs.String("annotations", "", "the COCO annotations file (a path or URL) of the images at URL|DIR: the manifest lists the images it names, with its SHA-256 (its fingerprint is the COCO dataset's; serve refuses it with other annotations); serve takes it with --annotations NAME=FILE and --manifest NAME=it, or beside the images. A YOLO dataset's YAML (data.yaml) indexes its images in a bucket with every label file's bytes, so serve reads no label file at start; a YOLO dataset on a disk has no manifest")
	sizes := fs.Bool("sizes", false, "read every image's header and record its width and height in the manifest (a sample whose header does not parse: unknown), so that a job cut by vision tokens (batch_tokens) plans from them without a decode; a request an image in object storage")
	budget := fs.Int64("memory-budget", 0, "memory the process may use (Go's soft limit, as serve's): the listing and the index built from it may hold half of it, counted as they grow (the manifest is encoded from the other half), past it the index fails saying so; a COCO annotations file's parse (up to 6x its size at its peak) half of it, a larger file refused before it is read; 0: half of the machine's (or cgroup's) memory")
	fs.Usage = helptext.Usage(fs, helptext.Head("index", "URL|DIR [--annotations FILE] [--out PATH|URL] [flags]",
		"Writes a dataset's manifest (its listing, and with --sizes its images' sizes) beside the data or to --out, so that stoker serve starts without listing or scanning it."))
	// Flags may come before or after the dataset.
	if err := parseFlags(fs, args); err != nil {
		return err
	}
	if fs.NArg() == 0 {
		return usageError{errors.New(indexUsage)}
	}
	src := fs.Arg(0)
	if err := parseFlags(fs, fs.Args()[1:]); err != nil {
		return err
	}
	if fs.NArg() > 0 || *conc < 1 || *budget < 0 {
		return usageError{errors.New(indexUsage)}
	}
	if *budget == 0 {
		*budget = server.DefaultMemoryBudget()
	}
	// The garbage collector works to keep the heap within it, as serve's.
	debug.SetMemoryLimit(*budget)
	return index(ctx, src, *ann, *out, *conc, *budget, *sizes, os.Stderr, os.Stdout)
}

// index indexes src and writes its manifest, reporting progress on
// progressOut (rewriting one line when it is a terminal) and what it wrote
// on result.
func index(ctx context.Context, src, ann, out string, conc int, budget int64, sizes bool, progressOut, result io.Writer) error {
	start := time.Now()
	pr := progress.New(progressOut, "stoker index")
	opts := dataset.IndexOptions{Concurrency: conc, Progress: func(p dataset.IndexProgress) { pr.Report(p.Update()) },
		MaxBytes: budget / 2,
		OverHint: fmt.Sprintf("half of --memory-budget (%d): give it more where the machine has it, or index the dataset's prefixes apart", budget)}
	if sizes {
		opts.ImageSize = pipeline.ImageSize
	}
	var (
		m   *dataset.Manifest
		st  source.Store
		err error
	)
	if source.IsRemote(src) {
		if st, err = source.Open(ctx, src); err != nil {
			return err
		}
		defer st.Close()
	}
	switch {
	case ann != "":
		m, err = dataset.IndexAnnotated(ctx, src, ann, dataset.WithIndexOptions(opts), dataset.WithAnnotationsBudget(budget/2))
	case st != nil:
		m, err = dataset.IndexStore(ctx, st, opts)
	default:
		m, err = dataset.IndexDir(ctx, src, opts)
	}
	pr.Done()
	if err != nil {
		return fmt.Errorf("index %s: %w", src, err)
	}
	var buf bytes.Buffer
	if err := m.Encode(&buf); err != nil {
		return err
	}
	where, err := writeManifest(ctx, src, st, out, buf.Bytes())
	if err != nil {
		return err
	}
	sized := ""
	if m.HasImageSizes() {
		known := 0
		for i := range m.Len() {
			if _, _, ok := m.ImageSize(i); ok {
				known++
			}
		}
		sized = fmt.Sprintf(", %d of the images' sizes (sizes %s)", known, m.SizesFingerprint())
	}
	fmt.Fprintf(result, "wrote %s: %s, %s in %s, %s, %d bytes, fingerprint %s%s, in %v\n",
		where, m.Layout, count(m.Len(), "sample"), count(m.NumObjects(), "object"), count(len(m.Classes), "class"),
		buf.Len(), m.Fingerprint(), sized, time.Since(start).Round(time.Millisecond))
	return nil
}

// writeManifest writes data beside the dataset src (st when remote) or to
// out, and says where.
func writeManifest(ctx context.Context, src string, st source.Store, out string, data []byte) (string, error) {
	switch {
	case out == "" && st != nil:
		where := strings.TrimSuffix(st.String(), "/") + "/" + dataset.ManifestName
		if err := st.Put(ctx, dataset.ManifestName, data); err != nil {
			return "", fmt.Errorf("write %s: %w (a read-only bucket: write it elsewhere with --out, and give serve --manifest)", where, err)
		}
		return where, nil
	case out == "":
		return writeLocalManifest(filepath.Join(src, filepath.FromSlash(dataset.ManifestName)), data)
	case source.IsRemote(out):
		i := strings.LastIndexByte(out, '/')
		dir, base := out[:i], out[i+1:]
		if base == "" || strings.HasSuffix(dir, ":/") {
			return "", fmt.Errorf("--out %s: want a file's URL, SCHEME://BUCKET/PATH/NAME", out)
		}
		ost, err := source.Open(ctx, dir)
		if err != nil {
			return "", err
		}
		defer ost.Close()
		if err := ost.Put(ctx, base, data); err != nil {
			return "", fmt.Errorf("write %s: %w", out, err)
		}
		return out, nil
	}
	return writeLocalManifest(out, data)
}

// writeLocalManifest writes data to path through a rename, so that a
// server starting meanwhile reads the old manifest or the new, never half
// of one; readable by all, as the data is.
func writeLocalManifest(path string, data []byte) (string, error) {
	if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
		return "", err
	}
	tmp, err := os.CreateTemp(filepath.Dir(path), ".manifest-*")
	if err != nil {
		return "", err
	}
	_, err = tmp.Write(data)
	err = errors.Join(err, tmp.Chmod(0o644), tmp.Close())
	if err == nil {
		err = os.Rename(tmp.Name(), path)
	}
	if err != nil {
		os.Remove(tmp.Name())
		return "", err
	}
	return path, nil
}

// count is n and noun, made plural unless n is 1: "1 class", "3 classes".
func count(n int, noun string) string {
	switch {
	case n == 1:
		return "1 " + noun
	case strings.HasSuffix(noun, "s"):
		return fmt.Sprintf("%d %ses", n, noun)
	}
	return fmt.Sprintf("%d %ss", n, noun)
}
