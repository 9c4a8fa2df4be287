package source

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"os"
	"path/filepath"
	"sync"
	"testing"
)

// countingStore is a real Store with its ReadRange calls counted; a gate,
// when set, holds every ReadRange until it is closed (or the call's
// context ends), and fail, when set, may fail a call before it reads.
type countingStore struct {
	Store
	mu       sync.Mutex
	gets     []getCall
	running  int // ReadRanges under way now
	maxRun   int // the most at once
	gate     chan struct{}
	fail     func(key string, off int64, n int) error
	attempts map[string]int
}

type getCall struct {
	key    string
	off, n int64
}

func (c *countingStore) ReadRange(ctx context.Context, obj Object, off int64, p []byte) error {
	c.mu.Lock()
	c.gets = append(c.gets, getCall{obj.Key, off, int64(len(p))})
	c.running++
	c.maxRun = max(c.maxRun, c.running)
	gate, fail := c.gate, c.fail
	c.mu.Unlock()
	defer func() {
		c.mu.Lock()
		c.running--
		c.mu.Unlock()
	}()
	if gate != nil {
		select {
		case <-gate:
		case <-ctx.Done():
			return ctx.Err()
		}
	}
	if fail != nil {
		if err := fail(obj.Key, off, len(p)); err != nil {
			return err
		}
	}
	return c.Store.ReadRange(ctx, obj, off, p)
}

// getCount is the ReadRange calls so far.
func (c *countingStore) getCount() int {
	c.mu.Lock()
	defer c.mu.Unlock()
	return len(c.gets)
}

func (c *countingStore) calls() []getCall {
	c.mu.Lock()
	defer c.mu.Unlock()
	return append([]getCall(nil), c.gets...)
}

func (c *countingStore) setGate(g chan struct{}) {
	c.mu.Lock()
	c.gate = g
	c.mu.Unlock()
}

// testShards writes objects of n samples each of size bytes with gap
// bytes between them (a tar shard's header and padding stand-in), into a
// directory store, and returns the store (counted), the samples' ranges
// (shard by shard) and the objects' contents.
func testShards(t testing.TB, shards, n int, size, gap int64) (*countingStore, []Range, map[string][]byte) {
	t.Helper()
	dir := t.TempDir()
	rng := rand.New(rand.NewPCG(1, 2))
	contents := map[string][]byte{}
	for s := range shards {
		key := fmt.Sprintf("shard-%03d.tar", s)
		data := make([]byte, int64(n)*(size+gap))
		for i := range data {
			data[i] = byte(rng.Uint32())
		}
		if err := os.WriteFile(filepath.Join(dir, key), data, 0o644); err != nil {
			t.Fatal(err)
		}
		contents[key] = data
	}
	st, err := Open(context.Background(), dir)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { st.Close() })
	var rs []Range
	err = st.List(context.Background(), "", func(o Object) error {
		for i := range int64(n) {
			rs = append(rs, Range{Obj: o, Off: i*(size+gap) + gap, Len: size})
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	return &countingStore{Store: st}, rs, contents
}

// checkBytes fails unless got is r's bytes.
func checkBytes(t testing.TB, contents map[string][]byte, r Range, got []byte) {
	t.Helper()
	if want := contents[r.Obj.Key][r.Off : r.Off+r.Len]; !bytes.Equal(got, want) {
		t.Fatalf("%s [%d, +%d): wrong bytes", r.Obj.Key, r.Off, r.Len)
	}
}

var errInjected = errors.New("injected failure")

// shuffled returns a permutation of rs.
func shuffled(rs []Range, seed uint64) []Range {
	out := append([]Range(nil), rs...)
	rand.New(rand.NewPCG(seed, 7)).Shuffle(len(out), func(i, j int) { out[i], out[j] = out[j], out[i] })
	return out
}
