//go:build !linux

package ring

import (
	"errors"

	stokerv1 "github.com/stoker-dev/stoker/proto/stoker/v1"
)

// Shared-memory delivery is Linux only: elsewhere the loader never asks.

func BootID() string { return "" }

// Fetch is not supported off Linux.
func Fetch(string, []byte) (byte, int, error) {
	return 0, -1, errors.ErrUnsupported
}

type Mapping struct {
	Slots     uint32
	SlotBytes uint64
}

func Map(*stokerv1.ShmOffer) (*Mapping, error) { return nil, errors.ErrUnsupported }
func (r *Mapping) Slot(uint32, uint64) []byte  { return nil }

// Close unmaps the ring.
func (r *Mapping) Close() {}
