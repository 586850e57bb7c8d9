package translate

import (
	"fmt"
	"regexp"
	"slices"
	"strconv"
	"strings"

	gwv1 "sigs.k8s.io/gateway-api/apis/v1"
)

// A RequestRedirect as the Gateway API defines it takes the scheme, the
// hostname, the port and the path from the request wherever the filter
// leaves them unset, which Kong's redirect plugin (a fixed location) cannot
// do. Where Kong runs Lua, a per-route pre-function answers in the access
// phase with this fixed code; the filter's values reach it through
// luaValues, in this order: scheme, hostname, port, path type ("",
// "full" or "prefix"), path, the matched PathPrefix (without a trailing
// slash), status code. "" means unset.
//
// The port: a port given is written unless it is the scheme's well-known
// one; with a scheme but no port, the scheme's well-known port (none
// written); with neither, the listener's port, which is the port Kong maps
// the accepting listen to (port_maps), as kong.request.get_forwarded_port
// returns it. The path: unset keeps the request's path as sent; a prefix
// replacement replaces the matched prefix of the normalized path Kong routed
// with. The query string is kept. Every byte of the path and query outside
// RFC 3986's path and query characters, and of the host outside a host's,
// is percent-encoded, and so is a "%" that starts no escape (escape turns
// every "%" into "%25", then gives back those followed by two hexadecimal
// digits, which were escapes), so the
// Location is a valid URL with no space, quote or control character
// whatever the request or the route says.
const redirectLua = luaUnhex + `local scheme, hostname, port = konglet[1], konglet[2], tonumber(konglet[3])
local path_type, path, prefix = konglet[4], konglet[5], konglet[6]
local status = tonumber(konglet[7])

local function escape(s, unsafe)
  s = string.gsub(s, unsafe, function(c)
    return string.format("%%%02X", string.byte(c))
  end)
  return (string.gsub(s, "%%25(%x%x)", "%%%1"))
end

return function()
  local s, p = scheme, port
  if s == "" then
    s = kong.request.get_scheme()
    if p == nil then
      p = kong.request.get_forwarded_port()
    end
  end
  local authority = hostname
  if authority == "" then
    authority = kong.request.get_host()
  end
  authority = escape(authority, "[^%w%-%.:%[%]]")
  if p ~= nil and not ((s == "http" and p == 80) or (s == "https" and p == 443)) then
    authority = authority .. ":" .. p
  end
  local target = kong.request.get_raw_path()
  if path_type == "full" then
    target = path
  elseif path_type == "prefix" then
    local routed = kong.request.get_path()
    if string.sub(routed, 1, #prefix) == prefix then
      target = string.gsub(path, "/$", "") .. string.sub(routed, #prefix + 1)
      if target == "" then
        target = "/"
      end
    end
  end
  local query = kong.request.get_raw_query()
  if query ~= "" then
    target = target .. "?" .. query
  end
  target = escape(target, "[^%w%-%._~!%$&'%(%)%*%+,;=:@/%?]")
  return kong.response.exit(status, nil, { Location = s .. "://" .. authority .. target })
end
`

// redirectChunk is the access chunk that answers a RequestRedirect on one
// Kong route whose match is m.
func redirectChunk(r *gwv1.HTTPRequestRedirectFilter, m gwv1.HTTPRouteMatch) string {
	var scheme, hostname, port, pathType, path, prefix string
	if r.Scheme != nil {
		scheme = *r.Scheme
	}
	if r.Hostname != nil {
		hostname = string(*r.Hostname)
	}
	if r.Port != nil {
		port = strconv.Itoa(int(*r.Port))
	}
	if p := r.Path; p != nil {
		switch {
		case p.Type == gwv1.FullPathHTTPPathModifier && p.ReplaceFullPath != nil:
			pathType, path = "full", *p.ReplaceFullPath
		case p.Type == gwv1.PrefixMatchHTTPPathModifier && p.ReplacePrefixMatch != nil:
			pathType, path = "prefix", *p.ReplacePrefixMatch
		}
	}
	if m.Path != nil && m.Path.Value != nil && m.Path.Type != nil && *m.Path.Type == gwv1.PathMatchPathPrefix {
		prefix = strings.TrimSuffix(*m.Path.Value, "/")
	}
	code := 302
	if r.StatusCode != nil {
		code = *r.StatusCode
	}
	return luaValues(scheme, hostname, port, pathType, path, prefix, strconv.Itoa(code)) + redirectLua
}

// checkRedirect refuses what the Gateway API does not allow in a redirect
// (the CRDs refuse it too; konglet does not count on them).
func checkRedirect(r *gwv1.HTTPRequestRedirectFilter) string {
	if r.Scheme != nil && *r.Scheme != "http" && *r.Scheme != "https" {
		return fmt.Sprintf("filter RequestRedirect with scheme %q: only http and https are supported", *r.Scheme)
	}
	if r.Port != nil && (*r.Port < 1 || *r.Port > 65535) {
		return fmt.Sprintf("filter RequestRedirect with port %d: not a port", *r.Port)
	}
	if r.StatusCode != nil && !slices.Contains([]int{301, 302, 303, 307, 308}, *r.StatusCode) {
		return fmt.Sprintf("filter RequestRedirect with status code %d: only 301, 302, 303, 307 and 308 are supported", *r.StatusCode)
	}
	if r.Hostname != nil && !redirectHostname.MatchString(string(*r.Hostname)) {
		return fmt.Sprintf("filter RequestRedirect with hostname %q: not a hostname", *r.Hostname)
	}
	if p := r.Path; p != nil {
		switch {
		case p.Type == gwv1.FullPathHTTPPathModifier && p.ReplaceFullPath != nil && strings.HasPrefix(*p.ReplaceFullPath, "/"):
		case p.Type == gwv1.PrefixMatchHTTPPathModifier && p.ReplacePrefixMatch != nil && strings.HasPrefix(*p.ReplacePrefixMatch, "/"):
		default:
			return fmt.Sprintf("filter RequestRedirect with path type %s needs a path that starts with /", p.Type)
		}
	}
	return ""
}

// checkRedirectPrefix: a prefix replacement needs every match of the rule
// to be a PathPrefix one (a rule without matches matches the prefix /).
func checkRedirectPrefix(r *gwv1.HTTPRequestRedirectFilter, matches []gwv1.HTTPRouteMatch) string {
	if r.Path == nil || r.Path.Type != gwv1.PrefixMatchHTTPPathModifier {
		return ""
	}
	for _, m := range matches {
		if m.Path != nil && m.Path.Type != nil && *m.Path.Type != gwv1.PathMatchPathPrefix {
			return "filter RequestRedirect with ReplacePrefixMatch needs PathPrefix matches"
		}
	}
	return ""
}

// redirectHostname is an RFC 1123 name, as the Gateway API's
// PreciseHostname.
var redirectHostname = regexp.MustCompile(`^[a-z0-9]([-a-z0-9]*[a-z0-9])?(\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*$`)
