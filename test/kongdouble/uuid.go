package kongdouble

import (
	"crypto/rand"
	"crypto/sha1"
	"encoding/hex"
	"fmt"
)

// Kong's declarative loader derives missing ids with UUIDv5 from this
// namespace: uuid_v5(uuid_v5(ns, schema name), natural key).
const entitiesNamespace = "fd02801f-0957-4a15-a55a-c8d9606f30b5"

// The compat router gives split routes ids from this namespace.
const splitRouteNamespace = "7f145bf9-0dce-4f91-98eb-debbce4b9f6b"

func parseUUID(s string) []byte {
	b, err := hex.DecodeString(s[0:8] + s[9:13] + s[14:18] + s[19:23] + s[24:36])
	if err != nil {
		panic("bad uuid constant " + s)
	}
	return b
}

func formatUUID(b []byte) string {
	return fmt.Sprintf("%x-%x-%x-%x-%x", b[0:4], b[4:6], b[6:8], b[8:10], b[10:16])
}

func uuidV5(namespace, name string) string {
	h := sha1.New()
	h.Write(parseUUID(namespace))
	h.Write([]byte(name))
	sum := h.Sum(nil)[:16]
	sum[6] = (sum[6] & 0x0f) | 0x50
	sum[8] = (sum[8] & 0x3f) | 0x80
	return formatUUID(sum)
}

// entityUUID is generate_uuid(schema.name, key) of declarative_config.lua.
func entityUUID(entity, key string) string {
	return uuidV5(uuidV5(entitiesNamespace, entity), key)
}

func randomUUID() string {
	b := make([]byte, 16)
	if _, err := rand.Read(b); err != nil {
		panic(err)
	}
	b[6] = (b[6] & 0x0f) | 0x40
	b[8] = (b[8] & 0x3f) | 0x80
	return formatUUID(b)
}
