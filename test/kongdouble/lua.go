package kongdouble

import (
	"errors"
	"fmt"
	"net/http"
	"strings"
	"sync"

	lua "github.com/yuin/gopher-lua"
	"github.com/yuin/gopher-lua/parse"
)

// The serverless plugins (pre-function, post-function) as Kong 3.9 runs
// them (kong/plugins/pre-function/_handler.lua, kong/tools/sandbox): each
// string of a phase's array is a Lua chunk, compiled with an environment of
// Lua's safe functions that falls back to Kong's PDK (kong) and ngx. A chunk
// that returns a function has that function run too. An error in a chunk
// fails the request with 500; with untrusted_lua=off Kong accepts the
// plugin but every request that reaches it fails.
//
// The double runs the chunks in gopher-lua, a Lua 5.1 VM (Kong runs
// LuaJIT, also Lua 5.1). It models only the ngx functions that konglet's
// code uses, with nginx's behaviour; any other ngx or kong function, or a
// global outside the sandbox's list, is an error, so that code the double
// cannot judge never passes silently.

// luaSafeGlobals are the names of kong/tools/sandbox/environment/lua.lua
// that gopher-lua provides (bit, jit and LuaJIT's table extensions are
// missing, so using them is an error here).
var luaSafeGlobals = map[string][]string{
	"": {"_VERSION", "assert", "error", "ipairs", "next", "pairs", "pcall", "print", "select",
		"tonumber", "tostring", "type", "unpack", "xpcall"},
	"math": {"abs", "acos", "asin", "atan", "atan2", "ceil", "cos", "cosh", "deg", "exp", "floor", "fmod",
		"frexp", "huge", "ldexp", "log", "log10", "max", "min", "modf", "pi", "pow", "rad", "random",
		"sin", "sinh", "sqrt", "tan", "tanh"},
	"os":     {"clock", "date", "difftime", "time"},
	"string": {"byte", "char", "find", "format", "gmatch", "gsub", "len", "lower", "match", "rep", "reverse", "sub", "upper"},
	"table":  {"concat", "getn", "insert", "maxn", "remove", "sort"},
}

// luaProtos caches compiled chunks by source.
var luaProtos sync.Map // string -> *lua.FunctionProto

func compileLua(src string) (*lua.FunctionProto, error) {
	if p, ok := luaProtos.Load(src); ok {
		return p.(*lua.FunctionProto), nil
	}
	chunk, err := parse.Parse(strings.NewReader(src), "pre-function")
	if err != nil {
		return nil, err
	}
	proto, err := lua.Compile(chunk, "pre-function")
	if err != nil {
		return nil, err
	}
	luaProtos.Store(src, proto)
	return proto, nil
}

// luaSyntax is the serverless schemas' check: every chunk must compile.
func luaSyntax(plugin string) func(string) string {
	return func(src string) string {
		if _, err := compileLua(src); err != nil {
			return "error parsing " + plugin + ": " + err.Error()
		}
		return ""
	}
}

// errLuaExit unwinds a chunk that called ngx.exit.
var errLuaExit = errors.New("ngx.exit")

// luaRequest is one request as the serverless chunks see it, across phases.
type luaRequest struct {
	L       *lua.LState
	ctx     *lua.LTable // ngx.ctx
	env     *lua.LTable
	headers http.Header
	// host is the Host header ($http_host); hasHost false when absent.
	host    string
	hasHost bool
	// upstreamHost is $upstream_host: "" until the router sets it for a
	// preserve_host route.
	upstreamHost string
	exit         int // the status given to ngx.exit, 0 if none
	// response is what kong.response.exit answers, nil if it was not called.
	response *kongExit
	// What kong.request reads: $scheme, the path and query as sent
	// ($request_uri) and the port that port_maps maps the accepting listen
	// to (ngx.ctx.host_port).
	scheme     string
	method     string
	requestURI string
	hostPort   int
	// respHeaders are the response's headers while the header_filter
	// phase runs (kong.response.set_header), nil before.
	respHeaders http.Header
	// upstream is what kong.service.set_upstream chose ("" if nothing);
	// upstreamExists tells whether the loaded config has that upstream.
	upstream       string
	upstreamExists func(string) bool
}

func newLuaRequest(host string, headers http.Header, scheme, method, requestURI string, hostPort int) *luaRequest {
	L := lua.NewState(lua.Options{SkipOpenLibs: true, CallStackSize: 64, RegistrySize: 1024})
	for _, open := range []lua.LGFunction{lua.OpenBase, lua.OpenString, lua.OpenTable, lua.OpenMath, lua.OpenOs} {
		L.Push(L.NewFunction(open))
		L.Call(0, 0)
	}
	lr := &luaRequest{L: L, ctx: L.NewTable(), headers: headers, host: host, hasHost: host != "",
		scheme: scheme, method: method, requestURI: requestURI, hostPort: hostPort}
	lr.env = lr.sandbox()
	return lr
}

func (lr *luaRequest) close() { lr.L.Close() }

// strict is a table whose unknown keys are errors.
func (lr *luaRequest) strict(name string, t *lua.LTable) *lua.LTable {
	mt := lr.L.NewTable()
	mt.RawSetString("__index", lr.L.NewFunction(func(L *lua.LState) int {
		L.RaiseError("kongdouble: %s%s is not modelled by the double", name, L.CheckAny(2).String())
		return 0
	}))
	lr.L.SetMetatable(t, mt)
	return t
}

// sandbox builds a chunk's environment: the safe globals, then ngx and a
// kong whose every field is an error.
func (lr *luaRequest) sandbox() *lua.LTable {
	L := lr.L
	env := L.NewTable()
	for module, names := range luaSafeGlobals {
		if module == "" {
			for _, n := range names {
				env.RawSetString(n, L.GetGlobal(n))
			}
			continue
		}
		src, _ := L.GetGlobal(module).(*lua.LTable)
		t := L.NewTable()
		for _, n := range names {
			t.RawSetString(n, src.RawGetString(n))
		}
		env.RawSetString(module, lr.strict(module+".", t))
	}
	env.RawSetString("_G", env)
	env.RawSetString("ngx", lr.ngx())
	env.RawSetString("kong", lr.kong())
	return lr.strict("", env)
}

// ngx is the part of OpenResty's ngx that konglet's code uses.
func (lr *luaRequest) ngx() *lua.LTable {
	L := lr.L
	ngx := L.NewTable()
	ngx.RawSetString("ctx", lr.ctx)
	ngx.RawSetString("exit", L.NewFunction(func(L *lua.LState) int {
		lr.exit = L.CheckInt(1)
		L.Error(lua.LString(errLuaExit.Error()), 0)
		return 0
	}))
	req := L.NewTable()
	req.RawSetString("set_header", L.NewFunction(lr.setHeader))
	ngx.RawSetString("req", lr.strict("ngx.req.", req))

	vars := L.NewTable()
	mt := L.NewTable()
	mt.RawSetString("__index", L.NewFunction(func(L *lua.LState) int {
		switch name := L.CheckString(2); name {
		case "http_host":
			if !lr.hasHost {
				L.Push(lua.LNil)
				return 1
			}
			L.Push(lua.LString(lr.host))
		case "upstream_host":
			L.Push(lua.LString(lr.upstreamHost))
		default:
			L.RaiseError("kongdouble: ngx.var.%s is not modelled by the double", name)
		}
		return 1
	}))
	mt.RawSetString("__newindex", L.NewFunction(func(L *lua.LState) int {
		// $upstream_host is the only variable Kong's template lets Lua set
		// that konglet uses; nginx refuses writes to $http_* variables.
		if name := L.CheckString(2); name != "upstream_host" {
			L.RaiseError("kongdouble: setting ngx.var.%s is not modelled by the double", name)
		}
		lr.upstreamHost = L.CheckString(3)
		return 0
	}))
	L.SetMetatable(vars, mt)
	ngx.RawSetString("var", vars)
	return lr.strict("ngx.", ngx)
}

// setHeader is ngx.req.set_header for a string value. Setting Host changes
// $http_host (and $host) for what follows, the router included; nginx
// refuses a Host it would not have accepted from a client.
func (lr *luaRequest) setHeader(L *lua.LState) int {
	name, value := L.CheckString(1), L.CheckString(2)
	if !strings.EqualFold(name, "host") {
		lr.headers.Set(name, value)
		return 0
	}
	if _, ok := nginxHost(value); value != "" && !ok {
		L.RaiseError("attempt to set invalid host header")
	}
	lr.host, lr.hasHost = value, value != ""
	return 0
}

// nginxHost is ngx_http_validate_host: the name nginx keeps as $host
// (lowercased, without port and one trailing dot), and whether it accepts
// the Host at all (no empty labels, path separators or control characters,
// a name before any port).
func nginxHost(h string) (string, bool) {
	hostLen, dot, literal, rest := len(h), -1, false, false
	for i := 0; i < len(h); i++ {
		switch c := h[i]; {
		case c == '.':
			if dot == i-1 {
				return "", false
			}
			dot = i
		case c == ':':
			if !literal && !rest {
				hostLen, rest = i, true
			}
		case c == '[':
			literal = literal || i == 0
		case c == ']':
			if literal && !rest {
				hostLen, rest = i+1, true
			}
		case c == '/' || c == '\\' || c <= 0x20 || c == 0x7f:
			return "", false
		}
	}
	if dot == hostLen-1 {
		hostLen--
	}
	return strings.ToLower(h[:hostLen]), hostLen > 0
}

// runPhase runs the chunks of one phase of a serverless plugin config.
// exit is non-nil when the request ends there: ngx.exit, or an error.
func (lr *luaRequest) runPhase(cfg map[string]any, phase string, untrustedLua string) *kongExit {
	for _, src := range strList(cfg[phase]) {
		if untrustedLua == "off" {
			return jsonExit(http.StatusInternalServerError, defaultMessages[http.StatusInternalServerError])
		}
		proto, err := compileLua(src)
		if err != nil {
			return jsonExit(http.StatusInternalServerError, defaultMessages[http.StatusInternalServerError])
		}
		fn := lr.L.NewFunctionFromProto(proto)
		fn.Env = lr.env
		err = lr.L.CallByParam(lua.P{Fn: fn, NRet: 1, Protect: true})
		if err == nil {
			ret := lr.L.Get(-1)
			lr.L.Pop(1)
			if f, ok := ret.(*lua.LFunction); ok {
				err = lr.L.CallByParam(lua.P{Fn: f, NRet: 0, Protect: true})
			}
		}
		switch {
		case lr.response != nil:
			return lr.response
		case lr.exit != 0:
			msg := defaultMessages[lr.exit]
			if msg == "" {
				return &kongExit{status: lr.exit, headers: http.Header{}}
			}
			return jsonExit(lr.exit, msg)
		case err != nil:
			return luaFailure(err)
		}
	}
	return nil
}

// luaFailure is Kong's answer to a plugin that raised an error; the
// double's own complaints (a function it does not model) panic instead, so
// a test never mistakes them for Kong's behaviour.
func luaFailure(err error) *kongExit {
	if strings.Contains(err.Error(), "kongdouble:") {
		panic(fmt.Sprintf("serverless code the double cannot run: %v", err))
	}
	return jsonExit(http.StatusInternalServerError, defaultMessages[http.StatusInternalServerError])
}
