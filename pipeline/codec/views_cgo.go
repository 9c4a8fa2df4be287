//go:build cgo

package codec

import (
	"errors"
	"fmt"
	"sync/atomic"

	"github.com/stoker-dev/stoker/pipeline/codec/index"
	"github.com/stoker-dev/stoker/pipeline/errs"
)

// DecodeViews decodes the 1- or 3-component JPEG data (hd its header) per
// the job j into out: view v as gs[v] says, its 3*OutW*OutH bytes at
// offs[v] (which C checks against len(out) again). With caches, the
// file's decoder index and coefficient-cache entry are used and extended,
// and a progressive file is decoded from its sequential transcode
// (transcode.go), made on its first decode. The decode is made once, or
// again from the file's start when what a cache held disagreed with it
// (indexFinish, and a transcode that fails to decode): a good sample is
// never failed for its caches. stop (nil: none) is the sample's abandoned
// flag, polled as the decode goes: a decode it stopped returns ErrStopped.
func (s *Scratch) DecodeViews(data []byte, hd Header, j *Job, gs []Geometry, offs []int, out []byte, caches Caches, stop *int32) error {
	if len(gs) < 1 || len(gs) > MaxViews || len(offs) != len(gs) || len(data) == 0 {
		return fmt.Errorf("%w: %d views at %d offsets of %d input bytes: want 1..%d views", errs.Unsupported, len(gs), len(offs), len(data), MaxViews)
	}
	sdata, shd, tc := s.sequential(data, &hd, j, caches.Coefs, stop)
	err := s.decodeJob(sdata, shd, j, gs, offs, out, &caches, stop, tc.on, &tc.keys)
	switch {
	case err == errTranscodeBusy:
		err = s.decodeJob(data, &hd, j, gs, offs, out, &caches, stop, false, &fileKeys{})
	case err != nil && tc.on && err != ErrStopped:
		// The file is decoded again as it is: a good sample is never
		// failed for its transcode. If that succeeds, the transcode was
		// wrong (a bug): dropped, the file decoded as it is from now on.
		if err = s.decodeJob(data, &hd, j, gs, offs, out, &caches, stop, false, &fileKeys{}); err == nil {
			caches.Coefs.tcDrop(tc.key)
		}
	}
	return err
}

func stopped(stop *int32) bool { return stop != nil && atomic.LoadInt32(stop) != 0 }

// decodeJob is DecodeViews's decode of data (hd), checked; tc says data
// is a progressive file's transcode (its headers: every MCU comes from
// its coefficient entry, under fk), fk what is known of its identities.
// The file is hashed at most once for the coefficient cache and once for
// the decoder index, and on a cache hit only once: coefProbe, then the
// index key from the entry.
func (s *Scratch) decodeJob(data []byte, hd *Header, j *Job, gs []Geometry, offs []int, out []byte, c *Caches, stop *int32, tc bool, fk *fileKeys) error {
	s.Set(j, gs, offs, len(out))
	var ix ixUse
	var cu coefUse
	if tc {
		// No index: nothing is entropy-decoded.
		if cu = s.transcodeCoefs(c.Coefs, fk); cu.ce == nil {
			return errTranscodeBusy
		}
	} else {
		s.coefProbe(data, hd, j, c.Coefs, fk)
		ix = s.indexFor(data, hd, j, c.Index, fk)
		cu = s.coefsFor(data, hd, &ix, j, c, fk)
	}
	rc := s.Decode(data, out, ix.blob, stop)
	// A transcode's decode stores nothing: its entry stays whatever the
	// decode did (a transcode that decodes wrong is dropped by the caller).
	cu.checkin(s, rc == OK || tc)
	if ix.on {
		rc = s.indexFinish(rc, data, out, ix, stop)
	}
	if rc != OK && stopped(stop) {
		return ErrStopped
	}
	return s.Err(rc)
}

// ixUse is one decode's use of the decoder index: the file's key (keyed:
// computed), the blob it is given (nil: none yet) and the index file it
// came from, and the Index (nil: none, or a test's forced blob).
type ixUse struct {
	on     bool
	key    index.Key
	keyed  bool
	blob   []byte
	origin uint32
	ix     *index.Index
}

// indexFor is the decode's use of the decoder index: for baseline JPEGs
// decoded by huff.c, when there is an Index (or the knobs force one). The
// file's key is fk's where known (a coefficient-cache hit's), computed
// otherwise.
func (s *Scratch) indexFor(data []byte, hd *Header, j *Job, ix *index.Index, fk *fileKeys) ixUse {
	var u ixUse
	switch {
	case hd.Progressive || j.Knobs.LibHuff:
	case j.Knobs.ForceIndex != nil:
		u.on, u.blob = true, j.Knobs.ForceIndex
	case ix != nil:
		u.on, u.ix = true, ix
		if !fk.xxOK {
			fk.xx, fk.xxOK = index.KeyOf(data), true
		}
		u.key, u.keyed = fk.xx, true
		u.blob, u.origin = u.ix.Lookup(u.key)
	}
	s.SetIndex(u.on)
	return u
}

// indexFinish keeps what a decode made with a decoder index learnt (rc;
// u.blob is the Index's entry for u.key, from index file u.origin, or a
// test's ForceIndex when u.ix is nil, and nothing is kept then). The
// decode's output is right whatever the entry said: it started only at
// checkpoints confirmed here (huff.h, stoker_hix). An entry refused by its
// header (IxStale) or its checks (IxBad), or with a checkpoint that
// disagreed with the decoder, is dropped, with the index file it came
// from, if any. After IndexBad (a confirmed checkpoint disagreed: a hash
// collision or a bug) the decode stopped; it is done again from the
// file's start with a fresh index, as is a decode that started at a
// checkpoint and found the data corrupt (if that one succeeds, the entry
// was wrong): a good sample is never failed for its index. A successful
// decode's index is stored if it changed, still tagged with its index file
// while it holds checkpoints not confirmed.
func (s *Scratch) indexFinish(rc Code, data, out []byte, u ixUse, stop *int32) Code {
	j := s.Stats()
	ix, key, origin := u.ix, u.key, u.origin
	mine := ix != nil
	why := ""
	switch {
	case j.IxState == IxStale:
		why = index.RejectStale
	case j.IxState == IxBad:
		why = index.RejectChecks
	case rc == OK && j.IxLied:
		why = index.RejectDecoder
	case rc == IndexBad:
		why = index.RejectDecoder
		rc = s.Decode(data, out, nil, stop)
	case rc == Corrupt && j.CkSeeks > 0:
		if rc = s.Decode(data, out, nil, stop); rc == OK {
			why = index.RejectDecoder
		}
	}
	if mine && why != "" {
		ix.Reject(key, origin, why)
	}
	if rc != OK || !mine {
		return rc
	}
	j = s.Stats() // the last decode's: a retry's, if there was one
	// (After a disagreement the index holds the file's other claims: not
	// kept, the entry was dropped.)
	if j.IxChanged && !j.IxLied {
		nb := make([]byte, j.IxBytes)
		unsure := s.IndexCopy(nb)
		if unsure == 0 || j.IxState != IxUsed {
			origin = 0
		}
		ix.Store(key, nb, origin)
	}
	ix.CountMCUs(j.MCUs, j.Decoded)
	return rc
}

// coefUse is one decode's use of the coefficient cache: the file's entry,
// checked out, and the bytes it may add.
type coefUse struct {
	cc   *CoefCache
	ce   *coefEntry
	key  coefKey
	room int64
}

// coefProbe fills in fk, for a decode that may use the coefficient cache
// cc, what the cache knows: the file's hint, and where an entry may hold
// the file, its MAC (CoefCache.id) and, from a matching entry, its
// decoder-index key, which then need not be hashed.
func (s *Scratch) coefProbe(data []byte, hd *Header, j *Job, cc *CoefCache, fk *fileKeys) {
	if cc == nil || hd.Progressive || j.Knobs.LibHuff {
		return
	}
	if !fk.hintOK {
		fk.hint, fk.hintOK = coefHint(data), true
	}
	if !fk.cidOK {
		if !cc.mayHold(fk.hint) {
			return
		}
		fk.cid, fk.check = cc.id(data, &s.tag)
		fk.cidOK = true
	}
	if !fk.xxOK {
		fk.xx, fk.xxOK = cc.indexKeyOf(fk.cid, fk.check)
	}
}

// coefsFor checks the file's coefficient-cache entry out for the decode,
// for baseline JPEGs decoded by huff.c, when there is a cache. A decode
// that fails leaves nothing in it (the entry is dropped), and the retry
// without the index goes without it.
func (s *Scratch) coefsFor(data []byte, hd *Header, u *ixUse, j *Job, c *Caches, fk *fileKeys) coefUse {
	s.SetCoefs(nil, 0, false)
	cc := c.Coefs
	if cc == nil || hd.Progressive || j.Knobs.LibHuff {
		return coefUse{}
	}
	// The most a decode can add: every block of the file (4:4:4 at the
	// file's size in whole MCUs, or 4:2:0's larger rounding) at its
	// largest, 200 bytes, and one block's slack.
	blocks := int64((hd.W+15)/16*2) * int64((hd.H+15)/16*2) * int64(hd.Comps)
	// A file is admitted on its second decode where there is an index
	// (it has one then): the first epoch stores nothing, so it runs as
	// fast as without the cache. A sample with copies to come (repeated
	// augmentation: AdmitNow) is admitted on its first: the copies are its
	// next decodes, within the epoch.
	admit := u.ix == nil || u.blob != nil || c.AdmitNow
	// The MAC is paid only by a decode that may use an entry: one
	// admitted, or one of a file the cache may hold (coefProbe computed
	// it then).
	if !fk.cidOK {
		if !admit {
			return coefUse{}
		}
		fk.cid, fk.check = cc.id(data, &s.tag)
		fk.cidOK = true
	}
	ce, room := cc.checkout(fk, blocks*200+4096, admit)
	if ce == nil {
		return coefUse{}
	}
	s.SetCoefs(ce.p, room, false)
	return coefUse{cc: cc, ce: ce, key: fk.cid, room: room}
}

// transcodeCoefs checks the coefficient entry of a progressive file's
// transcode out of cc (fk: the file's identities), which holds every MCU;
// none when another Scratch has it, or it is gone (the transcode is then
// forgotten, to be made again).
func (s *Scratch) transcodeCoefs(cc *CoefCache, fk *fileKeys) coefUse {
	s.SetCoefs(nil, 0, true)
	ce, _ := cc.checkout(fk, 0, false)
	if ce == nil {
		if !cc.present(fk) {
			cc.tcForget(fk.cid)
		}
		return coefUse{}
	}
	s.SetCoefs(ce.p, 0, true)
	return coefUse{cc: cc, ce: ce, key: fk.cid}
}

// checkin gives the entry back, with what the decode stored when it
// succeeded (ok), and counts what it did.
func (c coefUse) checkin(s *Scratch, ok bool) {
	if c.ce == nil {
		return
	}
	c.cc.checkin(c.key, c.ce, c.room, ok)
	st := s.Stats()
	s.SetCoefs(nil, 0, false)
	c.cc.mcusWanted.Add(st.MCUsWanted)
	c.cc.mcusHit.Add(st.CoefsHits)
	c.cc.mcusStored.Add(st.CoefsStored)
}

// tcUse is one decode's use of a progressive file's transcode: the
// file's key in the cache, and the identities its coefficient entry is
// under (the file's: transcode.go).
type tcUse struct {
	on   bool // data and hd are the transcode's headers
	key  coefKey
	keys fileKeys
}

// errTranscodeBusy says a transcode's coefficient entry is in use by
// another Scratch, or gone: the file is decoded as progressive this time.
var errTranscodeBusy = errors.New("the transcode's coefficients are in use or gone")

// sequential returns what to decode a JPEG from: for a progressive file
// with a coefficient cache cc, its sequential transcode's headers (made
// now if it has none: transcode.go), and the header to go with them;
// otherwise data and hd.
func (s *Scratch) sequential(data []byte, hd *Header, j *Job, cc *CoefCache, stop *int32) ([]byte, *Header, tcUse) {
	if cc == nil || !hd.Progressive || j.Knobs.LibHuff {
		return data, hd, tcUse{}
	}
	key, check := cc.id(data, &s.tag)
	seq, keys, try := cc.tcLookup(key, check)
	if try {
		seq, keys = transcode(cc, key, check, data, hd, j, stop)
	}
	if seq == nil {
		return data, hd, tcUse{}
	}
	h := *hd
	h.Progressive = false
	return seq, &h, tcUse{on: true, key: key, keys: keys}
}

// transcode stores data's sequential transcode in cc: every MCU in a
// coefficient entry under the file's key, and the headers (stubOf); it
// returns the headers and the entry's identities, or nil when the
// transcode failed or was refused, the budget's room included
// (remembered: the file is decoded as progressive from now on), or the
// budget has no room for even half the file (not remembered: tried again
// next time). libjpeg is bounded by the job's MaxScans and MaxMemory.
func transcode(cc *CoefCache, key coefKey, check uint64, data []byte, hd *Header, j *Job, stop *int32) ([]byte, fileKeys) {
	room := cc.tcRoom(key)
	// Its bound: four times the file, 8 bytes a block (the entry's table
	// is 8 bytes an MCU) and 64 KiB. Photos take 2 to 3 times.
	blocks := int64((hd.W+15)/16*2) * int64((hd.H+15)/16*2) * int64(hd.Comps)
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
	p := coefsNew()
	if p == nil {
		return nil, fileKeys{}
	}
	rc, _, _ := transcodeToCoefs(data, j.MaxScans, j.MaxMemory, stop, p, bound-coefOverhead)
	switch {
	case rc == tcStopped:
		coefsFree(p)
		return nil, fileKeys{}
	case rc != tcOK:
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
	if !cc.adopt(&keys, p, coefsMCUs(p), bound) && !cc.present(&keys) {
		// (Present: another Scratch transcoded the file meanwhile.)
		cc.tcDrop(key)
		return nil, fileKeys{}
	}
	return stub, keys
}
