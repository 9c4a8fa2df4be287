package dataset

// A shard's scan: one pass over its tar headers (and, for a stream, its
// bytes), listing each member's key, extension, offset and size.

import (
	"archive/tar"
	"bytes"
	"cmp"
	"crypto/sha256"
	"fmt"
	"io"
	"os"
	"slices"
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
		lower := strings.ToLower(ext)
		if n, ok := numberedImage(lower); ok {
			// One of a record's images (KEY.0.jpg, KEY.1.jpg, ...):
			// placed in its record once the shard is scanned (records).
			if sparse {
				return nil, fmt.Errorf("%w: shard %s: %s is stored as a sparse file (tar --sparse), which cannot be read in place", ErrUnsupported, shard, hd.Name)
			}
			im := wdsImage{n: n, offset: pr.offset(), size: hd.Size, name: hd.Name}
			if hash {
				h := sha256.New()
				if _, err := io.Copy(h, tr); err != nil {
					return nil, fmt.Errorf("%w: shard %s: %s: %v", ErrCorrupt, shard, hd.Name, err)
				}
				im.hash = h.Sum(nil)
			}
			p.images = append(p.images, im)
			continue
		}
		switch {
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
	for k := range out {
		if err := out[k].record(shard); err != nil {
			return nil, err
		}
	}
	return out, nil
}

// wdsImage is one of a record's numbered images (KEY.<n>.jpg): its
// number, and its member's bytes and name.
type wdsImage struct {
	n            int
	offset, size int64
	name         string
	hash         []byte
}

// numberedImage says whether a member's extension (lowercased) is a
// record's image's, "<n>.jpg" (or .jpeg, .png, .webp), and its number
// (-1 for digits past an int).
func numberedImage(ext string) (n int, ok bool) {
	digits, img, found := strings.Cut(ext, ".")
	if !found || digits == "" || !imageExt(img) || strings.Trim(digits, "0123456789") != "" {
		return 0, false
	}
	n, err := strconv.Atoi(digits)
	if err != nil {
		return -1, true
	}
	return n, true
}

// record orders a key's numbered images by number (10 after 9) and makes
// the key a sample of them: its image the first, the others in images.
// A key with both a plain image and numbered ones, with more than
// MaxRecordImages, or whose numbers are not 0, 1, 2, ... is refused,
// naming the shard, the key and why.
func (p *wdsScanned) record(shard string) error {
	if len(p.images) == 0 {
		return nil
	}
	key := p.name
	if !p.noImage {
		key, _, _ = keyOfMember(p.name)
	}
	bad := func(format string, a ...any) error {
		return fmt.Errorf("%w: shard %s: sample %s %s: a sample is one image (KEY.jpg) or a record of several numbered from 0 (KEY.0.jpg, KEY.1.jpg, ...)",
			ErrUnsupported, shard, key, fmt.Sprintf(format, a...))
	}
	if !p.noImage {
		return bad("has both an image %s and numbered images (%s, ...), and which it is would be a guess", p.name, p.images[0].name)
	}
	if len(p.images) > MaxRecordImages {
		return bad("has %d numbered images: the limit is %d a record (a batch holds a record whole)", len(p.images), MaxRecordImages)
	}
	slices.SortStableFunc(p.images, func(a, b wdsImage) int { return cmp.Compare(a.n, b.n) })
	for k, im := range p.images {
		switch {
		case im.n == k:
		case k > 0 && im.n == p.images[k-1].n:
			return bad("has two images numbered %d (%s and %s)", im.n, p.images[k-1].name, im.name)
		default:
			return bad("has no image numbered %d (its images are numbered %s)", k, imageNumbers(p.images))
		}
	}
	first := p.images[0]
	p.noImage, p.offset, p.size, p.name, p.hash = false, first.offset, first.size, first.name, first.hash
	return nil
}

// imageNumbers lists a record's images' numbers for a message.
func imageNumbers(images []wdsImage) string {
	var b strings.Builder
	for k, im := range images {
		if k > 0 {
			b.WriteString(", ")
		}
		if k == 8 {
			fmt.Fprintf(&b, "... (%d in all)", len(images))
			break
		}
		if im.n < 0 {
			b.WriteString("(past an int)")
		} else {
			b.WriteString(strconv.Itoa(im.n))
		}
	}
	return b.String()
}
