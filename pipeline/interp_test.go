package pipeline

import (
	"bytes"
	"crypto/sha256"
	"encoding/hex"
	"image/png"
	"testing"

	"github.com/stoker-dev/stoker/pipeline/det"
	opspkg "github.com/stoker-dev/stoker/pipeline/ops"
	"github.com/stoker-dev/stoker/pipeline/transform"
)

// interpGoldenPNG is goldenPicture(131, 97, 3) as a PNG: lossless, so
// that the reference path's pixels are torchvision's decode_png's.
func interpGoldenPNG(t *testing.T) []byte {
	t.Helper()
	var b bytes.Buffer
	if err := png.Encode(&b, goldenPicture(131, 97, 3)); err != nil {
		t.Fatal(err)
	}
	return b.Bytes()
}

// TestGoldenInterpTorch pins the samples of a PNG for every filter to
// torchvision's own: each hash is of torchvision.transforms.v2.functional's
// output (uint8 CHW, torchvision 0.29.2, torch 2.15.0 on an AVX-512 CPU:
// its uint8 kernels) for the same PNG and arguments, computed once and
// pasted here. So these check torch parity without Python, in both builds,
// on every architecture.
func TestGoldenInterpTorch(t *testing.T) {
	data := interpGoldenPNG(t)
	d := NewDecoder()
	defer d.Close()
	for _, tc := range interpGoldenCases {
		interp, err := transform.ParseInterpolation(tc.interp)
		if err != nil {
			t.Fatal(err)
		}
		rs := opspkg.Resampling{Interp: interp, NoAntialias: !tc.aa}
		ops := []opspkg.Op{{Kind: transform.OpResize, Size: tc.size, Args: &transform.ResizeArgs{Resampling: rs}}}
		if tc.box != [4]int{} {
			ops[0] = opspkg.Op{Kind: transform.OpRandomResizedCrop, Size: tc.size, Args: &transform.RRCArgs{Resampling: rs}}
		}
		if tc.crop != [2]int{} {
			ops = append(ops, opspkg.Op{Kind: transform.OpCenterCrop, Size: tc.crop})
		}
		tr, err := transform.NewTransform(transform.CHW, ops...)
		if err != nil {
			t.Fatal(err)
		}
		p, err := geomPlan(tr, 131, 97, det.Key{})
		if err != nil {
			t.Fatal(err)
		}
		if tc.box != [4]int{} {
			p.CY, p.CX, p.CH, p.CW = tc.box[0], tc.box[1], tc.box[2], tc.box[3]
		}
		p.Flip = tc.flip
		hd, err := parseHeader(data)
		if err != nil {
			t.Fatal(err)
		}
		out := make([]byte, tr.PixelBytes())
		if err := d.decodeGuarded(data, &hd, []transform.SamplePlan{p}, transform.CHW, out, []int{0}); err != nil {
			t.Fatal(err)
		}
		sum := sha256.Sum256(out)
		if got := hex.EncodeToString(sum[:]); got != tc.want {
			t.Errorf("%s: SHA-256 %s, want torchvision's %s", tc.name, got, tc.want)
		}
	}
}

// interpGoldenCases are TestGoldenInterpTorch's: resized_crop (box: top,
// left, height, width), resize (size) and resize then center_crop (crop),
// down (to 1/19 too, where torch's weights take more than 14 bits) and up,
// flipped (hflip after), for each filter.
var interpGoldenCases = []struct {
	name, interp string
	aa           bool
	box          [4]int
	size, crop   [2]int
	flip         bool
	want         string
}{
	{"nearest resized_crop down", "nearest", false, [4]int{7, 13, 71, 95}, [2]int{40, 56}, [2]int{}, false, "d47e4f49de89fc36b2a993c6abef958bddd8f54061728c3b3bd18b4d3efa7dff"},
	{"nearest resized_crop up at the edge", "nearest", false, [4]int{80, 110, 17, 21}, [2]int{31, 47}, [2]int{}, false, "3a7a369719d8388d34f015777a596923585e212fe996760a152ee5244c2da9ec"},
	{"nearest resized_crop flipped", "nearest", false, [4]int{0, 0, 97, 60}, [2]int{33, 29}, [2]int{}, true, "7152429f64dfec0c9bab3d3e9096ad47d016c0c3da186d2f0c934c4375d9293a"},
	{"nearest resize+center_crop", "nearest", false, [4]int{}, [2]int{60, 0}, [2]int{48, 52}, false, "2665e4e9212db9a57646aec8296fb63022e338671358fe71be6a53faa963d55d"},
	{"nearest resize up", "nearest", false, [4]int{}, [2]int{150, 171}, [2]int{}, false, "b66151299aa91564fd05d604807958fe3f1cf86c1860291cb1263a2d1eb61bdb"},
	{"bilinear-noaa resized_crop down", "bilinear", false, [4]int{7, 13, 71, 95}, [2]int{40, 56}, [2]int{}, false, "beed70a06b152096e03fac4ab2ef29cf7d0c3b7fcaf5f1c908ed0634e488b580"},
	{"bilinear-noaa resized_crop up at the edge", "bilinear", false, [4]int{80, 110, 17, 21}, [2]int{31, 47}, [2]int{}, false, "d46e76b7b1353091b953b88f0416a90c75f038f6059800d71d56b778e7498bdd"},
	{"bilinear-noaa resized_crop flipped", "bilinear", false, [4]int{0, 0, 97, 60}, [2]int{33, 29}, [2]int{}, true, "33633da0a36201d8a9aca2f38f2afa6ac7ec1129a94dfcf4ae607529a5b04687"},
	{"bilinear-noaa resize+center_crop", "bilinear", false, [4]int{}, [2]int{60, 0}, [2]int{48, 52}, false, "bf3f696c6a695d62d6d1b30285c71cefc1ed042ed243dfcc58af3d4ebd30524f"},
	{"bilinear-noaa resize up", "bilinear", false, [4]int{}, [2]int{150, 171}, [2]int{}, false, "2c8919db89b4ddc417f642d9f07bcc380e1066d8c5b983a79a3ffc5375bca3d8"},
	{"bilinear resized_crop down", "bilinear", true, [4]int{7, 13, 71, 95}, [2]int{40, 56}, [2]int{}, false, "bf17d267a23c02c177e7ab26c5d1528fa448902dd69bd7745cfbdceb5ef99972"},
	{"bilinear resized_crop up at the edge", "bilinear", true, [4]int{80, 110, 17, 21}, [2]int{31, 47}, [2]int{}, false, "d46e76b7b1353091b953b88f0416a90c75f038f6059800d71d56b778e7498bdd"},
	{"bilinear resized_crop flipped", "bilinear", true, [4]int{0, 0, 97, 60}, [2]int{33, 29}, [2]int{}, true, "f88ef9c48e4da5406ddf8fd0d2dae0fdc0bc3ef1fb3bd647724e565fe240b740"},
	{"bilinear resize+center_crop", "bilinear", true, [4]int{}, [2]int{60, 0}, [2]int{48, 52}, false, "485adc5a63e5f367b2c72e4ba2ac20502cd81b7dfb50ec6ef192f65ee6a129d2"},
	{"bilinear resize up", "bilinear", true, [4]int{}, [2]int{150, 171}, [2]int{}, false, "2c8919db89b4ddc417f642d9f07bcc380e1066d8c5b983a79a3ffc5375bca3d8"},
	{"bilinear resize down 5x", "bilinear", true, [4]int{}, [2]int{19, 26}, [2]int{}, false, "f75eef14415ae78896942cb04f0542978f8c3c4bfea14fd77217b3750b1e1a6a"},
	{"bilinear resize down 19x", "bilinear", true, [4]int{}, [2]int{5, 7}, [2]int{}, false, "84079bce124a40eb1c6d390de75adf10cb2af07a08ea43a661011dce7e827c6a"},
	{"bicubic resized_crop down", "bicubic", true, [4]int{7, 13, 71, 95}, [2]int{40, 56}, [2]int{}, false, "9753c7588115c9cda9204e0e8fbc75c091890a3f4ce94f349bc61d3e29b68292"},
	{"bicubic resized_crop up at the edge", "bicubic", true, [4]int{80, 110, 17, 21}, [2]int{31, 47}, [2]int{}, false, "04a0e02f31524603a06be6d7c5f1a8f90d6272a494088adbe0420e24949cc3f6"},
	{"bicubic resized_crop flipped", "bicubic", true, [4]int{0, 0, 97, 60}, [2]int{33, 29}, [2]int{}, true, "69b1ea116223deb1f166516b3b7a4d6bc3896e6f725d3eaf2217c49a9fab33fb"},
	{"bicubic resize+center_crop", "bicubic", true, [4]int{}, [2]int{60, 0}, [2]int{48, 52}, false, "b67f05371c50d5664e36325e9e0ee08645957938b5a8f266ff1a9b916df2e85c"},
	{"bicubic resize up", "bicubic", true, [4]int{}, [2]int{150, 171}, [2]int{}, false, "7cfd2a68c4b5584d9e0fcf193b5434ab2ffe04213aad59ecfc10028605e4185c"},
	{"bicubic resize down 5x", "bicubic", true, [4]int{}, [2]int{19, 26}, [2]int{}, false, "1ed6e8c1ef4e01fed90d98219d44d921764f4ebc5c1fd0816bcb833144a636df"},
	{"bicubic resize down 19x", "bicubic", true, [4]int{}, [2]int{5, 7}, [2]int{}, false, "bdef8fdd7ecc2222045fdda59d93b7bee631c8805ec2c0c60fec1f42a60ace45"},
	{"bicubic-noaa resized_crop down", "bicubic", false, [4]int{7, 13, 71, 95}, [2]int{40, 56}, [2]int{}, false, "074a44540d7e08217eb622ad2f08f6cff13322e4e4350281aa54fa48870c9212"},
	{"bicubic-noaa resized_crop up at the edge", "bicubic", false, [4]int{80, 110, 17, 21}, [2]int{31, 47}, [2]int{}, false, "780b7b0857bcd44548b0347873189cb49b16b60497c0f16bfcfcb5b68d50bc22"},
	{"bicubic-noaa resized_crop flipped", "bicubic", false, [4]int{0, 0, 97, 60}, [2]int{33, 29}, [2]int{}, true, "8056eafdef3f258f1ff30eb00f951159b95e31dead2655489299cad0cd9f0401"},
	{"bicubic-noaa resize+center_crop", "bicubic", false, [4]int{}, [2]int{60, 0}, [2]int{48, 52}, false, "16dfa5b8756a522655bc4c949394b8d0055e988fb9df96e4f8e8cf9349965f5b"},
	{"bicubic-noaa resize up", "bicubic", false, [4]int{}, [2]int{150, 171}, [2]int{}, false, "a512f4fa9112d6e5141b13e761350fe25356dffa498d911d9ac478be0d07f149"},
}
