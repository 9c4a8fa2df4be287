package det

import "testing"

// TestPermutationIndex: Index is At's inverse, on sizes of one walk and
// of many.
func TestPermutationIndex(t *testing.T) {
	for _, n := range []uint64{1, 2, 3, 7, 100, 129, 1000, 4097} {
		p := EpochPermutation(n, 11, 4)
		seen := make([]bool, n)
		for i := range n {
			x := p.At(i)
			if x >= n || seen[x] {
				t.Fatalf("n=%d: At(%d)=%d is not a bijection's", n, i, x)
			}
			seen[x] = true
			if j := p.Index(x); j != i {
				t.Fatalf("n=%d: Index(At(%d)=%d) = %d", n, i, x, j)
			}
		}
	}
}
