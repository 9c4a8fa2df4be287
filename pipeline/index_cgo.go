//go:build cgo

package pipeline

/*
#include "turbo.h"
*/
import "C"

import "unsafe"

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
func (d *Decoder) indexFinish(rc C.int, data, out []byte, u ixUse) C.int {
	f := &d.fast
	j := f.job
	ix, key, origin := u.ix, u.key, u.origin
	mine := ix != nil
	why := ""
	switch {
	case j.ix_state == C.STOKER_IX_STALE:
		why = rejectStale
	case j.ix_state == C.STOKER_IX_BAD:
		why = rejectChecks
	case rc == C.STOKER_OK && j.ix_lied != 0:
		why = rejectDecoder
	case rc == C.STOKER_INDEX_BAD:
		why = rejectDecoder
		rc = f.decode(data, out, nil)
	case rc == C.STOKER_CORRUPT && j.ck_seeks > 0:
		if rc = f.decode(data, out, nil); rc == C.STOKER_OK {
			why = rejectDecoder
		}
	}
	if mine && why != "" {
		ix.reject(key, origin, why)
	}
	if rc != C.STOKER_OK || !mine {
		return rc
	}
	// (After a disagreement the index holds the file's other claims: not
	// kept, the entry was dropped.)
	if j.ix_changed != 0 && j.ix_lied == 0 {
		nb := make([]byte, int(j.ix_bytes))
		unsure := C.stoker_index_copy(f.t, (*C.uchar)(unsafe.Pointer(&nb[0])))
		if unsure == 0 || j.ix_state != C.STOKER_IX_USED {
			origin = 0
		}
		ix.putFrom(key, nb, origin)
	}
	ix.mcusTotal.Add(int64(j.mcus_total))
	ix.mcusDecoded.Add(int64(j.mcus_decoded))
	return rc
}
