// Package dataset is stoker's datasets, as gocloud.dev/blob's Bucket is a
// portable type over its drivers: a Dataset is a numbered list of samples
// (an image's bytes, a label, fields) read the same way whatever holds them.
// ImageFolder (root/<class>/...) and WebDataset (tar shards) on a local
// disk (Open); COCO and YOLO detection datasets (OpenAnnotated; with
// images or annotations in a store, OpenAnnotatedSource; a COCO one's
// manifest, IndexAnnotated) and WebDataset shards with a COCO-style
// member per sample (WithMemberTargets), whose samples have boxes
// (Targeted); any of the two layouts in object storage
// as a StoreDataset over pipeline/source, described by a Manifest that
// stoker index writes (IndexStore, IndexDir) and OpenSource reads; and
// Mixed, several datasets served as one. A sample's fields (FieldSet) are
// its other members, its key, its path and its source, read beside its
// image.
//
// The package knows nothing of decoding or augmenting: the pipeline
// decodes what Read gives, and makes the targets field (FieldTargets) from
// a Targeted dataset's Instances. Its errors wrap the pipeline's sentinels
// (ErrCorrupt, ErrTooLarge, ErrUnsupported: the same values as the
// pipeline's) or the os and source errors.
//
// # What a dataset may hold, and what comes of it
//
// A dataset directory is outside input too. Open decides once what is a
// sample (listed), what is not (skipped) and what makes the whole dataset
// unusable (refused: Open fails). A listed sample that cannot be made is a
// per-sample error (Dataset.Read, the pipeline's Decoder.Decode; its
// Executor.Fill puts it in Batch.Errors): a bad file wraps a sentinel, an
// I/O error wraps the os error (fs.ErrNotExist, fs.ErrPermission: the
// pipeline's IsBadInput is false, it is the machine's problem).
// Per-sample messages, which travel to clients, name files relative to the
// dataset root, never by absolute path. Nothing here blocks: FIFOs are
// opened non-blocking and every read is of a known length. The tests are
// TestWebDatasetRejects and TestWebDatasetSparse here, and the pipeline's
// TestImageFolderBadFiles, TestWebDatasetBadShards, TestFillEpochBadFiles
// and TestBadInput (its testdata/bad), which hold its errors to its
// IsBadInput.
//
//	ImageFolder (root/<class>/...)        Open     Read / Decode
//	image bytes that are bad              listed   ErrCorrupt, ErrTooLarge or ErrUnsupported (testdata/bad)
//	file over the size cap                listed   ErrTooLarge, not read
//	symlink to a file inside the root     listed   read (the target; indexed at its size)
//	symlink leading out of the root,      listed   ErrUnsupported; the outside file is never opened
//	  or looping
//	dangling symlink                      listed   I/O error, fs.ErrNotExist
//	FIFO, socket or device named *.jpg,   skipped  -
//	  or a symlink to one
//	directory named *.jpg (x.jpg/)        skipped  - (images inside it are samples of its class, as
//	                                                 in torchvision's os.walk)
//	unreadable file (mode 000)            listed   I/O error, fs.ErrPermission (root reads it: its
//	                                                 capabilities override the mode)
//	unreadable class subdirectory         refused  (fs.ErrPermission; root reads it)
//	file removed after Open               listed   I/O error, fs.ErrNotExist
//	file grown or shrunk after Open       listed   ErrCorrupt ("changed since the dataset was
//	                                                 indexed"): the fingerprint promised the old bytes
//	FIFO or directory put in a file's     listed   ErrUnsupported ("not a regular file"), no blocking
//	  place after Open
//
//	WebDataset (dir/*.tar)                Open     Read / Decode
//	tar member bytes that are bad         listed   as for ImageFolder
//	corrupt tar, bad or missing .cls,     refused  (ErrCorrupt)
//	  a label >= 2^20 (classes are 0..max)
//	image member stored sparse            refused  (ErrUnsupported: its data section is not its
//	  (tar --sparse)                                 content, so it cannot be read in place)
//	member that is a symlink, hard link,  skipped  -
//	  directory or device
//	*.tar that is a FIFO or a directory   refused  (ErrUnsupported)
//	*.tar symlink leading out of the      refused  (ErrUnsupported)
//	  directory
//	unreadable shard                      refused  (fs.ErrPermission; root reads it)
//	.*.tar (macOS "._x.tar")              skipped  -
//	shard truncated after Open            listed   ErrCorrupt ("shorter than its size") for members
//	                                                 past the new end; the others read as before
//	shard appended to, or replaced by     listed   no change: members are read from the shard
//	  rename, after Open                             opened at Open, at their indexed offsets
//
// # Datasets in object storage, and manifests
//
// OpenSource opens a local path as Open does, or an s3://, gs:// or
// azblob:// prefix in either layout as a StoreDataset, read through a
// source.Store and a source.Ranges (Direct, or a cache with read-ahead:
// WithRanges). The listing follows the local rules (dot-names skipped,
// classes sorted, files in torchvision's os.walk order, top-level *.tar for
// WebDataset), and each shard is read once as a stream by the same tar
// parser as a local shard, so the same files give the same samples,
// labels, errors and fingerprint wherever they are (a class without an
// image, which a store shows as a "class/" marker or other files alone, is
// refused in both).
//
// A Manifest (stoker index: IndexStore, IndexDir) records all of that once:
// objects with their ETag or generation (size and modification time where
// there is none) and samples as byte ranges, so a server starts without a
// listing. It is kept beside the data as ROOT/.stoker/manifest (ManifestName,
// which no listing takes for data) or wherever WithManifest names. Its
// format is in manifest_file.go. Versions are not in the fingerprint;
// every read checks them:
//
//	Manifest                              OpenSource  Read
//	none (beside the data, none named)    lists and   -
//	                                      scans, logs
//	                                      the time
//	named, missing                        error       -
//	corrupt, truncated, another version,  error       - (the error names the file; a server never
//	  over its size or ratio limits                     rebuilds one: run stoker index)
//	named apart from the data, made of    error       -
//	  another source (root differs)
//	beside the data, the data moved       used        objects checked as ever
//	  (a directory mounted elsewhere)
//	more than half of 32 objects looked   error: stale -
//	  up gone or changed
//	some of them gone or changed          warning     -
//	object replaced or removed after      -           ErrCorrupt and source.ErrChanged, naming it
//	  indexing (size, ETag, generation,                 and saying to run stoker index again
//	  or mtime differs; a store's object
//	  without a version: its SHA-256)
//	a shard sample whose tar header       -           ErrCorrupt and ErrManifest, naming it
//	  is not the member's (name, size)
//	an ImageFolder label that is not      error       -
//	  its key's class folder
//	sample over the size cap              -           ErrTooLarge, not read
//	store down after its retries,         -           source.ErrUnavailable, source.ErrDenied or
//	  credentials refused, or an answer                 source.ErrProtocol: source.IsStoreFault,
//	  outside the store's protocol                      the store's fault, not
//	                                                    the sample's: Fill fails the whole batch,
//	                                                    never pads or drops it
package dataset

import (
	"github.com/stoker-dev/stoker/pipeline/batch"
	"github.com/stoker-dev/stoker/pipeline/errs"
)

// Sentinel errors, pipeline/errs' (the pipeline exports the same
// values): every error of a bad dataset or sample wraps one of them.
var (
	// ErrCorrupt: a file is not what its dataset says it is (a truncated
	// or changed file, a corrupt shard, a bad .cls, malformed
	// annotations).
	ErrCorrupt = errs.Corrupt
	// ErrTooLarge: a file or a field is over its bound.
	ErrTooLarge = errs.TooLarge
	// ErrUnsupported: a valid file or request this package does not
	// handle (a special file in a sample's place, a sparse member, a bad
	// argument).
	ErrUnsupported = errs.Unsupported
)

// Field is one of a sample's fields: pipeline/batch's.
type Field = batch.Field
