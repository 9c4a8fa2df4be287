package source

import (
	"bytes"
	"context"
	"errors"
	"testing"
)

// TestFetcherReadChecked: bytes read through ReadChecked are checked once,
// when they come from the store, and then served from memory without the
// check (entries never change); bytes the check refuses are returned as
// its error and never cached, so a later read goes to the store again;
// a range cached unchecked (a plain Read) is checked on its first
// ReadChecked, then not again.
func TestFetcherReadChecked(t *testing.T) {
	st, rs, contents := testShards(t, 1, 3, 1000, 0)
	cache, err := NewCache(WithMemory(1 << 20))
	if err != nil {
		t.Fatal(err)
	}
	f := NewFetcher(st, WithCache(cache))
	defer f.Close()
	ctx := context.Background()
	errRefused := errors.New("refused")
	checks := 0
	checkOf := func(r Range, accept bool) func([]byte) error {
		return func(b []byte) error {
			checks++
			if !accept || !bytes.Equal(b, contents[r.Obj.Key][r.Off:r.Off+r.Len]) {
				return errRefused
			}
			return nil
		}
	}

	// Checked once, from the store; then from memory, unchecked.
	for i := range 3 {
		out, err := f.ReadChecked(ctx, rs[0], nil, checkOf(rs[0], true))
		if err != nil {
			t.Fatal(err)
		}
		checkBytes(t, contents, rs[0], out)
		if checks != 1 || st.getCount() != 1 {
			t.Fatalf("read %d: %d checks, %d store reads; want 1 and 1", i, checks, st.getCount())
		}
	}

	// Refused: its error, nothing cached; accepted later, from the store.
	if _, err := f.ReadChecked(ctx, rs[1], nil, checkOf(rs[1], false)); !errors.Is(err, errRefused) {
		t.Fatalf("refused bytes: %v, want the check's error", err)
	}
	if cache.Contains(f.name, rs[1]) {
		t.Fatal("bytes the check refused were cached")
	}
	out, err := f.ReadChecked(ctx, rs[1], nil, checkOf(rs[1], true))
	if err != nil {
		t.Fatal(err)
	}
	checkBytes(t, contents, rs[1], out)
	if st.getCount() != 3 {
		t.Errorf("%d store reads, want 3 (the refused range read again)", st.getCount())
	}

	// Cached by a plain Read: checked on the first ReadChecked only.
	if _, err := f.Read(ctx, rs[2], nil); err != nil {
		t.Fatal(err)
	}
	checks = 0
	for range 3 {
		out, err := f.ReadChecked(ctx, rs[2], nil, checkOf(rs[2], true))
		if err != nil {
			t.Fatal(err)
		}
		checkBytes(t, contents, rs[2], out)
	}
	if checks != 1 || st.getCount() != 4 {
		t.Errorf("a range cached unchecked: %d checks, %d store reads; want 1 and 4", checks, st.getCount())
	}
	// A range checked once is served from memory without calling the
	// check again, whatever it would say now (its bytes cannot change).
	checks = 0
	if _, err := f.ReadChecked(ctx, rs[0], nil, checkOf(rs[0], false)); err != nil || checks != 0 {
		t.Errorf("a checked range: %v, %d checks; want its bytes and none", err, checks)
	}
}
