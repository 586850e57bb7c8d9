package translate

import (
	"encoding/hex"
	"strings"
)

// Kong's pre-function plugin has no configuration of its own: each phase is
// an array of Lua chunks. Where a feature needs per-route values in fixed
// Lua code, the chunk is luaValues(values...) followed by the feature's
// fixed code, which reads them from the table konglet. Every value is
// written as a Lua string of hexadecimal digits, so what a route author
// controls can only ever be [0-9a-f] between two quotes: no quote,
// backslash, newline, "]]" or byte of any kind reaches the Lua parser, and
// no value can end the literal or the table. The fixed code decodes them
// with luaUnhex once, when the chunk is compiled (it returns the function
// Kong then runs for each request).
func luaValues(values ...string) string {
	var b strings.Builder
	b.WriteString("local konglet = {")
	for i, v := range values {
		if i > 0 {
			b.WriteString(", ")
		}
		b.WriteByte('"')
		b.WriteString(hex.EncodeToString([]byte(v)))
		b.WriteByte('"')
	}
	b.WriteString("}\n")
	return b.String()
}

// luaUnhex is the Lua that decodes the values of luaValues.
const luaUnhex = `local function unhex(s)
  return (string.gsub(s, "%x%x", function(h)
    return string.char(tonumber(h, 16))
  end))
end
for i = 1, #konglet do
  konglet[i] = unhex(konglet[i])
end
`
