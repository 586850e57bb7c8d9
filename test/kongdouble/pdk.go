package kongdouble

import (
	"fmt"
	"net/http"
	"strings"

	lua "github.com/yuin/gopher-lua"
)

// The part of Kong 3.9's PDK that konglet's Lua uses, as kong/pdk/request.lua
// and kong/pdk/response.lua define it. Any other kong function is an error
// of the double (strict tables).

// kong is the PDK table of a chunk's environment.
func (lr *luaRequest) kong() *lua.LTable {
	L := lr.L
	fn := func(f func(L *lua.LState) int) *lua.LFunction { return L.NewFunction(f) }
	str := func(f func() string) *lua.LFunction {
		return fn(func(L *lua.LState) int { L.Push(lua.LString(f())); return 1 })
	}
	request := L.NewTable()
	// get_scheme is $scheme.
	request.RawSetString("get_scheme", str(func() string { return lr.scheme }))
	// get_host is $host: the Host header's name, lowercased, without port
	// or trailing dot; without a Host header, the server_name of Kong's
	// proxy server block ("kong").
	request.RawSetString("get_host", str(func() string {
		if !lr.hasHost {
			return "kong"
		}
		name, _ := nginxHost(lr.host)
		return name
	}))
	// get_forwarded_port: X-Forwarded-Port or X-Forwarded-Host count only
	// from trusted_ips, which the double never has; then ngx.ctx.host_port
	// (port_maps), else the listen port (hostPort falls back to it).
	request.RawSetString("get_forwarded_port", fn(func(L *lua.LState) int {
		L.Push(lua.LNumber(lr.hostPort))
		return 1
	}))
	// get_raw_path is $request_uri up to a "?" after its first byte.
	request.RawSetString("get_raw_path", str(lr.rawPath))
	// get_path is the raw path normalized (kong.tools.uri.normalize).
	request.RawSetString("get_path", str(func() string { return normalizePath(lr.rawPath()) }))
	// get_raw_query is $args or "".
	request.RawSetString("get_raw_query", str(func() string {
		if i := strings.IndexByte(lr.requestURI, '?'); i >= 0 {
			return lr.requestURI[i+1:]
		}
		return ""
	}))

	// get_method is the request's method.
	request.RawSetString("get_method", str(func() string { return lr.method }))
	// get_header is $http_<name>: nil when absent; several headers of the
	// name joined with ", " (nginx 1.23 and later, as in Kong 3.9).
	request.RawSetString("get_header", fn(func(L *lua.LState) int {
		values := lr.headers.Values(L.CheckString(1))
		if len(values) == 0 {
			L.Push(lua.LNil)
			return 1
		}
		L.Push(lua.LString(strings.Join(values, ", ")))
		return 1
	}))

	response := L.NewTable()
	response.RawSetString("exit", fn(lr.responseExit))
	// set_header and add_header in header_filter: the value as a string
	// (numbers and booleans converted), control characters escaped.
	for name, set := range map[string]bool{"set_header": true, "add_header": false} {
		response.RawSetString(name, fn(func(L *lua.LState) int {
			if lr.respHeaders == nil {
				L.RaiseError("kongdouble: kong.response.%s outside header_filter is not modelled by the double", name)
			}
			header, value := L.CheckString(1), L.Get(2)
			switch value.(type) {
			case lua.LString, lua.LNumber, lua.LBool:
			default:
				L.RaiseError("invalid header value for %q: got %s, expected array of string, string, number or boolean", header, value.Type())
			}
			v := escapeHeaderValue(value.String())
			if set {
				lr.respHeaders.Set(header, v)
			} else {
				lr.respHeaders.Add(header, v)
			}
			return 0
		}))
	}

	// kong.service.set_upstream(host): true, or nil and an error when no
	// upstream has that name (kong/pdk/service.lua).
	service := L.NewTable()
	service.RawSetString("set_upstream", fn(func(L *lua.LState) int {
		name := L.CheckString(1)
		if !lr.upstreamExists(name) {
			L.Push(lua.LNil)
			L.Push(lua.LString("could not find an Upstream named '" + name + "'"))
			return 2
		}
		lr.upstream = name
		L.Push(lua.LTrue)
		return 1
	}))
	// kong.service.request.set_header, add_header and clear_header change
	// the request to the upstream (ngx.req.set_header); Host is the
	// upstream Host ($upstream_host).
	serviceRequest := L.NewTable()
	for name, op := range map[string]func(header, value string){
		"set_header": func(h, v string) { lr.headers.Set(h, escapeHeaderValue(v)) },
		"add_header": func(h, v string) { lr.headers.Add(h, escapeHeaderValue(v)) },
	} {
		serviceRequest.RawSetString(name, fn(func(L *lua.LState) int {
			header, value := L.CheckString(1), L.Get(2)
			switch value.(type) {
			case lua.LString, lua.LNumber, lua.LBool:
			default:
				L.RaiseError("invalid header value for %q: got %s, expected array of string, string, number or boolean", header, value.Type())
			}
			if strings.EqualFold(header, "host") {
				L.RaiseError("kongdouble: kong.service.request.%s(\"host\") is not modelled by the double", name)
			}
			op(header, value.String())
			return 0
		}))
	}
	serviceRequest.RawSetString("clear_header", fn(func(L *lua.LState) int {
		lr.headers.Del(L.CheckString(1))
		return 0
	}))
	service.RawSetString("request", lr.strict("kong.service.request.", serviceRequest))

	kong := L.NewTable()
	kong.RawSetString("service", lr.strict("kong.service.", service))
	kong.RawSetString("request", lr.strict("kong.request.", request))
	kong.RawSetString("response", lr.strict("kong.response.", response))
	return lr.strict("kong.", kong)
}

func (lr *luaRequest) rawPath() string {
	uri := lr.requestURI
	if i := strings.IndexByte(uri, '?'); i >= 1 {
		return uri[:i]
	}
	return uri
}

// responseExit is kong.response.exit(status, body, headers) for a string
// or nil body and headers with string or number values: the checks of
// _RESPONSE.exit, then send (Content-Length from the body). In the access
// phase Kong delays the answer until the plugin returns; the double ends
// the chunk at once, as nothing of konglet's runs after it.
func (lr *luaRequest) responseExit(L *lua.LState) int {
	status, ok := L.Get(1).(lua.LNumber)
	switch {
	case !ok:
		L.RaiseError("code must be a number")
	case status < 100 || status > 599:
		L.RaiseError("code must be a number between 100 and 599")
	}
	e := &kongExit{status: int(status), headers: http.Header{}}
	switch body := L.Get(2).(type) {
	case *lua.LNilType:
	case lua.LString:
		e.body = []byte(body)
	default:
		L.RaiseError("kongdouble: a %s body of kong.response.exit is not modelled by the double", body.Type())
	}
	switch headers := L.Get(3).(type) {
	case *lua.LNilType:
	case *lua.LTable:
		headers.ForEach(func(k, v lua.LValue) {
			name, ok := k.(lua.LString)
			if !ok {
				L.RaiseError("invalid name %q: got %s, expected string", k.String(), k.Type())
			}
			switch v.(type) {
			case lua.LString, lua.LNumber:
			default:
				L.RaiseError("kongdouble: a %s header value of kong.response.exit is not modelled by the double", v.Type())
			}
			value := v.String()
			if value == "" {
				value = " "
			}
			e.headers.Set(string(name), escapeHeaderValue(value))
		})
	default:
		L.RaiseError("headers must be a nil or table")
	}
	lr.response = e
	L.Error(lua.LString(errLuaExit.Error()), 0)
	return 0
}

// escapeHeaderValue is what lua-nginx-module does to a header value set
// from Lua: control characters other than tab are percent-encoded, so a
// value cannot split the response's headers.
func escapeHeaderValue(v string) string {
	var b strings.Builder
	for i := 0; i < len(v); i++ {
		if c := v[i]; (c < 0x20 && c != '\t') || c == 0x7f {
			fmt.Fprintf(&b, "%%%02X", c)
			continue
		}
		b.WriteByte(v[i])
	}
	return b.String()
}
