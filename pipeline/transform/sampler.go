package transform

import optab "github.com/stoker-dev/stoker/pipeline/ops"

// The compiled transform's parts the decoder reads (the pipeline's root:
// it fuses the geometry, draws the steps into its own buffers, packs the
// samples).

// OutW is the output width (view 0's), OutH its height: Size's.
func (t sampler) OutW() int { return t.outW }

// OutH is the output height (view 0's).
func (t sampler) OutH() int { return t.outH }

// GeomW is the width the geometry makes when the ops after it grow the
// image (a RandomRotation with expand=True; 0: no such op).
func (t sampler) GeomW() int { return t.geomW }

// MaxSteps bounds the steps one sample draws after the geometry; MaxPre
// those of the ops before it (detection's photometric ops).
func (t sampler) MaxSteps() int { return t.maxSteps }

// MaxPre bounds the steps one sample draws before the geometry.
func (t sampler) MaxPre() int { return t.maxPre }

// PreNodes are the compiled ops before the geometry, PostNodes those
// after it.
func (t sampler) PreNodes() []optab.Node { return t.pre }

// PostNodes are the compiled ops after the geometry.
func (t sampler) PostNodes() []optab.Node { return t.post }

// NormOp is the Normalize the samples end in (nil: none, uint8 samples).
func (t sampler) NormOp() *optab.Op { return t.norm }

// IoUOp is the RandomIoUCrop of the geometry, if any; JitterOp its
// ScaleJitter.
func (t sampler) IoUOp() *optab.Op { return t.iou }

// JitterOp is the geometry's ScaleJitter, if any.
func (t sampler) JitterOp() *optab.Op { return t.jitter }

// MosaicOp is the YOLOMosaic of the multi-image geometry, if any;
// CopyPasteOp and CutMixOp the YOLOCopyPaste and YOLOCutMix after it.
func (t sampler) MosaicOp() *optab.Op { return t.mosaic }

// CopyPasteOp is the YOLOCopyPaste after the mosaic, if any.
func (t sampler) CopyPasteOp() *optab.Op { return t.copyPaste }

// CutMixOp is the YOLOCutMix ending the multi-image geometry, if any.
func (t sampler) CutMixOp() *optab.Op { return t.cutmix }

// MixUpOp is the YOLOMixUp after the mosaic, if any.
func (t sampler) MixUpOp() *optab.Op { return t.mixup }

// YOLO is the YOLO family's geometry, if any.
func (t sampler) YOLO() *yoloGeom { return t.yolo }

// ViewList is a transform of several views' views (nil: one view).
func (t sampler) ViewList() []*Transform { return t.views }
