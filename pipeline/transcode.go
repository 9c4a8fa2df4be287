package pipeline

// Progressive JPEGs at baseline speed. A progressive file is
// entropy-decoded whole by libjpeg on every decode: no decoder index, no
// crop-only decoding, no coefficient cache (those are huff.c's, for
// sequential files). So the CoefCache also keeps, for the progressive
// files a Decoder decodes, the file rewritten losslessly as a sequential
// JPEG (transcode.c: the same quantized coefficients, quantization tables,
// sampling and color space, one scan with the standard Huffman tables),
// and later decodes of the file decode those bytes through the fast path,
// where the index, crop-only decoding and the coefficient cache apply. The
// pixels are the same: libjpeg makes them from the same coefficients the
// same way. The one exception, block smoothing, which libjpeg applies to a
// progressive file whose coefficients are not all coded to full precision,
// is refused: such a file is decoded as progressive every time.
//
// The transcodes share the coefficient cache's budget (--coef-budget)
// rather than having their own: both trade memory for decode speed per
// file, a transcode (about the file's size) is what lets the coefficient
// cache hold a progressive file's coefficients at all (2 to 3 times it),
// and one budget is one knob for the memory both take.
//
// A file is transcoded when the coefficient cache would admit it: on its
// second decode when the Decoder has an Index (its first decode marks it
// seen, so the first epoch runs as it did), on its first otherwise or when
// the sample has copies to come. The transcode's own coefficients are
// admitted to the cache on its first decode (the file's second or later).
// A transcode is refused for a file whose
// sequential form would be over twice its size plus 64 KiB, or over the
// budget's room; libjpeg's memory is bounded as the decoder's is (by the
// pixel budget) and its work by the scan cap (WithMaxScans). A file whose
// transcode fails or is refused is remembered and decoded as progressive
// from then on (TranscodeFallbacks counts them), as is one whose
// transcode failed to decode where the file itself did not (a bug: the
// sample is decoded again from the file, never failed for its
// transcode). Entries are keyed by
// content like the coefficients', and a hit is checked against the file's
// second hash: a colliding file decodes as itself.

// tcEntry is a progressive file's state in the transcode table: refused,
// or transcoded (seq).
type tcEntry struct {
	check   uint64   // the second half of the file's MAC, for a transcoded one
	seq     []byte   // the sequential file; never changed once stored
	keys    fileKeys // seq's identities
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
// did. A file transcoded meanwhile by another Decoder keeps that
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

// tcDrop forgets k's transcode (a decode of it failed where the original
// may not) and remembers k as refused.
func (c *CoefCache) tcDrop(k coefKey) {
	t := c.t
	t.mu.Lock()
	if e := t.tc[k]; e != nil && e.seq != nil {
		t.used -= int64(len(e.seq))
		t.tcBytes -= int64(len(e.seq))
		t.tcFiles--
		e.seq, e.refused = nil, true
	}
	t.mu.Unlock()
	c.tcFallbacks.Add(1)
}
