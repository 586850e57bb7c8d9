package translate_test

import (
	"bytes"
	"maps"
	"runtime"
	"slices"
	"testing"

	"github.com/konglet/konglet/sync/snapshot"
	"github.com/konglet/konglet/sync/translate"
)

// TestParallelTranslationIsTheSequentialOne: routes translated in parallel
// (one per worker turn, on four workers) give the same configuration and
// statuses as one at a time, for every golden scenario and a large
// snapshot; under -race it also shows the workers share nothing they
// write.
func TestParallelTranslationIsTheSequentialOne(t *testing.T) {
	translateBoth := func(t *testing.T, snap *snapshot.Snapshot) {
		t.Helper()
		yamlOf := func() []byte {
			var memo translate.Memo
			out, err := memo.Translate(snap, nil).YAML()
			if err != nil {
				t.Fatal(err)
			}
			return out
		}
		defer runtime.GOMAXPROCS(runtime.GOMAXPROCS(1))
		sequential := yamlOf()
		runtime.GOMAXPROCS(4)
		defer translate.ParallelChunk(1)()
		if parallel := yamlOf(); !bytes.Equal(parallel, sequential) {
			t.Errorf("parallel translation differs:\n%s", lineDiff(string(sequential), string(parallel)))
		}
	}
	inputs := goldenInputs(t, true)
	for _, name := range slices.Sorted(maps.Keys(inputs)) {
		for _, flavor := range []string{snapshot.RouterExpressions, snapshot.RouterTraditionalCompat} {
			t.Run(name+"/"+flavor, func(t *testing.T) { translateBoth(t, loadSnapshot(t, flavor, inputs[name]...)) })
		}
	}
	t.Run("500 routes", func(t *testing.T) { translateBoth(t, benchSnapshot(500)) })
}
