package translate

// RedirectLua is the fixed code of the redirect pre-function, for the
// tests that check nothing of an object gets into it.
const RedirectLua = redirectLua

// LuaValues is luaValues.
var LuaValues = luaValues
