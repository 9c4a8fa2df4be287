//go:build cgo

package pipeline

import "sync"

// knobs holds the Decoders' test-only knobs (fastKnobs), for testKnobs:
// production Decoders hold none. A Decoder given knobs is kept for the
// test binary's life.
var knobs struct {
	sync.Mutex
	of map[*Decoder]*fastKnobs
}

func init() {
	testKnobs = func(d *Decoder) *fastKnobs {
		knobs.Lock()
		defer knobs.Unlock()
		return knobs.of[d]
	}
}

// knobsOf is d's test-only knobs, made on first use. Set them before d
// decodes, or while no decode of d runs.
func knobsOf(d *Decoder) *fastKnobs {
	knobs.Lock()
	defer knobs.Unlock()
	if knobs.of == nil {
		knobs.of = make(map[*Decoder]*fastKnobs)
	}
	k := knobs.of[d]
	if k == nil {
		k = &fastKnobs{}
		knobs.of[d] = k
	}
	return k
}
