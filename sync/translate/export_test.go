package translate

// RouteLua is the fixed code of the per-route pre-function chunks, by
// phase, for the tests that check nothing of an object gets into it.
var RouteLua = map[string][]string{
	"access":        {redirectLua, corsAccessLua},
	"header_filter": {corsHeaderFilterLua},
}

// LuaValues is luaValues.
var LuaValues = luaValues
