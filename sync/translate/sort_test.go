package translate

import (
	"cmp"
	"math/rand/v2"
	"runtime"
	"slices"
	"testing"
)

// TestSortFuncIsSlicesSortFunc: sorted in two halves and merged, a slice
// comes out as slices.SortFunc leaves it, ties in the first key included.
func TestSortFuncIsSlicesSortFunc(t *testing.T) {
	defer runtime.GOMAXPROCS(runtime.GOMAXPROCS(2))
	type item struct{ key, id int }
	byKeyAndID := func(a, b item) int { return cmp.Or(cmp.Compare(a.key, b.key), cmp.Compare(a.id, b.id)) }
	rng := rand.New(rand.NewPCG(1, 2))
	for _, n := range []int{0, 1, minParallelSort - 1, minParallelSort, minParallelSort + 1, 3*minParallelSort + 7} {
		items := make([]item, n)
		for i := range items {
			items[i] = item{rng.IntN(n/4 + 1), i}
		}
		got, want := slices.Clone(items), slices.Clone(items)
		sortFunc(got, byKeyAndID)
		slices.SortFunc(want, byKeyAndID)
		if !slices.Equal(got, want) {
			t.Errorf("%d items: sortFunc's order differs from slices.SortFunc's", n)
		}
	}
}
