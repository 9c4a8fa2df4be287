package pipeline

import "github.com/stoker-dev/stoker/pipeline/dataset"

// The datasets are pipeline/dataset's (its documentation tells what a
// dataset may hold and what comes of it, and the manifests of datasets in
// object storage): re-exported here under the names the server, the
// commands and the executor's callers use. The sentinel errors and the
// targets' names are with errors.go and targets.go.

// The datasets, their fields, manifests and mixes.
type (
	Dataset              = dataset.Dataset
	FieldPrefetcher      = dataset.FieldPrefetcher
	ImageFolder          = dataset.ImageFolder
	Prefetcher           = dataset.Prefetcher
	ShardFieldPrefetcher = dataset.ShardFieldPrefetcher
	ShardPrefetcher      = dataset.ShardPrefetcher
	Sharded              = dataset.Sharded
	FieldSet             = dataset.FieldSet
	Fielded              = dataset.Fielded
	Sourced              = dataset.Sourced
	WebDataset           = dataset.WebDataset
	COCODataset          = dataset.COCODataset
	YOLODataset          = dataset.YOLODataset
	MixPart              = dataset.MixPart
	Mixed                = dataset.Mixed
	Manifest             = dataset.Manifest
	ManifestField        = dataset.ManifestField
	ManifestSample       = dataset.ManifestSample
	IndexOptions         = dataset.IndexOptions
	IndexProgress        = dataset.IndexProgress
	ShardedStoreDataset  = dataset.ShardedStoreDataset
	StoreDataset         = dataset.StoreDataset
	SourceOption         = dataset.SourceOption
)

// Their bounds, names and layouts.
const (
	DefaultMaxFileSize     = dataset.DefaultMaxFileSize
	FieldKey               = dataset.FieldKey
	FieldPath              = dataset.FieldPath
	FieldSource            = dataset.FieldSource
	MaxFieldName           = dataset.MaxFieldName
	MaxFields              = dataset.MaxFields
	FieldCOCO              = dataset.FieldCOCO
	FieldYOLO              = dataset.FieldYOLO
	MaxMixParts            = dataset.MaxMixParts
	LayoutImageFolder      = dataset.LayoutImageFolder
	LayoutWebDataset       = dataset.LayoutWebDataset
	ManifestName           = dataset.ManifestName
	DefaultMaxManifestSize = dataset.DefaultMaxManifestSize
)

// ErrManifest: a manifest that is not valid (dataset.ErrManifest).
var ErrManifest = dataset.ErrManifest

// OpenAnnotatedSource is OpenAnnotated with the images or the annotations
// in object storage too (dataset.OpenAnnotatedSource).
var OpenAnnotatedSource = dataset.OpenAnnotatedSource

// WithAnnotationsBudget bounds an annotations file's parse; a COCO file's
// peak is about COCOParseFactor times its size
// (dataset.WithAnnotationsBudget).
var WithAnnotationsBudget = dataset.WithAnnotationsBudget

// COCOParseFactor is a COCO file's parse's peak, in times its size.
const COCOParseFactor = dataset.COCOParseFactor

// IndexAnnotated makes a COCO dataset's manifest (dataset.IndexAnnotated).
var IndexAnnotated = dataset.IndexAnnotated

// Annotations in a member of each WebDataset sample (--annotations NAME=.json).
var (
	MemberAnnotations = dataset.MemberAnnotations
	WithMemberTargets = dataset.WithMemberTargets
)

// Opening, indexing and mixing datasets.
var (
	Open             = dataset.Open
	OpenImageFolder  = dataset.OpenImageFolder
	NewFieldSet      = dataset.NewFieldSet
	OpenWebDataset   = dataset.OpenWebDataset
	OpenCOCO         = dataset.OpenCOCO
	OpenAnnotated    = dataset.OpenAnnotated
	OpenYOLO         = dataset.OpenYOLO
	MixQuotas        = dataset.MixQuotas
	NewMixed         = dataset.NewMixed
	DecodeManifest   = dataset.DecodeManifest
	IndexDir         = dataset.IndexDir
	IndexStore       = dataset.IndexStore
	NewStoreDataset  = dataset.NewStoreDataset
	OpenSource       = dataset.OpenSource
	WithIndexOptions = dataset.WithIndexOptions
	WithLog          = dataset.WithLog
	WithManifest     = dataset.WithManifest
	WithRanges       = dataset.WithRanges
	WithStoreOptions = dataset.WithStoreOptions
)
