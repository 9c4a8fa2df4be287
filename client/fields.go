package client

import (
	stokerv1 "github.com/stoker-dev/stoker/proto/stoker/v1"
)

// batchFields is a header's fields as Batch.Fields: every field the job
// asked for (names), in its order, a value for each of the batch's n
// samples, those without it nil. A header that lacks one, or says
// otherwise, breaks the protocol.
func batchFields(names []string, h *stokerv1.BatchHeader, n int) (map[string][][]byte, error) {
	got := h.GetFields()
	if len(names) == 0 && len(got) == 0 {
		return nil, nil
	}
	if len(got) != len(names) {
		return nil, protoErr("batch %d has %d fields; the job asked for %d", h.GetNumber(), len(got), len(names))
	}
	out := make(map[string][][]byte, len(names))
	for f, fv := range got {
		vs := fv.GetValues()
		if fv.GetName() != names[f] || len(vs) != n {
			return nil, protoErr("batch %d: field %d is %.64q with %d values; the job asked for %q of %d samples", h.GetNumber(), f, fv.GetName(), len(vs), names[f], n)
		}
		for i := range vs {
			if vs[i] == nil {
				vs[i] = []byte{} // present, empty
			}
		}
		prev := -1
		for _, m := range fv.GetMissing() {
			if int(m) <= prev || int(m) >= n || len(vs[m]) != 0 {
				return nil, protoErr("batch %d: field %q lists sample %d without it (after %d, of %d)", h.GetNumber(), names[f], m, prev, n)
			}
			prev = int(m)
			vs[m] = nil
		}
		out[names[f]] = vs
	}
	return out, nil
}
