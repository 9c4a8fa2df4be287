package dataset

import (
	"fmt"
	"strings"
)

// compressedTars are the names of compressed tar shards, with the tool
// that decompresses each in place (gunzip -k a.tar.gz writes a.tar, and
// a.tgz becomes a.tar too).
var compressedTars = []struct{ suffix, tool string }{
	{".tar.gz", "gunzip"}, {".tgz", "gunzip"},
	{".tar.bz2", "bunzip2"}, {".tbz2", "bunzip2"},
	{".tar.xz", "unxz"}, {".txz", "unxz"},
	{".tar.zst", "unzstd"}, {".tzst", "unzstd"},
}

// compressedTool is the tool that decompresses the compressed tar shard
// name, or "" when name is not one.
func compressedTool(name string) string {
	lower := strings.ToLower(name)
	for _, c := range compressedTars {
		if strings.HasSuffix(lower, c.suffix) {
			return c.tool
		}
	}
	return ""
}

// compressedShards are the compressed tar shards among the top-level
// names of a dataset (dot-names are not shards, as for .tar).
func compressedShards(names []string) []string {
	var out []string
	for _, n := range names {
		if !strings.HasPrefix(n, ".") && compressedTool(n) != "" {
			out = append(out, n)
		}
	}
	return out
}

// errCompressedShards refuses compressed WebDataset shards, whether
// alone or beside plain ones (serving the plain ones alone would leave
// samples out unnoticed). A sample is read in place, at its offset in its
// shard, one ranged read each, in any order; a compressed stream has no
// offsets but from its start, so each read would decompress the shard up
// to its sample (a whole shard per sample, on average half). Decompressing
// once costs little space: JPEG and PNG members barely shrink under gzip.
func errCompressedShards(where string, names []string) error {
	list := strings.Join(names[:min(len(names), 3)], ", ")
	if len(names) > 3 {
		list += fmt.Sprintf(" and %d more", len(names)-3)
	}
	tool := compressedTool(names[0])
	return fmt.Errorf("%w: dataset %s: compressed tar shards (%s): stoker reads each sample in place at its offset "+
		"in its shard, and a compressed shard has no offsets to read at without decompressing it from its start "+
		"for every sample; decompress the shards once (%s -k %s writes its .tar; JPEG and PNG members barely "+
		"shrink when compressed, so the .tar files take about the same space), then serve, or stoker index, the .tar files",
		ErrUnsupported, where, list, tool, names[0])
}
