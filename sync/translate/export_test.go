package translate

// RouteLua is the fixed code of the per-route serverless chunks, by plugin
// and phase, for the tests that check nothing of an object gets into it.
var RouteLua = map[string][]string{
	"pre-function access":        {redirectLua, corsAccessLua},
	"pre-function header_filter": {corsHeaderFilterLua},
	"post-function access":       {backendLua},
}

// LuaValues is luaValues.
var LuaValues = luaValues

// HostRestoreLua is the first access chunk of every route's pre-function.
const HostRestoreLua = hostRestoreLua

// ParallelChunk sets how many routes a worker translates at a time, until
// the returned function restores it.
func ParallelChunk(n int) (restore func()) {
	old := parallelChunk
	parallelChunk = n
	return func() { parallelChunk = old }
}
