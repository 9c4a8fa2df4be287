package dataset

import (
	"bytes"
	"fmt"
	"strconv"
	"strings"

	"github.com/stoker-dev/stoker/pipeline/errs"
)

// tarBlock is a tar header's size: a shard member's own header is the
// block just before its data.
const tarBlock = 512

// checkTarHeader checks that h, the block before a shard member's data,
// is that member's header as a manifest gives it: a valid header (its
// checksum) of a regular file of size bytes named member (sameMember: a
// long name is in a GNU or PAX record before it, which is not read). It costs a 512-byte parse per
// read, and says a manifest's range points where it claims, not at
// another member.
func checkTarHeader(h []byte, member string, size int64) error {
	if len(h) != tarBlock {
		return fmt.Errorf("no %d-byte header before the member", tarBlock)
	}
	if !tarChecksumOK(h) {
		return fmt.Errorf("no tar header before the member's data (checksum %q)", strings.TrimRight(string(h[148:156]), "\x00 "))
	}
	switch h[156] {
	case '0', 0, '7':
	default:
		return fmt.Errorf("the header before the member's data is of type %q, not a regular file", h[156])
	}
	got, ok := tarNumber(h[124:136])
	name := tarName(h)
	if !ok || got != size {
		return fmt.Errorf("the header before the member's data is of %q, %d bytes, not %d", errs.Clip(name, 128), got, size)
	}
	if !sameMember(name, member) {
		return fmt.Errorf("the header before the member's data names %q (%d bytes)", errs.Clip(name, 128), got)
	}
	return nil
}

// tarChecksumOK checks h's checksum, unsigned or signed (old tars), with
// the checksum field counted as spaces.
func tarChecksumOK(h []byte) bool {
	want, ok := tarNumber(h[148:156])
	if !ok {
		return false
	}
	var u, s int64
	for i, c := range h {
		if i >= 148 && i < 156 {
			c = ' '
		}
		u += int64(c)
		s += int64(int8(c))
	}
	return want == u || want == s
}

// tarNumber reads an octal field (NUL- or space-terminated), or GNU's
// base-256 for large sizes.
func tarNumber(f []byte) (int64, bool) {
	if len(f) > 0 && f[0]&0x80 != 0 {
		var v int64
		for i, c := range f {
			if i == 0 {
				c &= 0x7f
			}
			if v > (1<<63-1)>>8 {
				return 0, false
			}
			v = v<<8 | int64(c)
		}
		return v, true
	}
	s := strings.Trim(string(f), " \x00")
	if s == "" {
		return 0, true
	}
	v, err := strconv.ParseInt(s, 8, 64)
	return v, err == nil && v >= 0
}

// tarName is the name a header holds: ustar's prefix and name, else the
// name field.
func tarName(h []byte) string {
	cstr := func(b []byte) string {
		if i := bytes.IndexByte(b, 0); i >= 0 {
			b = b[:i]
		}
		return string(b)
	}
	name := cstr(h[0:100])
	if string(h[257:263]) == "ustar\x00" { // POSIX ustar and PAX; GNU's "ustar  " has no prefix
		if prefix := cstr(h[345:500]); prefix != "" {
			name = prefix + "/" + name
		}
	}
	return name
}

// sameMember says whether a header's name is member's: equal, or, for a
// name a ustar header cannot hold, what the writers put in the name field
// after a GNU or PAX record with the whole name (its first 100 bytes:
// GNU tar, Python's tarfile, Go's archive/tar); a name that is not ASCII
// is in the record alone, not compared.
func sameMember(name, member string) bool {
	if name == member {
		return true
	}
	for i := range len(member) {
		if member[i] >= 0x80 {
			return true
		}
	}
	if len(member) <= 100 {
		return false
	}
	// Go's archive/tar drops a slash that would end the field.
	return name == member[:100] || name == strings.TrimRight(member[:100], "/")
}

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
