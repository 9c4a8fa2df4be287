package dataset

import "github.com/stoker-dev/stoker/pipeline/internal/testfiles"

// The datasets' test helpers: the files they write, pipeline/internal/
// testfiles' (the pipeline's tests write the same).
var (
	writeTree    = testfiles.WriteTree
	writeShard   = testfiles.WriteShard
	testPicture  = testfiles.Picture
	testGray     = testfiles.Gray
	testPaletted = testfiles.Paletted
	encodeJPEG   = testfiles.JPEG
	encodePNG    = testfiles.PNG
)

// tarMember is a shard's member (writeShard).
type tarMember = testfiles.Member
