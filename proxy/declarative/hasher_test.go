package declarative_test

import (
	"bytes"
	"math/rand/v2"
	"testing"

	"github.com/konglet/konglet/proxy/declarative"
)

// TestHasherMatchesHash: whatever the edits from one document to the next
// (at the start, at a checkpoint, across one, at the end, growing,
// shrinking, none), the Hasher's hash is md5's of the whole document.
func TestHasherMatchesHash(t *testing.T) {
	rng := rand.New(rand.NewPCG(1, 2))
	var h declarative.Hasher
	doc := []byte{}
	for step := range 400 {
		next := bytes.Clone(doc)
		switch step % 6 {
		case 0: // grow at the end, up to several checkpoints
			next = append(next, randomBytes(rng, rng.IntN(200_000))...)
		case 1: // one byte changed anywhere
			if len(next) > 0 {
				next[rng.IntN(len(next))]++
			}
		case 2: // bytes inserted anywhere
			at := rng.IntN(len(next) + 1)
			next = append(next[:at], append(randomBytes(rng, rng.IntN(3_000)), next[at:]...)...)
		case 3: // cut anywhere
			next = next[:rng.IntN(len(next)+1)]
		case 4: // a byte at a checkpoint boundary and the one before it
			for _, at := range []int{32 << 10, 64<<10 - 1, 96 << 10} {
				if at < len(next) {
					next[at] ^= 0xff
				}
			}
		case 5: // the same bytes, another copy
		}
		if got, want := h.Hash(next), declarative.Hash(next); got != want {
			t.Fatalf("step %d (%d bytes): %s, md5 says %s", step, len(next), got, want)
		}
		if sum := h.Last(); sum != declarative.Hash(next) {
			t.Fatalf("step %d: Last() says %s", step, sum)
		}
		if sum, ok := h.Known(bytes.Clone(next)); !ok || sum != declarative.Hash(next) {
			t.Fatalf("step %d: Known(the same bytes) = %s, %v", step, sum, ok)
		}
		if _, ok := h.Known(append(bytes.Clone(next), ' ')); ok {
			t.Fatalf("step %d: Known(other bytes) found a hash", step)
		}
		doc = next
	}
}

func randomBytes(rng *rand.Rand, n int) []byte {
	b := make([]byte, n)
	for i := range b {
		b[i] = byte(rng.Uint32())
	}
	return b
}

// BenchmarkHashAfterAnEdit is a load's hash of a 2.3 MB document (3,300
// routes) that differs from the one before it in one place, anywhere, by
// the Hasher that hashed that one and by md5 alone.
func BenchmarkHashAfterAnEdit(b *testing.B) {
	rng := rand.New(rand.NewPCG(3, 4))
	docs := [][]byte{randomBytes(rng, 2_300_000)}
	for range 63 {
		next := bytes.Clone(docs[len(docs)-1])
		next[rng.IntN(len(next))]++
		docs = append(docs, next)
	}
	b.Run("md5", func(b *testing.B) {
		for i := 0; b.Loop(); i++ {
			declarative.Hash(docs[i%len(docs)])
		}
	})
	b.Run("Hasher", func(b *testing.B) {
		var h declarative.Hasher
		for i := 0; b.Loop(); i++ {
			next := 1 + i%(len(docs)-1)
			if next == 1 {
				// The chain starts again, from its first document.
				b.StopTimer()
				h.Hash(docs[0])
				b.StartTimer()
			}
			h.Hash(docs[next])
		}
	})
}
