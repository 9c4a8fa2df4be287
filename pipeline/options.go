package pipeline

// The Decoder's options for the caches an Executor shares among its
// decoders (partners, decoder index, coefficients), and the name the
// decoder index's file is saved under.

import (
	"crypto/sha256"
	"encoding/hex"
	"slices"

	"github.com/stoker-dev/stoker/pipeline/codec"
	"github.com/stoker-dev/stoker/pipeline/codec/index"
	"github.com/stoker-dev/stoker/pipeline/dataset"
	"github.com/stoker-dev/stoker/pipeline/kernels/cv"
)

// WithPartnerCache has a Decoder (an Executor's decoders) keep the
// images a multi-image op load_image's in c and take them from it.
// Default: none (every image of every sample decoded).
func WithPartnerCache(c *cv.PartnerCache) Option { return func(o *options) { o.partners = c } }

// WithIndex has a Decoder (an Executor's decoders) use and extend ix.
// Default: none (every decode is a first decode).
func WithIndex(ix *index.Index) Option { return func(o *options) { o.index = ix } }

// WithCoefCache has a Decoder (an Executor's decoders) use and fill c.
// Default: none.
func WithCoefCache(c *codec.CoefCache) Option { return func(o *options) { o.coefs = c } }

// IndexFingerprint is what an index file of the given datasets is tagged
// with (Save, Load) and named by (IndexPath): a hash of their fingerprints,
// in any order. A server with the same data, under any names, finds the
// same file.
func IndexFingerprint(datasets ...dataset.Dataset) string {
	fps := make([]string, len(datasets))
	for i, ds := range datasets {
		fps[i] = ds.Fingerprint()
	}
	slices.Sort(fps)
	h := sha256.New()
	for _, fp := range fps {
		h.Write([]byte(fp))
		h.Write([]byte{0})
	}
	return hex.EncodeToString(h.Sum(nil))
}
