package work

import (
	"github.com/stoker-dev/stoker/pipeline"
	stokerv1 "github.com/stoker-dev/stoker/proto/stoker/v1"
)

// IdentityProto is id as WorkerInfo.decoder carries it.
func IdentityProto(id pipeline.Identity) *stokerv1.DecoderIdentity {
	return &stokerv1.DecoderIdentity{
		StokerVersion: id.Version, OutputVersion: uint32(id.Output), Arch: id.Arch, FusedMultiplyAdd: id.FMA,
		DecodePath: id.Path, Simd: id.SIMD, LibjpegTurboVersion: uint32(id.Turbo), JpegLibVersion: uint32(id.JPEGLib),
	}
}

// identityOf is the identity d carries; a worker that sends none (older
// than the field) has output version 0, which no build has.
func identityOf(d *stokerv1.DecoderIdentity) pipeline.Identity {
	return pipeline.Identity{
		Version: d.GetStokerVersion(), Output: int(d.GetOutputVersion()), Arch: d.GetArch(), FMA: d.GetFusedMultiplyAdd(),
		Path: d.GetDecodePath(), SIMD: d.GetSimd(), Turbo: int(d.GetLibjpegTurboVersion()), JPEGLib: int(d.GetJpegLibVersion()),
	}
}
