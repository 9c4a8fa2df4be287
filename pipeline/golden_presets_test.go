//go:build cgo

package pipeline

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"testing"
)

// goldenPresets pins, per preset and for two seeds (a pair, so that a
// change that happens to leave one seed's bytes alone is still seen), the
// SHA-256 of the fast path's batch of goldenIndices, epoch 3, CHW: a
// refactor of an op, a kernel's SIMD dispatch, or a change of a draw
// cannot drift silently. Like golden_cgo_test.go's, these are the same on
// every architecture (integer kernels, and float ones without fused
// multiply-adds); a change means the bytes trainers get changed, which
// needs raising OutputVersion (identity.go) and pasting the new values
// here (the failure prints them). These are the default's bytes,
// DecodeExact (every JPEG decoded at full scale): OutputVersion 4 changed
// them from goldenPresetsFast's wherever a crop had been DCT-scaled.
var goldenPresets = map[string][2]string{
	"clip":           {"fe4b1beab4dcd14c057f348e325f49b02b8143e8a0ce5da979418adf81f119db", "ed96c86c3e7dac049be9c473b8b5cc728dba8450ae96020239048f4a559be3b2"},
	"deit":           {"37e9c876215412d6901b6530e470f1d18c13f81ee36038c094368cba43fc2a2b", "2210e0a70523dd3d8f522313c75dcf62321760aa26678682eecd94a1428831db"},
	"dino":           {"3c50df635bcee51a4cf66b3914e89e98cdaa601977a27fa261c40b9d6526448d", "524211245d11565672e735f328567e55b55534696fe904b1f0e9f8039179b199"},
	"dino-global":    {"bf48f6640e43f7e27da0215fe8de354b1f499fbcd43c649f2298178ac43e4401", "65813f1d58c52c6318826f7fab347fbcb693c06244fc5e4644b7d051df772594"},
	"dino-local":     {"ca5f119003a105d1f3998ed2bb681d3b873b1d3521e6f08f4504274e69cdfc6b", "ab802f72d810a7c83f67ae563538d738507be9d2b1af56ad49430e81b039efd7"},
	"dinov2":         {"d157b044407058332fef65eb90b15759775eeb4fdaa63094869408de01e5efca", "83d11eb4f9c3c4f484aec5639dd939dda99bedf1cbd782ca6efc426ea4d6cbca"},
	"imagenet-eval":  {"4dcc3895099378421f0e30c42404e03b29150046756a8779a4ef7d68c64bca4b", "4dcc3895099378421f0e30c42404e03b29150046756a8779a4ef7d68c64bca4b"},
	"imagenet-train": {"431426c9b55bb5b59d87231e61c72ae1af90cdb58367e613e994252514fab269", "5a0b3cbbda0fcd93f0a54a519a0b9e9b0941c5e7fedc2052572cebe7ae2dd5bc"},
	"simclr":         {"cee4a6285c21d6c80dbc172cafbf83d9d3f861e41dbfa73ea91304207b2226d5", "253612ccd462b909b6b8b35a8821e1ee4d961dccea8472254ea291ce3de95cc8"},
	"simclr-view":    {"622c7cd405d185469bebb10a8c5c16b248a5b295296a10fcd504f092d1c5a5b7", "e800dc3aff8e3522dc75c6fd0ac851b346a254a0e803cffe3d79cc67349103db"},
	"tv-resnet50-v2": {"da144160eabdd2ac26e07bc8c0e139e25910bca0a77c2fc919c87821c32015ae", "da6ccc04cd07bc0ede2be95237d5224ec6fa238dfa29964bc10009de3ed96507"},
}

// goldenPresetsFast are the same batches made with DecodeFast (a DCT scale
// where the crop is at least twice the output): the bytes every preset
// made by default before OutputVersion 4, unchanged. Where a preset's pair
// equals goldenPresets' (simclr's first seed, say) no crop of those
// samples was large enough to scale.
var goldenPresetsFast = map[string][2]string{
	"clip":           {"127ef4487ae3e941e2d45cf76490e39253a474b4a8478e42655012fad1b785e3", "e666dd6c24d1e99d0fdc309aa87b599f9d07b15ab60de07a272c602f568c83fa"},
	"deit":           {"0a527fbd7c42f59aecce5acdad3033e703022e33bba64d4e42796875daed77c7", "c21ae7aba028c86a44be2c1af0a0bd15f93cb34253d9477d5597ee6c6d6d86f2"},
	"dino":           {"deb8d29e35e06140a86903e859eefd827fe73d95a59e947851ee7fd2d69daa6e", "3442d5c041304a7e597ce1f898ba332bbafe6cf98286393ee0ed58db35af2fef"},
	"dino-global":    {"4d6c08aaa546d18cc6ba6f33e861bf8b9c4e45f085574fb90b41a31e7dcc7bdb", "1a7ec67b4b77ee1dcdf156f4c7f674d851034e60288efca1c88bc90d1ba554ad"},
	"dino-local":     {"a0fca7faa7123249ffcecaae7c183244957ff383bf17ff84096db7c378453564", "1d658b660a40a38e5d06e568ff157713d8567dfbd016ee2791db4f5ad2e80dca"},
	"dinov2":         {"df84b1834c4189393d1a7db0c7d052e41f5647497481bdecf878f06942f20950", "04ea14024940c289429a8309989df59b518111303a3cef1d0c6c48f58314eea3"},
	"imagenet-eval":  {"c5ea7ddfc82ebedb40a80587784f537a0a9a5af2b54f5a819c281b428bc81035", "c5ea7ddfc82ebedb40a80587784f537a0a9a5af2b54f5a819c281b428bc81035"},
	"imagenet-train": {"e2a656de964d744a921ec02a85e8bcf66f37b831d2242c45b5e33862013a620f", "7415a3916b68063593004ad5d0160c44bc4a2587e329e4157b75318fd6333f91"},
	"simclr":         {"cee4a6285c21d6c80dbc172cafbf83d9d3f861e41dbfa73ea91304207b2226d5", "f9f8371cacd7f105cf94d13f60a30b16548b40b7ff3ff7e472a85ec013868f22"},
	"simclr-view":    {"a340a8fb9ac8fbbe56b88d028d872ff3d79e2be92043f0c5740351901b683ace", "16534a03a000d3e5f134fe28f6f9a2c5f794f265c270dc0b1a165343a23403ce"},
	"tv-resnet50-v2": {"42f9d7673b6939b341176c37477d1f12a3e3757725c3bbbdca81ed67668c240c", "ffb377fc4740926a2f0a94e8514495c3fe530d94feebfdae8ed8c5b97f080b9e"},
}

// TestGoldenPresets checks every preset's batches against goldenPresets,
// with the resampler's SIMD on and off (the kernels' C and Go twins, which
// the CPU chooses between, are compared byte for byte by their own tests:
// TestColourKernelsCgoSameBytes and the geometric kernels'). imagenet-train's
// first hash is TestGoldenBatchFast's: the ops after the geometry changed
// nothing of it.
func TestGoldenPresets(t *testing.T) {
	for _, mode := range []DecodeMode{DecodeExact, DecodeFast} {
		golden := map[DecodeMode]map[string][2]string{DecodeExact: goldenPresets, DecodeFast: goldenPresetsFast}[mode]
		t.Run(mode.String(), func(t *testing.T) { testGoldenPresets(t, mode, golden) })
	}
}

func testGoldenPresets(t *testing.T, mode DecodeMode, golden map[string][2]string) {
	files := memDataset{goldenJPEGs()}
	for _, name := range PresetNames() {
		tr, err := ParseTransform(name, CHW)
		if err != nil {
			t.Fatal(err)
		}
		tr = tr.WithDecode(mode)
		var got [2]string
		for i, seed := range []uint64{7, 8} {
			e := NewExecutor(2)
			var b Batch
			if err := e.Fill(context.Background(), files, tr, seed, 3, goldenIndices, PadFromBatch, &b); err != nil {
				t.Fatal(err)
			}
			e.Close()
			if len(b.Errors) > 0 || b.N != len(goldenIndices) {
				t.Fatalf("%s: batch of %d samples, errors %v", name, b.N, b.Errors)
			}
			sum := sha256.Sum256(b.Data)
			got[i] = hex.EncodeToString(sum[:])
			// Sample by sample, every SIMD off: the same bytes.
			d := NewDecoder()
			knobsOf(d).simdMax = -1
			// A sample's views are back to back, a batch's view after
			// view (ViewLayout).
			l, n := tr.ViewLayout(), len(goldenIndices)
			batch := make([]byte, n*tr.SampleBytes())
			out := make([]byte, tr.SampleBytes())
			for i, idx := range goldenIndices {
				if err := d.Decode(files.files[idx], tr, Key{Seed: seed, Epoch: 3, Index: uint64(idx)}, out); err != nil {
					t.Fatal(err)
				}
				l.CopySample(batch, n, i, out, 1, 0)
			}
			d.Close()
			if scalar := hex.EncodeToString(sha256Of(batch)); scalar != got[i] {
				t.Errorf("%s seed %d: without SIMD the batch is %s, with it %s", name, seed, scalar, got[i])
			}
		}
		if want, ok := golden[name]; !ok || got != want {
			t.Errorf("%s (decode %s): SHA-256s %q, want %q (paste them into goldenPresets or goldenPresetsFast if the change is meant, and raise OutputVersion)", name, mode, got, want)
		}
	}
}

func sha256Of(b []byte) []byte {
	sum := sha256.Sum256(b)
	return sum[:]
}
