package codec

import (
	"bytes"
	"fmt"

	"github.com/stoker-dev/stoker/pipeline/errs"
)

// Progressive JPEGs at baseline speed. A progressive file is
// entropy-decoded whole by libjpeg on every decode: no decoder index, no
// crop-only decoding, no coefficient cache (those are huff.c's, for
// sequential files). So the CoefCache also keeps, for the progressive
// files a Scratch decodes, the file transcoded losslessly to sequential:
// the MCUs of one interleaved scan of the same quantized coefficients,
// quantization tables, sampling and color space, as huff.c would decode
// them, stored whole in a coefficient-cache entry (transcode.c, from the
// coefficients its one read of the scans made), and the headers of that
// sequential file (stubOf: the file's own, up to its first scan, with a
// baseline frame and scan header and no scan data). Later decodes of the
// file decode the headers through the fast path with every MCU copied out
// of the entry (stoker_job.coefs_only), crop-only as a cached sequential
// file's. The pixels are the same: libjpeg makes them from the same
// coefficients the same way. The one exception, block smoothing, which
// libjpeg applies to a progressive file whose coefficients are not all
// coded to full precision, is refused: such a file is decoded as
// progressive every time. No sequential scan is written: nothing would
// read it (the entry holds every MCU), and writing it (Huffman encoding)
// was a fifth of the transcode's cost.
//
// The transcodes share the coefficient cache's budget (--coef-budget)
// rather than having their own: both trade memory for decode speed per
// file, and one budget is one knob for the memory both take.
//
// A file is transcoded on its first decode, with or without an Index
// (the decode is then made from the transcode: the first epoch pays for
// reading every scan whole, where a plain decode reads them down to the
// views' last row, and from the second on a crop is copied out of the
// cache). A transcode is refused for a file whose entry would be over four
// times its size plus 8 bytes a block plus 64 KiB, or over the budget's
// room; libjpeg's memory is bounded as the decoder's is (by the pixel
// budget) and its work by the scan cap (Job.MaxScans). A file whose
// transcode fails or is refused is remembered and decoded as progressive
// from then on (TranscodeFallbacks counts them), as is one whose
// transcode failed to decode where the file itself did not (a bug: the
// sample is decoded again from the file, never failed for its
// transcode). A decode that finds the transcode's entry in use by another
// Scratch decodes the file as progressive meanwhile; one that finds it
// gone (not yet stored by the Scratch making it, or dropped) forgets the
// transcode, to be made again. A decode of a transcode stores nothing and
// leaves its entry as it was, failed or abandoned. Entries are keyed by the file's
// content like the coefficients' (the transcode's entry under the file's
// own key: two files with the same headers share no entry), and a hit is
// checked against the file's second hash: a colliding file decodes as
// itself.

// tcEntry is a progressive file's state in the transcode table: refused,
// or transcoded (seq).
type tcEntry struct {
	check   uint64   // the second half of the file's MAC, for a transcoded one
	seq     []byte   // the sequential file's headers (stubOf); never changed once stored
	keys    fileKeys // the identities its coefficient entry is under (the file's)
	refused bool
}

// tcOverhead is what a transcode table entry costs beside its bytes: the
// entry (96 bytes, the transcode's identities included), its map slot,
// the key.
const tcOverhead = 144

// tcLookup returns the transcode of the file of key k and check (nil:
// none), with its identities, and whether to transcode the file now: it
// has none and is not refused.
func (c *CoefCache) tcLookup(k coefKey, check uint64) (seq []byte, keys fileKeys, try bool) {
	t := c.t
	t.mu.Lock()
	e := t.tc[k]
	switch {
	case e == nil:
		t.mu.Unlock()
		return nil, fileKeys{}, true
	case e.refused:
		t.mu.Unlock()
		return nil, fileKeys{}, false
	case e.seq == nil:
		t.mu.Unlock()
		return nil, fileKeys{}, true
	}
	seq, keys, stored := e.seq, e.keys, e.check
	t.mu.Unlock()
	if stored != check {
		c.collisions.Add(1)
		return nil, fileKeys{}, false
	}
	c.tcHits.Add(1)
	return seq, keys, false
}

// tcRoom is the most bytes a transcode of k may take now: the budget's
// room less the entry's overhead, if k has no entry yet.
func (c *CoefCache) tcRoom(k coefKey) int64 {
	t := c.t
	t.mu.Lock()
	defer t.mu.Unlock()
	room := t.budget - t.used
	if t.tc[k] == nil {
		room -= tcOverhead
	}
	return max(room, 0)
}

// tcStore keeps seq, whose identities are keys, as the transcode of the
// file of key k and check, if the budget has room; it reports whether it
// did. A file transcoded meanwhile by another Scratch keeps that
// transcode.
func (c *CoefCache) tcStore(k coefKey, check uint64, seq []byte, keys fileKeys) bool {
	t := c.t
	t.mu.Lock()
	defer t.mu.Unlock()
	e := t.tc[k]
	if e != nil && (e.seq != nil || e.refused) {
		return e.seq != nil && e.check == check
	}
	need := int64(len(seq))
	if e == nil {
		need += tcOverhead
	}
	if t.budget-t.used < need {
		return false
	}
	if e == nil {
		e = &tcEntry{}
		t.tc[k] = e
	}
	e.seq, e.check, e.keys = seq, check, keys
	t.used += need
	t.tcBytes += int64(len(seq))
	t.tcFiles++
	return true
}

// tcRefuse remembers k as a file decoded as progressive from now on (its
// transcode failed or was refused), if the budget has room for that, and
// counts it.
func (c *CoefCache) tcRefuse(k coefKey) {
	c.tcFallbacks.Add(1)
	t := c.t
	t.mu.Lock()
	defer t.mu.Unlock()
	switch e := t.tc[k]; {
	case e != nil && e.seq == nil:
		e.refused = true
	case e == nil && t.budget-t.used >= tcOverhead:
		t.tc[k] = &tcEntry{refused: true}
		t.used += tcOverhead
	}
}

// tcDrop forgets k's transcode and its coefficients (a decode of it failed
// where the original did not) and remembers k as refused.
func (c *CoefCache) tcDrop(k coefKey) {
	t := c.t
	t.mu.Lock()
	if e := t.tc[k]; e != nil && e.seq != nil {
		t.used -= int64(len(e.seq))
		t.tcBytes -= int64(len(e.seq))
		t.tcFiles--
		e.seq, e.refused = nil, true
		t.drop(k)
	}
	t.mu.Unlock()
	c.tcFallbacks.Add(1)
}

// tcForget forgets k's transcode, whose coefficient entry is gone (not yet
// stored by the Scratch making it, or dropped): the next decode
// transcodes it again.
func (c *CoefCache) tcForget(k coefKey) {
	t := c.t
	t.mu.Lock()
	defer t.mu.Unlock()
	if e := t.tc[k]; e != nil && e.seq != nil && t.entries[k] == nil {
		t.used -= int64(len(e.seq)) + tcOverhead
		t.tcBytes -= int64(len(e.seq))
		t.tcFiles--
		delete(t.tc, k)
	}
}

// stubOf returns the headers of the sequential transcode of the progressive
// JPEG data (transcode.c): its JFIF and Adobe segments (which say its color
// space) and quantization tables as they are, its frame header as a
// sequential one (SOF0, or SOF1 with 16-bit tables), one Huffman table of
// one code of each kind, a scan header of every component (the first with
// tables 0, the others 1, as jpegtran writes) and the end of the image: no
// scan data, every MCU is in the transcode's coefficient entry. Restart
// intervals, other tables, markers and application segments are left out.
func stubOf(data []byte) ([]byte, error) {
	bad := func(why string) ([]byte, error) {
		return nil, fmt.Errorf("%w: progressive transcode: %s", errs.Corrupt, why)
	}
	if len(data) < 4 || data[0] != 0xFF || data[1] != 0xD8 {
		return bad("no start of image")
	}
	out := []byte{0xFF, 0xD8}
	var sof []byte
	wide := false
	for p := 2; ; {
		for p < len(data) && data[p] == 0xFF && p+1 < len(data) && data[p+1] == 0xFF {
			p++ // fill bytes
		}
		if p+4 > len(data) || data[p] != 0xFF {
			return bad("no scan header")
		}
		m, n := data[p+1], int(data[p+2])<<8|int(data[p+3])
		if n < 2 || p+2+n > len(data) {
			return bad("a segment past the end")
		}
		seg := data[p : p+2+n]
		p += 2 + n
		switch {
		case m == 0xDA:
			if sof == nil {
				return bad("no frame header")
			}
			nc := int(sof[9])
			sof[1] = 0xC0
			if wide {
				sof[1] = 0xC1
			}
			out = append(out, sof...)
			// DHT: DC 0 and 1, AC 0 and 1, each one code of length 1
			// (symbol 0), never read.
			out = append(out, 0xFF, 0xC4, 0, 2+4*18)
			for _, tc := range []byte{0x00, 0x01, 0x10, 0x11} {
				out = append(out, tc, 1, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0)
			}
			out = append(out, 0xFF, 0xDA, 0, byte(6+2*nc), byte(nc))
			for i := range nc {
				tabs := byte(0x11)
				if i == 0 {
					tabs = 0
				}
				out = append(out, sof[10+3*i], tabs)
			}
			return append(out, 0, 63, 0, 0xFF, 0xD9), nil
		case m == 0xC2:
			if sof != nil || n < 11 || seg[9] < 1 || n != 8+3*int(seg[9]) {
				return bad("a bad frame header")
			}
			sof = bytes.Clone(seg)
		case m == 0xDB:
			for q := 4; q < len(seg); {
				pq := seg[q] >> 4
				wide = wide || pq != 0
				q += 1 + 64*(1+int(pq))
			}
			out = append(out, seg...)
		case m == 0xE0 || m == 0xEE:
			out = append(out, seg...)
		case m >= 0xC0 && m <= 0xCF && m != 0xC4 && m != 0xCC:
			return bad("not a progressive Huffman-coded frame")
		}
	}
}
