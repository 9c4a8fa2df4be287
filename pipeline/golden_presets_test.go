//go:build cgo

package pipeline

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"testing"

	"github.com/stoker-dev/stoker/pipeline/dataset"
	"github.com/stoker-dev/stoker/pipeline/det"
	"github.com/stoker-dev/stoker/pipeline/transform"
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
// them from goldenPresetsFast's wherever a crop had been DCT-scaled, and
// OutputVersion 5 those of the presets with a bilinear geometry
// (imagenet-*, simclr*, tv-resnet50-v2), whose filter became torch's.
// OutputVersion 7 changed deit's and tv-resnet50-v2's (their policies'
// rotate and affine: the grid summed in MKL's order), in both modes.
// segref's pair came with the preset (a new geometry: no bytes changed).
// OutputVersion 8 changed detr's second seed (its RandomIoUCrop p=0.8).
// detr's, ssdlite's, lsj's and frcnn's cover their targets too (made from
// boxedDataset's boxes); frcnn's samples are each its own size, in slots
// padded to its bound (1333x1333), its size after it.
var goldenPresets = map[string][2]string{
	"clip":           {"fe4b1beab4dcd14c057f348e325f49b02b8143e8a0ce5da979418adf81f119db", "ed96c86c3e7dac049be9c473b8b5cc728dba8450ae96020239048f4a559be3b2"},
	"detr":           {"cdab82c14300f5ef357b68f8fea9e350579e1f00437476c3bdcde792fe072b56", "c83e7c75785b54c334f54d64a5204018002b4986ded13089030781a166266f93"},
	"deit":           {"07e600edca9c76f7b534e1b1a5cb11d00fd6aedcd4f6fdf0cd0bb6cb7a294b94", "8e553103da58fd13330707bf4ce40f2ff756b816718254f630d10bca820495fc"},
	"dino":           {"3c50df635bcee51a4cf66b3914e89e98cdaa601977a27fa261c40b9d6526448d", "524211245d11565672e735f328567e55b55534696fe904b1f0e9f8039179b199"},
	"dino-global":    {"bf48f6640e43f7e27da0215fe8de354b1f499fbcd43c649f2298178ac43e4401", "65813f1d58c52c6318826f7fab347fbcb693c06244fc5e4644b7d051df772594"},
	"dino-local":     {"ca5f119003a105d1f3998ed2bb681d3b873b1d3521e6f08f4504274e69cdfc6b", "ab802f72d810a7c83f67ae563538d738507be9d2b1af56ad49430e81b039efd7"},
	"dinov2":         {"d157b044407058332fef65eb90b15759775eeb4fdaa63094869408de01e5efca", "83d11eb4f9c3c4f484aec5639dd939dda99bedf1cbd782ca6efc426ea4d6cbca"},
	"frcnn":          {"de5fea72424ea9fe608572d7feca177fae62fc5c5e60c1329c5b3db0740d8899", "4795da2790364cb1659c579e45d4517defad4a85915281772334de39b582ce84"},
	"imagenet-eval":  {"db219745dedc9beaf600ce7665331c995ffc7427a4b3541cac7919cfea1e2bae", "db219745dedc9beaf600ce7665331c995ffc7427a4b3541cac7919cfea1e2bae"},
	"imagenet-train": {"baa70f7c79b8fdd9171f2052b5b242e410aa47a147d672463862943a48b71d55", "ff8b47e0f576dd3438ed06f5827fde35dd26c73f6b2ed4a8f9c126cbf5f77379"},
	"lsj":            {"b9ad9a9cb9db3fbf4301bd29ee3810fe598ee9e87bc198051e51db03b40fa144", "4c98133f30128aaf478639a9a1398be6f3fd310458f0b7b11c575ce091940dd1"},
	"segref":         {"88893a9aa1da52880d0347728b185b09d61710bed6da61d95a3ba4f96c4b9735", "b69812738b65e20a56e55bc243457f6b76a364018b095b08064942023ea74d6b"},
	"simclr":         {"bc9b6fdd591500eec00681e0a781bacfdacc913b7c719848f166dfccddbf05e5", "6b0c075314f164928e2d859aac5ae61b39d7fdd565f4e69d79b4e17c1af3c283"},
	"simclr-view":    {"70cce4b1741c0f59df5a2b68e40bb121f206704a37c079255b2b67a1a89fe7f2", "fe5de1dc02a6834b2ad8f651021dbf53447445cea824d429b662a8a850b328f3"},
	"ssdlite":        {"f1ca29f6513809c989a0140164cf96042da549536bbcb25f3457ead5ccc6819f", "8d18ccfd1c69967d173582503df48505da7701538c94ec7d8b38eececa3cfe82"},
	"tv-resnet50-v2": {"199ca782aabd971141cadfea2b59456173246111dcd6cf68e3e24dae4f6074ad", "de8bade1d7ee3ab7265b931a7af49f83b88c4f9abd44bea86bdafb5f736b34c8"},
	"yolo":           {"03c5a612766a6b16267c259a2d35835a01f9cc187975f504f64574257c3b7613", "0415a466464e34f8bd6832edc839a37cfc9f02c4fef5c5e98efac5fd04661f1d"},
	"yolo-letterbox": {"79ff6cbd75f948438ee23d605e6583463b7483a555b9766a1c07c3cbb8fab880", "5a16f0dbe31b96e452bb756c435a85c8afeba7f09eaf6cfdb8b02f2f3a119684"},
}

// goldenPresetsFast are the same batches made with DecodeFast (a DCT scale
// where the crop is at least twice the output): the bytes every preset
// made by default before OutputVersion 4 (the bilinear ones changed with
// OutputVersion 5, as goldenPresets'). Where a preset's pair equals
// goldenPresets' (simclr's first seed, say) no crop of those samples was
// large enough to scale.
var goldenPresetsFast = map[string][2]string{
	"clip":           {"127ef4487ae3e941e2d45cf76490e39253a474b4a8478e42655012fad1b785e3", "e666dd6c24d1e99d0fdc309aa87b599f9d07b15ab60de07a272c602f568c83fa"},
	"detr":           {"cdab82c14300f5ef357b68f8fea9e350579e1f00437476c3bdcde792fe072b56", "c83e7c75785b54c334f54d64a5204018002b4986ded13089030781a166266f93"},
	"deit":           {"4d2f2e771befcac32b098085cbecd96ab0dacd5c9c37189a8cbdf798cfa53db6", "45bf0b1ac0342d87a8299f5d4c8e2f16ac011a41b27ab93ecdd8089d0869ead5"},
	"dino":           {"deb8d29e35e06140a86903e859eefd827fe73d95a59e947851ee7fd2d69daa6e", "3442d5c041304a7e597ce1f898ba332bbafe6cf98286393ee0ed58db35af2fef"},
	"dino-global":    {"4d6c08aaa546d18cc6ba6f33e861bf8b9c4e45f085574fb90b41a31e7dcc7bdb", "1a7ec67b4b77ee1dcdf156f4c7f674d851034e60288efca1c88bc90d1ba554ad"},
	"dino-local":     {"a0fca7faa7123249ffcecaae7c183244957ff383bf17ff84096db7c378453564", "1d658b660a40a38e5d06e568ff157713d8567dfbd016ee2791db4f5ad2e80dca"},
	"dinov2":         {"df84b1834c4189393d1a7db0c7d052e41f5647497481bdecf878f06942f20950", "04ea14024940c289429a8309989df59b518111303a3cef1d0c6c48f58314eea3"},
	"frcnn":          {"de5fea72424ea9fe608572d7feca177fae62fc5c5e60c1329c5b3db0740d8899", "b283b8292e84381d1a390da634e2f1958a37999504a87a7247c6d6386a0ace2e"},
	"imagenet-eval":  {"2b67e2d594a4679c45cadee4dfd5bdb76bd9ddb0401ec2009961beb930787f92", "2b67e2d594a4679c45cadee4dfd5bdb76bd9ddb0401ec2009961beb930787f92"},
	"imagenet-train": {"bf1c283ea96f3b2573c547e6cfb8a55fa8a95f89053fcd8d67dbe0b463759fab", "66e6c08a16dc2d0568d7705b86b7f5452ec65ab4bc42dd7fe92b543b24536dde"},
	"lsj":            {"b9ad9a9cb9db3fbf4301bd29ee3810fe598ee9e87bc198051e51db03b40fa144", "4e7e4981b5ca5e923e6e244d32b8a692074f1efc501773d17ca54d91e36bcf4b"},
	"segref":         {"88893a9aa1da52880d0347728b185b09d61710bed6da61d95a3ba4f96c4b9735", "de8546a971e1e30c215a3d381784d22e48f4081db2ee235ffb68e4e095b9ea62"},
	"simclr":         {"bc9b6fdd591500eec00681e0a781bacfdacc913b7c719848f166dfccddbf05e5", "c970510d961f16884aa691ed8a9c1c451fb17e624def34c9b8cb75e44c63e3ee"},
	"simclr-view":    {"ed384ad7639e6017c5891fea4e9c4c39aa0f426043ce1f7009e4d2ccf02bc5b8", "5c5a3189cd87c719b3b783efefb22bd28b867fb2149d22c7007440cae4942e6e"},
	"ssdlite":        {"f1ca29f6513809c989a0140164cf96042da549536bbcb25f3457ead5ccc6819f", "8d18ccfd1c69967d173582503df48505da7701538c94ec7d8b38eececa3cfe82"},
	"tv-resnet50-v2": {"0313ce0e95d26b5f11c329ff908ae9d14a064e6c18a4fe98b321ff5fcf6c1894", "b9c5e89168d3f0d40262bd8c2258d49d502bf01fc3c806d1f128273b09d56726"},
	"yolo":           {"03c5a612766a6b16267c259a2d35835a01f9cc187975f504f64574257c3b7613", "0415a466464e34f8bd6832edc839a37cfc9f02c4fef5c5e98efac5fd04661f1d"},
	"yolo-letterbox": {"79ff6cbd75f948438ee23d605e6583463b7483a555b9766a1c07c3cbb8fab880", "5a16f0dbe31b96e452bb756c435a85c8afeba7f09eaf6cfdb8b02f2f3a119684"},
}

// TestGoldenPresets checks every preset's batches against goldenPresets,
// with the resampler's SIMD on and off (the kernels' C and Go twins, which
// the CPU chooses between, are compared byte for byte by their own tests:
// TestExactColourKernelsCgoSameBytes and the geometric kernels'). imagenet-train's
// first hash is TestGoldenBatchFast's: the ops after the geometry changed
// nothing of it.
func TestGoldenPresets(t *testing.T) {
	for _, mode := range []transform.DecodeMode{transform.DecodeExact, transform.DecodeFast} {
		golden := map[transform.DecodeMode]map[string][2]string{transform.DecodeExact: goldenPresets, transform.DecodeFast: goldenPresetsFast}[mode]
		t.Run(mode.String(), func(t *testing.T) { testGoldenPresets(t, mode, golden) })
	}
}

func testGoldenPresets(t *testing.T, mode transform.DecodeMode, golden map[string][2]string) {
	files := memDataset{goldenJPEGs()}
	for _, name := range transform.PresetNames() {
		tr, err := transform.ParseTransform(name, transform.CHW)
		if err != nil {
			t.Fatal(err)
		}
		tr = tr.WithDecode(mode)
		// A preset that needs targets (detr) makes them, from boxes on
		// the images (boxedDataset), and its hash covers them too.
		var ds dataset.Dataset = files
		var fs *dataset.FieldSet
		if transform.NeedsTargets(tr) != "" {
			ds = boxedDataset{files}
			if fs, err = dataset.NewFieldSet(ds, []string{transform.FieldTargets}, 1<<20, "golden"); err != nil {
				t.Fatal(err)
			}
		}
		var got [2]string
		for i, seed := range []uint64{7, 8} {
			e := NewExecutor(2)
			var b Batch
			if fs != nil {
				b.FieldSet = fs
			}
			if err := e.Fill(context.Background(), ds, tr, seed, 3, goldenIndices, PadFromBatch, &b); err != nil {
				t.Fatal(err)
			}
			e.Close()
			if len(b.Errors) > 0 || b.N != len(goldenIndices) {
				t.Fatalf("%s: batch of %d samples, errors %v", name, b.N, b.Errors)
			}
			h := sha256.New()
			h.Write(b.Data)
			for _, f := range b.Fields {
				h.Write(f.Data)
			}
			got[i] = hex.EncodeToString(h.Sum(nil))
			h.Reset()
			h.Write(b.Data) // the pixels alone, for the comparison below
			// Sample by sample, every SIMD off: the same bytes.
			d := NewDecoder()
			knobsOf(d).SIMDMax = -1
			// A sample's views are back to back, a batch's view after
			// view (ViewLayout).
			l, n := tr.ViewLayout(), len(goldenIndices)
			batch := make([]byte, n*tr.SampleBytes())
			out := make([]byte, tr.SampleBytes())
			for i, idx := range goldenIndices {
				s := Sample{Data: files.files[idx], Index: int(idx)}
				if fs != nil {
					s.Targets = ds.(transform.Targeted)
				}
				k := det.Key{Seed: seed, Epoch: 3, Index: uint64(idx)}
				if p := tr.PartnersOf(k, len(files.files)); p != nil { // a Mosaic's (yolo)
					s.Partners = p
					for _, j := range p {
						s.PartnerFiles = append(s.PartnerFiles, files.files[j])
					}
				}
				if err := d.DecodeSample(s, tr, k, out); err != nil {
					t.Fatal(err)
				}
				l.CopySample(batch, n, i, out, 1, 0)
			}
			d.Close()
			if scalar, simd := hex.EncodeToString(sha256Of(batch)), hex.EncodeToString(h.Sum(nil)); scalar != simd {
				t.Errorf("%s seed %d: without SIMD the batch is %s, with it %s", name, seed, scalar, simd)
			}
		}
		if want, ok := golden[name]; !ok || got != want {
			t.Errorf("%s (decode %s): SHA-256s %q, want %q (paste them into goldenPresets or goldenPresetsFast if the change is meant, and raise OutputVersion)", name, mode, got, want)
		}
	}
}

// boxedDataset is memDataset's images with boxes: three per image, at
// fixed fractions of its size (one thin, one across the middle, one in a
// corner), labels 0 to 2, the last a crowd.
type boxedDataset struct{ memDataset }

func (d boxedDataset) SourceTargets(i, w, h int, t *transform.Instances) error {
	fw, fh := float32(w), float32(h)
	t.ImageID = int64(i)
	t.Add([4]float32{fw * 0.1, fh * 0.2, fw * 0.15, fh * 0.9}, 0, false)
	t.Add([4]float32{fw * 0.3, fh * 0.25, fw * 0.8, fh * 0.7}, 1, false)
	t.Add([4]float32{fw * 0.7, fh * 0.75, fw, fh}, 2, true)
	return nil
}

func sha256Of(b []byte) []byte {
	sum := sha256.Sum256(b)
	return sum[:]
}
