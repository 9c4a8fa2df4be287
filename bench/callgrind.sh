#!/usr/bin/env bash
# Instructions per image, epoch 1 and epochs >= 2, counted by callgrind:
# a measure of the decoder index that the machine's load does not move.
#
#   bench/callgrind.sh REF PHOTO_GLOB [INDEX]
#
# builds package pipeline at git ref REF (in a temporary tree) with a small
# test that decodes every 10th file of PHOTO_GLOB (imagenet-train, keys
# (1, epoch, i)) for 1 epoch, then for 3, each under valgrind --tool=callgrind,
# and prints the instructions per image of the first epoch and of the two
# later ones (the difference of the runs). INDEX=1 gives the decoders a
# pipeline.Index (REF must have one); 0 (default) none. Needs valgrind; Go's
# asynchronous preemption is turned off, which callgrind's signal handling
# does not survive.
set -euo pipefail
ref=$1 glob=$2 index=${3:-0}
repo=$(git rev-parse --show-toplevel)
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
git -C "$repo" archive "$ref" | tar -x -C "$tmp"
setindex='func setIndex(d *Decoder) {}'
if [ "$index" = 1 ]; then
	setindex='func setIndex(d *Decoder) { d.opts.index = NewIndex(1 << 30) }'
fi
cat >"$tmp/pipeline/zz_callgrind_test.go" <<EOF
//go:build cgo

package pipeline

import (
	"os"
	"path/filepath"
	"sort"
	"strconv"
	"testing"
)

$setindex

func TestZZCallgrind(t *testing.T) {
	paths, _ := filepath.Glob(os.Getenv("CG_GLOB"))
	sort.Strings(paths)
	if len(paths) == 0 {
		t.Fatal("no files match CG_GLOB")
	}
	var files [][]byte
	for i := 0; i < len(paths); i += 10 {
		b, err := os.ReadFile(paths[i])
		if err != nil {
			t.Fatal(err)
		}
		files = append(files, b)
	}
	epochs, _ := strconv.Atoi(os.Getenv("CG_EPOCHS"))
	d := NewDecoder()
	setIndex(d)
	tr, _ := ParseTransform("imagenet-train", CHW)
	out := make([]byte, tr.SampleBytes())
	for e := 0; e < epochs; e++ {
		for i, f := range files {
			if err := d.Decode(f, tr, Key{Seed: 1, Epoch: uint64(e), Index: uint64(i)}, out); err != nil {
				t.Fatal(err)
			}
		}
	}
	os.WriteFile(os.Getenv("CG_N"), []byte(strconv.Itoa(len(files))), 0o644)
}
EOF
(cd "$tmp" && go test -c -o "$tmp/p.test" ./pipeline)
total() {
	CG_GLOB=$glob CG_EPOCHS=$1 CG_N=$tmp/n GODEBUG=asyncpreemptoff=1 \
		valgrind --tool=callgrind --callgrind-out-file="$tmp/cg.$1" "$tmp/p.test" -test.run TestZZCallgrind >/dev/null 2>&1
	callgrind_annotate "$tmp/cg.$1" | awk '/PROGRAM TOTALS/ {gsub(",", "", $1); print $1}'
}
one=$(total 1)
three=$(total 3)
n=$(cat "$tmp/n")
echo "ref $ref, index $index, $n files: epoch 1 $((one / n)) instructions per image (setup included), epochs >= 2 $(((three - one) / (2 * n)))"
