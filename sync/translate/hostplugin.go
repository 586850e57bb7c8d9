package translate

import (
	"slices"

	"github.com/konglet/konglet/proxy/declarative"
)

// Kong's router reads the Host header as the client sent it: a port there
// becomes net.dst.port (whatever port the connection reached), and a
// trailing dot stays in http.host. So "Host: admin.example.com:8080" on
// port 80 would reach the 8080 listener's routes, and "admin.example.com."
// would pass the exclusions that keep a catch-all listener away from
// admin.example.com. A global pre-function plugin fixes what the router
// sees: its rewrite phase (global plugins only, before the router) sets the
// Host to the name alone, lowercased, without port or trailing dots, so
// net.dst.port falls back to the port the connection reached (port_maps).
// Its access phase (after the router, before every other plugin) gives the
// upstream the client's own Host back where Kong passes the Host on
// (preserve_host: Kong set upstream_host from the Host it routed with).
//
// The code is fixed: nothing from any object is spliced into it. It uses
// only ngx.var.http_host, ngx.var.upstream_host, ngx.req.set_header, ngx.ctx,
// ngx.exit and string functions, all of which Kong's sandbox (untrusted_lua
// = sandbox, the default) hands to pre-function code. The test double runs
// it in a Lua 5.1 VM.
const (
	hostRewriteLua = `local host = ngx.var.http_host
if host == nil then
  return
end
local cut = string.find(host, ":", 1, true)
if string.byte(host, 1) == 91 then
  -- "[": an IPv6 literal, whose port comes after "]"
  local close = string.find(host, "]", 1, true)
  if close then
    cut = string.find(host, ":", close, true)
  end
end
local name = host
if cut then
  name = string.sub(host, 1, cut - 1)
end
while string.byte(name, -1) == 46 do
  name = string.sub(name, 1, -2)
end
if name == "" then
  return ngx.exit(400)
end
name = string.lower(name)
if name ~= host then
  ngx.ctx.konglet_client_host = host
  ngx.req.set_header("Host", name)
end
`
	hostRestoreLua = `local host = ngx.ctx.konglet_client_host
if host ~= nil and ngx.var.upstream_host ~= "" then
  ngx.var.upstream_host = host
end
`
)

// hostsNormalized tells whether Kong runs the plugin, so that a Host header
// can neither name another listener's port nor slip past an exclusion.
func (t *translator) hostsNormalized() bool { return t.snap.Kong.LuaAllowed() }

// globalPlugins are the plugins that run for every request: the Host
// normalizer, where Kong runs it and some route is an HTTP one.
func (t *translator) globalPlugins(kongRoutes []*kongRoute) []*declarative.Plugin {
	if !t.hostsNormalized() || !slices.ContainsFunc(kongRoutes, func(kr *kongRoute) bool { return isHTTPRoute(kr.route) }) {
		return nil
	}
	return []*declarative.Plugin{{
		ID:   declarative.ID("plugin", "", "host-normalizer"),
		Name: "pre-function",
		Config: map[string]any{
			"rewrite": []string{hostRewriteLua},
			"access":  []string{hostRestoreLua},
		},
	}}
}

func isHTTPRoute(r *declarative.Route) bool {
	return slices.ContainsFunc(r.Protocols, func(p string) bool {
		return p == "http" || p == "https" || p == "grpc" || p == "grpcs"
	})
}
