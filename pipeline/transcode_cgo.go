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

// tcUse is one decode's use of a progressive file's transcode.
type tcUse struct {
	on  bool // data and hd are the transcode's
	key indexKey
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
	key := keyOf(data)
	seq, try := cc.tcLookup(key, data, d.opts.index == nil || d.admitNow)
	if try {
		seq = d.transcode(cc, key, data)
	}
	if seq == nil {
		return data, hd, tcUse{}
	}
	h := *hd
	h.progressive = false
	return seq, &h, tcUse{on: true, key: key}
}

// transcode makes data's sequential transcode and stores it in cc; nil
// when it failed or was refused, the budget's room included (remembered:
// the file is decoded as progressive from now on), or the budget has no
// room for even half the file (not remembered: tried again next time).
func (d *Decoder) transcode(cc *CoefCache, key indexKey, data []byte) []byte {
	room := cc.tcRoom(key)
	bound := min(2*int64(len(data))+64<<10, room)
	if bound < int64(len(data))/2 {
		cc.refused.Add(1) // the budget is spent: try again next time
		return nil
	}
	o := &d.opts
	var out *C.uchar
	var n C.size_t
	var msg [128]C.char
	rc := C.stoker_transcode((*C.uchar)(unsafe.Pointer(&data[0])), C.size_t(len(data)),
		C.int(min(max(o.maxScans, 0), 1<<30)), C.longlong(min(max(o.pixelBudget, 0), 1<<36)*6+64<<20),
		C.size_t(bound), (*C.int)(unsafe.Pointer(d.ops.stop)), &out, &n, &msg[0], C.size_t(len(msg)))
	switch {
	case rc == C.STOKER_TC_STOPPED:
		return nil
	case rc != C.STOKER_TC_OK:
		cc.tcRefuse(key)
		return nil
	}
	seq := C.GoBytes(unsafe.Pointer(out), C.int(n))
	C.stoker_transcode_free(out)
	if hd, err := parseJPEGHeader(seq); err != nil || hd.progressive {
		cc.tcRefuse(key)
		return nil
	}
	if !cc.tcStore(key, cc.check(data), seq) {
		cc.tcRefuse(key)
		return nil
	}
	return seq
}
