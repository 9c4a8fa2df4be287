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
	"strings"
	"time"

	"github.com/stoker-dev/stoker/pipeline"
	"github.com/stoker-dev/stoker/pipeline/source"
)

const indexUsage = "usage: stoker index URL|DIR [--out PATH|URL] [--concurrency N]"

// runIndex is `stoker index`: it lists a dataset (reading each WebDataset
// shard once, as a stream) and writes its manifest beside the data
// (ROOT/.stoker/manifest) or to --out, so that serve starts without
// listing or scanning.
func runIndex(args []string) error {
	ctx := cmdContext()
	fs := flag.NewFlagSet("index", flag.ExitOnError)
	out := fs.String("out", "", "write the manifest to this path or s3://, gs://, azblob:// URL (for a read-only bucket; serve then takes --manifest NAME=it); default ROOT/.stoker/manifest, beside the data")
	conc := fs.Int("concurrency", 8, "WebDataset shards read at once")
	fs.Usage = func() {
		fmt.Fprintln(fs.Output(), indexUsage)
		fs.PrintDefaults()
	}
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
	if fs.NArg() > 0 || *conc < 1 {
		return usageError{errors.New(indexUsage)}
	}
	return index(ctx, src, *out, *conc, os.Stderr, os.Stdout)
}

// index indexes src and writes its manifest, reporting progress on
// progress (rewriting one line when it is a terminal) and what it wrote on
// out.
func index(ctx context.Context, src, out string, conc int, progress, result io.Writer) error {
	start := time.Now()
	pr := newProgressReporter(progress, start)
	opts := pipeline.IndexOptions{Concurrency: conc, Progress: pr.report}
	var (
		m   *pipeline.Manifest
		st  source.Store
		err error
	)
	if source.IsRemote(src) {
		if st, err = source.Open(ctx, src); err != nil {
			return err
		}
		defer st.Close()
		m, err = pipeline.IndexStore(ctx, st, opts)
	} else {
		m, err = pipeline.IndexDir(ctx, src, opts)
	}
	pr.done()
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
	fmt.Fprintf(result, "wrote %s: %s, %d samples in %d objects, %d classes, %d bytes, fingerprint %s, in %v\n",
		where, m.Layout, m.Len(), m.NumObjects(), len(m.Classes), buf.Len(), m.Fingerprint(), time.Since(start).Round(time.Millisecond))
	return nil
}

// writeManifest writes data beside the dataset src (st when remote) or to
// out, and says where.
func writeManifest(ctx context.Context, src string, st source.Store, out string, data []byte) (string, error) {
	switch {
	case out == "" && st != nil:
		where := strings.TrimSuffix(st.String(), "/") + "/" + pipeline.ManifestName
		if err := st.Put(ctx, pipeline.ManifestName, data); err != nil {
			return "", fmt.Errorf("write %s: %w (a read-only bucket: write it elsewhere with --out, and give serve --manifest)", where, err)
		}
		return where, nil
	case out == "":
		return writeLocalManifest(filepath.Join(src, filepath.FromSlash(pipeline.ManifestName)), data)
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

// progressReporter shows an index's progress: on a terminal one line
// rewritten in place (count, rate, ETA), otherwise a log line every
// logEvery.
type progressReporter struct {
	w        io.Writer
	tty      bool
	start    time.Time
	phase    string
	phaseAt  time.Time
	lastLine time.Time
	last     pipeline.IndexProgress
	now      func() time.Time // time.Now; the tests' clock
}

const logEvery = 10 * time.Second

func newProgressReporter(w io.Writer, start time.Time) *progressReporter {
	p := &progressReporter{w: w, start: start, lastLine: start, now: time.Now}
	if f, ok := w.(*os.File); ok {
		if fi, err := f.Stat(); err == nil && fi.Mode()&os.ModeCharDevice != 0 {
			p.tty = true
		}
	}
	return p
}

func (p *progressReporter) report(pr pipeline.IndexProgress) {
	now := p.now()
	if pr.Phase != p.phase {
		if p.phase != "" {
			p.line(now, true)
		}
		p.phase, p.phaseAt = pr.Phase, now
	}
	p.last = pr
	if p.tty || now.Sub(p.lastLine) >= logEvery {
		p.line(now, false)
	}
}

// done ends the last phase's line.
func (p *progressReporter) done() {
	if p.phase != "" {
		p.line(p.now(), true)
	}
}

// line writes the progress so far; final ends the phase's line.
func (p *progressReporter) line(now time.Time, final bool) {
	p.lastLine = now
	pr := p.last
	el := now.Sub(p.phaseAt).Seconds()
	var s string
	switch pr.Phase {
	case "list":
		s = fmt.Sprintf("listing: %d objects", pr.Done)
		if el > 0 {
			s += fmt.Sprintf(" (%.0f/s)", float64(pr.Done)/el)
		}
	default:
		s = fmt.Sprintf("reading shards: %d of %d", pr.Done, pr.Total)
		if pr.TotalBytes > 0 {
			s += fmt.Sprintf(", %s of %s", bytesString(pr.Bytes), bytesString(pr.TotalBytes))
		}
		if el > 0 && pr.Done > 0 {
			s += fmt.Sprintf(" (%.1f shards/s, %s/s)", float64(pr.Done)/el, bytesString(int64(float64(pr.Bytes)/el)))
			if pr.Done < pr.Total {
				left := time.Duration(el * float64(pr.Total-pr.Done) / float64(pr.Done) * float64(time.Second))
				if pr.TotalBytes > 0 && pr.Bytes > 0 {
					left = time.Duration(el * float64(pr.TotalBytes-pr.Bytes) / float64(pr.Bytes) * float64(time.Second))
				}
				s += fmt.Sprintf(", ETA %v", left.Round(time.Second))
			}
		}
	}
	switch {
	case p.tty && final:
		fmt.Fprintf(p.w, "\r\033[K%s\n", s)
	case p.tty:
		fmt.Fprintf(p.w, "\r\033[K%s", s)
	default:
		fmt.Fprintf(p.w, "%s stoker index: %s\n", now.Format(time.RFC3339), s)
	}
}

// bytesString is n in B, KB, MB, GB (powers of 1000).
func bytesString(n int64) string {
	const unit = 1000
	if n < unit {
		return fmt.Sprintf("%d B", n)
	}
	f, u := float64(n), 0
	for f >= unit && u < 4 {
		f /= unit
		u++
	}
	return fmt.Sprintf("%.1f %cB", f, "kMGT"[u-1])
}
