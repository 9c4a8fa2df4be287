package dataset

// A shard's scan: one pass over its tar headers (and, for a stream, its
// bytes), listing each member's key, extension, offset and size.

import (
	"archive/tar"
	"bytes"
	"crypto/sha256"
	"fmt"
	"io"
	"os"
	"strconv"
	"strings"
)

// posReader tracks the offset tar has read up to, so that each member's
// data offset is known without reading the data.
type posReader struct {
	f   *os.File
	pos int64
}

func (r *posReader) Read(p []byte) (int, error) {
	n, err := r.f.ReadAt(p, r.pos)
	r.pos += int64(n)
	if err == io.EOF && n > 0 {
		err = nil
	}
	return n, err
}

func (r *posReader) Seek(off int64, whence int) (int64, error) {
	switch whence {
	case io.SeekCurrent:
		r.pos += off
	case io.SeekStart:
		r.pos = off
	default:
		st, err := r.f.Stat()
		if err != nil {
			return 0, err
		}
		r.pos = st.Size() + off
	}
	return r.pos, nil
}

func (r *posReader) offset() int64 { return r.pos }

// streamReader is a shard read as a stream from its start (an object
// store's body): tar reads through the members it skips, as it cannot
// seek, so a shard is read once, front to back.
type streamReader struct {
	r   io.Reader
	pos int64
}

func (r *streamReader) Read(p []byte) (int, error) {
	n, err := r.r.Read(p)
	r.pos += int64(n)
	return n, err
}

func (r *streamReader) offset() int64 { return r.pos }

// shardReader is a tar shard read from its start that knows the offset it
// has been read up to: the data of the member tar.Reader.Next has just
// returned starts there.
type shardReader interface {
	io.Reader
	offset() int64
}

func indexShard(f *os.File, si int32, shard string) ([]wdsScanned, error) {
	return scanShard(&posReader{f: f}, si, shard, false)
}

// imageExt says whether a member's extension (lowercased) is an image's.
func imageExt(ext string) bool {
	switch ext {
	case "jpg", "jpeg", "png", "webp":
		return true
	}
	return false
}

// scanShard finds the keys of the shard read by pr, in the order they
// first appear: the one tar-member parser of local shards and of shards in
// object storage, so both take the same members as samples, with the
// same labels, fields and errors. A key's image is its last member with
// an image's extension; its other members but its .cls are its fields.
// With hash, each image's bytes are hashed as they go by (a shard in a
// store that gives it no version: the hashes stand for one).
func scanShard(pr shardReader, si int32, shard string, hash bool) ([]wdsScanned, error) {
	byKey := map[string]int{}
	var out []wdsScanned
	tr := tar.NewReader(pr)
	for {
		hd, err := tr.Next()
		if err == io.EOF {
			break
		}
		if err != nil {
			return nil, fmt.Errorf("%w: shard %s: %v", ErrCorrupt, shard, err)
		}
		// A sparse member (tar --sparse) is a regular file whose data
		// section is not its content: it cannot be read in place.
		sparse := hd.Typeflag == tar.TypeGNUSparse
		for k := range hd.PAXRecords {
			sparse = sparse || strings.HasPrefix(k, "GNU.sparse.")
		}
		if hd.Typeflag != tar.TypeReg && !sparse {
			continue
		}
		key, ext, ok := keyOfMember(hd.Name)
		if !ok {
			continue
		}
		k, seen := byKey[key]
		if !seen {
			k = len(out)
			byKey[key] = k
			out = append(out, wdsScanned{wdsSample: wdsSample{shard: si, noImage: true, name: key}})
		}
		p := &out[k]
		switch lower := strings.ToLower(ext); {
		case imageExt(lower):
			if sparse {
				return nil, fmt.Errorf("%w: shard %s: %s is stored as a sparse file (tar --sparse), which cannot be read in place", ErrUnsupported, shard, hd.Name)
			}
			if !p.noImage { // an earlier image of the key: a field now
				_, e, _ := keyOfMember(p.name)
				p.members = append(p.members, wdsMember{ext: e, off: p.offset, size: p.size})
			}
			p.noImage, p.offset, p.size, p.name, p.hash = false, pr.offset(), hd.Size, hd.Name, nil
			if hash {
				h := sha256.New()
				if _, err := io.Copy(h, tr); err != nil {
					return nil, fmt.Errorf("%w: shard %s: %s: %v", ErrCorrupt, shard, hd.Name, err)
				}
				p.hash = h.Sum(nil)
			}
		case lower == "cls":
			// A label that is not one is the dataset's fault, not an
			// image's: ErrUnsupported, saying what a label must be.
			if hd.Size > maxClsBytes {
				return nil, fmt.Errorf("%w: shard %s: %s is %d bytes, not a label (%s)", ErrUnsupported, shard, hd.Name, hd.Size, clsForm)
			}
			p.clsOff, p.clsSize = pr.offset(), hd.Size
			b, err := io.ReadAll(tr)
			if err != nil {
				return nil, fmt.Errorf("%w: shard %s: %s: %v", ErrCorrupt, shard, hd.Name, err)
			}
			v, err := strconv.ParseInt(string(bytes.TrimSpace(b)), 10, 64)
			if err != nil || v < 0 {
				return nil, fmt.Errorf("%w: shard %s: %s: label %q is not a non-negative integer (%s)", ErrUnsupported, shard, hd.Name, b, clsForm)
			}
			if v >= maxClasses {
				return nil, fmt.Errorf("%w: shard %s: %s: label %d is over the limit of %d classes", ErrUnsupported, shard, hd.Name, v, maxClasses)
			}
			p.label, p.hasCls = v, true
		default:
			if sparse {
				continue // not read in place: no field
			}
			p.members = append(p.members, wdsMember{ext: ext, off: pr.offset(), size: hd.Size})
		}
	}
	return out, nil
}
