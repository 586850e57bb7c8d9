package declarative

import (
	"bytes"
	"crypto/md5"
	"encoding"
	"encoding/hex"
	"hash"
)

// Hasher is Hash for a sequence of documents that share most of their
// bytes, as an Encoder's do: md5 cannot skip what did not change, but it
// can start again from its state after a prefix that did not. The Hasher
// keeps the last document and md5's state after each hashCheckpoint bytes
// of it, and hashes the next one from the last checkpoint before the
// first chunk in which the two differ. A document hashed must not change
// afterwards (the Hasher keeps it). Not safe for concurrent use.
type Hasher struct {
	doc []byte
	sum string
	// states holds md5's marshaled state after each whole checkpoint of
	// doc, one after another, each md5StateSize bytes.
	states []byte
}

// hashCheckpoint: a document of 3,300 routes (2.3 MB) has about 70
// checkpoints, of 92 bytes each; a change costs on average half a
// checkpoint more than hashing from the change on.
const hashCheckpoint = 32 << 10

// md5StateSize is the size of md5's marshaled state.
var md5StateSize = len(marshalState(nil, md5.New()))

// Known returns Hash(doc) when doc has the bytes of the document last
// hashed, without hashing (and keeps this copy, so that the older one can
// go).
func (h *Hasher) Known(doc []byte) (string, bool) {
	if h.sum == "" || !bytes.Equal(doc, h.doc) {
		return "", false
	}
	h.doc = doc
	return h.sum, true
}

// Hash returns Hash(doc). (The same bytes as the last document cost one
// comparison and the md5 of the last, partial checkpoint: callers ask
// Known first.)
func (h *Hasher) Hash(doc []byte) string {
	// The checkpoints of the previous document that hold for this one:
	// those after whole chunks that are the same in both.
	same := 0
	for same < len(h.states)/md5StateSize {
		from, to := same*hashCheckpoint, (same+1)*hashCheckpoint
		if to > len(doc) || !bytes.Equal(doc[from:to], h.doc[from:to]) {
			break
		}
		same++
	}
	d := md5.New()
	states := h.states[:same*md5StateSize]
	if same > 0 {
		if err := d.(encoding.BinaryUnmarshaler).UnmarshalBinary(states[len(states)-md5StateSize:]); err != nil {
			panic("declarative: md5 state: " + err.Error()) // its own marshaling: cannot fail
		}
	}
	for from := same * hashCheckpoint; from < len(doc); from += hashCheckpoint {
		to := min(from+hashCheckpoint, len(doc))
		d.Write(doc[from:to])
		if to-from == hashCheckpoint {
			states = marshalState(states, d)
		}
	}
	h.doc, h.sum, h.states = doc, hex.EncodeToString(d.Sum(nil)), states
	return h.sum
}

// Last is the hash of the document last hashed ("" before the first).
func (h *Hasher) Last() string { return h.sum }

func marshalState(dst []byte, d hash.Hash) []byte {
	out, err := d.(encoding.BinaryAppender).AppendBinary(dst)
	if err != nil {
		panic("declarative: md5 state: " + err.Error()) // md5's digest always marshals
	}
	return out
}
