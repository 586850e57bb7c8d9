package status

import (
	"crypto/sha256"
	"encoding/hex"
	"strings"
)

// maxObjectName is the longest name the API server takes (a DNS subdomain).
const maxObjectName = 253

// ObjectName joins prefix, name and suffix into a name of an object konglet
// creates (Lease, Event). Names of users' objects may already be the
// longest allowed: then the middle is cut and a digest of the whole keeps
// names of different objects apart.
func ObjectName(prefix, name, suffix string) string {
	whole := prefix + name + suffix
	if len(whole) <= maxObjectName {
		return whole
	}
	sum := sha256.Sum256([]byte(whole))
	digest := "-" + hex.EncodeToString(sum[:4])
	keep := maxObjectName - len(prefix) - len(suffix) - len(digest)
	// A cut must not leave a label ending in "." or "-".
	return prefix + strings.TrimRight(name[:keep], ".-") + digest + suffix
}
