//go:build !linux

package client

import (
	"errors"

	stokerv1 "github.com/stoker-dev/stoker/proto/stoker/v1"
)

// Shared-memory delivery is Linux only: elsewhere the loader never asks.

func bootID() string { return "" }

// FetchRing is not supported off Linux.
func FetchRing(string, []byte) (byte, int, error) {
	return 0, -1, errors.ErrUnsupported
}

type shmRing struct {
	slots uint32
	size  uint64
}

func mapRing(*stokerv1.ShmOffer) (*shmRing, error) { return nil, errors.ErrUnsupported }
func (r *shmRing) slot(uint32, uint64) []byte      { return nil }
func (r *shmRing) close()                          {}
