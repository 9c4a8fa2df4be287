//go:build cgo

package pipeline

import (
	"errors"

	"github.com/stoker-dev/stoker/pipeline/codec"
)

// tcUse is one decode's use of a progressive file's transcode: the
// file's key in the cache, and the identities its coefficient entry is
// under (the file's: transcode.go).
type tcUse struct {
	on   bool // data and hd are the transcode's headers
	key  coefKey
	keys fileKeys
}

// errTranscodeBusy says a transcode's coefficient entry is in use by
// another Decoder, or gone: the file is decoded as progressive this time.
var errTranscodeBusy = errors.New("the transcode's coefficients are in use or gone")

// sequential returns what to decode a JPEG from: for a progressive file
// with a coefficient cache, its sequential transcode's headers (made now
// if it has none: transcode.go), and the header to go with them;
// otherwise data and hd.
func (d *Decoder) sequential(data []byte, hd *header, k *fastKnobs) ([]byte, *header, tcUse) {
	cc := d.opts.coefs
	if cc == nil || !hd.progressive || k.LibHuff {
		return data, hd, tcUse{}
	}
	key, check := cc.id(data, &d.fast.tag)
	seq, keys, try := cc.tcLookup(key, check)
	if try {
		seq, keys = d.transcode(cc, key, check, data, hd)
	}
	if seq == nil {
		return data, hd, tcUse{}
	}
	h := *hd
	h.progressive = false
	return seq, &h, tcUse{on: true, key: key, keys: keys}
}

// transcode stores data's sequential transcode in cc: every MCU in a
// coefficient entry under the file's key, and the headers (stubOf); it
// returns the headers and the entry's identities, or nil when the
// transcode failed or was refused, the budget's room included
// (remembered: the file is decoded as progressive from now on), or the
// budget has no room for even half the file (not remembered: tried again
// next time).
func (d *Decoder) transcode(cc *CoefCache, key coefKey, check uint64, data []byte, hd *header) ([]byte, fileKeys) {
	room := cc.tcRoom(key)
	// Its bound: four times the file, 8 bytes a block (the entry's table
	// is 8 bytes an MCU) and 64 KiB. Photos take 2 to 3 times.
	blocks := int64((hd.w+15)/16*2) * int64((hd.h+15)/16*2) * int64(hd.comps)
	bound := min(4*int64(len(data))+8*blocks+64<<10, room-1024)
	if bound < int64(len(data))/2 {
		cc.refused.Add(1) // the budget is spent: try again next time
		return nil, fileKeys{}
	}
	stub, err := stubOf(data)
	if err != nil {
		cc.tcRefuse(key)
		return nil, fileKeys{}
	}
	o := &d.opts
	p := coefsNew()
	if p == nil {
		return nil, fileKeys{}
	}
	rc, _ := codec.Transcode(data, min(max(o.maxScans, 0), 1<<30), min(max(o.pixelBudget, 0), 1<<36)*6+64<<20,
		d.ops.Stop, p, bound-coefOverhead)
	switch {
	case rc == codec.TcStopped:
		coefsFree(p)
		return nil, fileKeys{}
	case rc != codec.TcOK:
		coefsFree(p)
		cc.tcRefuse(key)
		return nil, fileKeys{}
	}
	keys := fileKeys{cid: key, check: check, hint: coefHint(data), cidOK: true, hintOK: true}
	if !cc.tcStore(key, check, stub, keys) {
		coefsFree(p)
		cc.tcRefuse(key)
		return nil, fileKeys{}
	}
	if !cc.adopt(&keys, p, codec.CoefsMCUs(p), bound) && !cc.present(&keys) {
		// (Present: another Decoder transcoded the file meanwhile.)
		cc.tcDrop(key)
		return nil, fileKeys{}
	}
	return stub, keys
}
