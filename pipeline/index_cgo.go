//go:build cgo

package pipeline

import (
	"github.com/stoker-dev/stoker/pipeline/codec"
	"github.com/stoker-dev/stoker/pipeline/codec/index"
)

// indexFinish keeps what a decode made with a decoder index learnt (rc;
// u.blob is the Index's entry for u.key, from index file u.origin, or a
// test's forceIx when u.ix is nil, and nothing is kept then). The
// decode's output is right whatever the entry said: it started only at
// checkpoints confirmed here (huff.h, stoker_hix). An
// entry refused by its header (IX_STALE) or its checks (IX_BAD), or with a
// checkpoint that disagreed with the decoder, is dropped, with the index
// file it came from, if any. After BAD (a confirmed checkpoint disagreed:
// a hash collision or a bug) the decode stopped; it is done again from the
// file's start with a fresh index, as is a decode that started at a
// checkpoint and found the data corrupt (if that one succeeds, the entry
// was wrong): a good sample is never failed for its index. A successful
// decode's index is stored if it changed, still tagged with its index file
// while it holds checkpoints not confirmed.
func (d *Decoder) indexFinish(rc codec.Code, data, out []byte, u ixUse) codec.Code {
	f := &d.fast
	j := f.s.Stats()
	ix, key, origin := u.ix, u.key, u.origin
	mine := ix != nil
	why := ""
	switch {
	case j.IxState == codec.IxStale:
		why = index.RejectStale
	case j.IxState == codec.IxBad:
		why = index.RejectChecks
	case rc == codec.OK && j.IxLied:
		why = index.RejectDecoder
	case rc == codec.IndexBad:
		why = index.RejectDecoder
		rc = f.decode(data, out, nil)
	case rc == codec.Corrupt && j.CkSeeks > 0:
		if rc = f.decode(data, out, nil); rc == codec.OK {
			why = index.RejectDecoder
		}
	}
	if mine && why != "" {
		ix.Reject(key, origin, why)
	}
	if rc != codec.OK || !mine {
		return rc
	}
	j = f.s.Stats() // the last decode's: a retry's, if there was one
	// (After a disagreement the index holds the file's other claims: not
	// kept, the entry was dropped.)
	if j.IxChanged && !j.IxLied {
		nb := make([]byte, j.IxBytes)
		unsure := f.s.IndexCopy(nb)
		if unsure == 0 || j.IxState != codec.IxUsed {
			origin = 0
		}
		ix.Store(key, nb, origin)
	}
	ix.CountMCUs(j.MCUs, j.Decoded)
	return rc
}
