//go:build cgo

package pipeline

/*
#include <stdlib.h>
#include "transcode.h"
*/
import "C"

import (
	"unsafe"
)

// tcUse is one decode's use of a progressive file's transcode: the
// file's key in the cache, and what is known of the transcode's own
// identities (from its entry: the transcode is never hashed again).
type tcUse struct {
	on   bool // data and hd are the transcode's
	key  coefKey
	keys fileKeys
}

// sequential returns what to decode a JPEG from: for a progressive file
// with a coefficient cache, its sequential transcode (made now, when the
// file is admitted: transcode.go) if there is one, and the header to go
// with it; otherwise data and hd.
func (d *Decoder) sequential(data []byte, hd *header, k *fastKnobs) ([]byte, *header, tcUse) {
	cc := d.opts.coefs
	if cc == nil || !hd.progressive || k.libHuff {
		return data, hd, tcUse{}
	}
	key, check := cc.id(data, &d.fast.tag)
	seq, keys, try := cc.tcLookup(key, check)
	if try {
		seq, keys = d.transcode(cc, key, check, data)
	}
	if seq == nil {
		return data, hd, tcUse{}
	}
	if keys.cid.size != int64(len(seq)) {
		keys = fileKeys{} // not seq's: hashed again by the decode
	}
	h := *hd
	h.progressive = false
	return seq, &h, tcUse{on: true, key: key, keys: keys}
}

// transcode makes data's sequential transcode and stores it in cc, with
// its identities (hashed here, once) and, where the budget has room, the
// transcode's coefficients (every MCU, from the coefficients the transcode
// read: its decodes then entropy-decode nothing); nil when it failed or
// was refused, the budget's room included (remembered: the file is
// decoded as progressive from now on), or the budget has no room for even
// half the file (not remembered: tried again next time).
func (d *Decoder) transcode(cc *CoefCache, key coefKey, check uint64, data []byte) ([]byte, fileKeys) {
	room := cc.tcRoom(key)
	bound := min(2*int64(len(data))+64<<10, room)
	if bound < int64(len(data))/2 {
		cc.refused.Add(1) // the budget is spent: try again next time
		return nil, fileKeys{}
	}
	o := &d.opts
	// The coefficients take what the budget has beside the transcode's
	// bound; with less than the file's bytes again (they take about twice
	// them), none are made here and the decodes store them as they go.
	var cp unsafe.Pointer
	if cr := room - bound - coefOverhead; cr > int64(len(data)) {
		cp = coefsNew()
	}
	var out *C.uchar
	var n C.size_t
	var mcus C.long
	var msg [128]C.char
	rc := C.stoker_transcode((*C.uchar)(unsafe.Pointer(&data[0])), C.size_t(len(data)),
		C.int(min(max(o.maxScans, 0), 1<<30)), C.longlong(min(max(o.pixelBudget, 0), 1<<36)*6+64<<20),
		C.size_t(bound), (*C.int)(unsafe.Pointer(d.ops.Stop)), cp, C.longlong(max(room-bound-coefOverhead, 0)), &mcus,
		&out, &n, &msg[0], C.size_t(len(msg)))
	switch {
	case rc == C.STOKER_TC_STOPPED:
		coefsFree(cp)
		return nil, fileKeys{}
	case rc != C.STOKER_TC_OK:
		coefsFree(cp)
		cc.tcRefuse(key)
		return nil, fileKeys{}
	}
	seq := C.GoBytes(unsafe.Pointer(out), C.int(n))
	C.stoker_transcode_free(out)
	if hd, err := parseJPEGHeader(seq); err != nil || hd.progressive {
		coefsFree(cp)
		cc.tcRefuse(key)
		return nil, fileKeys{}
	}
	keys := fileKeys{hint: coefHint(seq), hintOK: true, cidOK: true}
	keys.cid, keys.check = cc.id(seq, &d.fast.tag)
	if o.index != nil {
		keys.xx, keys.xxOK = keyOf(seq), true
	}
	if !cc.tcStore(key, check, seq, keys) {
		coefsFree(cp)
		cc.tcRefuse(key)
		return nil, fileKeys{}
	}
	if mcus > 0 {
		cc.adopt(&keys, cp, int64(mcus))
	} else {
		coefsFree(cp)
	}
	return seq, keys
}
