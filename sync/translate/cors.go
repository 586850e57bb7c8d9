package translate

import (
	"fmt"
	"maps"
	"regexp"
	"slices"
	"strconv"
	"strings"

	gwv1 "sigs.k8s.io/gateway-api/apis/v1"
)

// The CORS filter as the Gateway API defines it, which Kong's cors plugin
// does not follow (it sends no Access-Control-Expose-Headers on a
// preflight, and its own method list for "*"). Where Kong runs Lua, a
// per-route pre-function does it with fixed code: its access chunk answers
// a preflight (OPTIONS with Origin and Access-Control-Request-Method) with
// 200, with the CORS headers when the origin is allowed and without them
// when it is not; its header_filter chunk adds Access-Control-Allow-Origin,
// Vary, Access-Control-Allow-Credentials and Access-Control-Expose-Headers
// to every other response to a request from an allowed origin. The values
// reach the code through luaValues, in this order: the allowed origins,
// "true" when credentials are allowed, the methods, the allowed headers,
// the exposed headers (each list comma-separated: checkCORS admits no comma
// in an element), the max age.
//
// Origins: "*" allows every origin; an entry scheme://host[:port] matches
// an Origin with the same scheme, host (letter case aside) and port (80 and
// 443 by default); a host "*.example.com" matches any name that ends with
// ".example.com". The allowed Origin is echoed, except "*" without
// credentials. A wildcard list of methods or headers echoes what the
// preflight asks for.
const corsLua = luaUnhex + `local credentials = konglet[2] == "true"
local methods, headers, expose, max_age = konglet[3], konglet[4], konglet[5], konglet[6]

local function parse(origin)
  local scheme, host, port = string.match(string.lower(origin), "^(https?)://([%w%-%.%*]+):?(%d*)$")
  if scheme and port == "" then
    port = scheme == "http" and "80" or "443"
  end
  return scheme, host, port
end

local any, allowed = false, {}
for origin in string.gmatch(konglet[1], "[^,]+") do
  if origin == "*" then
    any = true
  else
    local scheme, host, port = parse(origin)
    if scheme then
      allowed[#allowed + 1] = { scheme = scheme, host = host, port = port }
    end
  end
end

-- allow_origin is the Access-Control-Allow-Origin for origin, nil if it is
-- not allowed.
local function allow_origin(origin)
  if any and not credentials then
    return "*"
  end
  local scheme, host, port = parse(origin)
  if not scheme or string.find(host, "*", 1, true) then
    return nil
  end
  if any then
    return origin
  end
  for _, a in ipairs(allowed) do
    if a.scheme == scheme and a.port == port then
      if a.host == host or a.host == "*" then
        return origin
      end
      if string.sub(a.host, 1, 2) == "*." then
        local suffix = string.sub(a.host, 2)
        if #host > #suffix and string.sub(host, -#suffix) == suffix then
          return origin
        end
      end
    end
  end
  return nil
end

local function list(s)
  return (string.gsub(s, ",", ", "))
end

local function preflight()
  return kong.request.get_method() == "OPTIONS" and kong.request.get_header("Origin") ~= nil
    and kong.request.get_header("Access-Control-Request-Method") ~= nil
end
`

const (
	corsAccessLua = corsLua + `
return function()
  if not preflight() then
    return
  end
  local allow = allow_origin(kong.request.get_header("Origin"))
  if allow == nil then
    return kong.response.exit(200)
  end
  local out = { ["Access-Control-Allow-Origin"] = allow, ["Access-Control-Max-Age"] = max_age }
  if allow ~= "*" then
    out["Vary"] = "Origin"
  end
  if credentials then
    out["Access-Control-Allow-Credentials"] = "true"
  end
  if methods == "*" then
    out["Access-Control-Allow-Methods"] = kong.request.get_header("Access-Control-Request-Method")
  elseif methods ~= "" then
    out["Access-Control-Allow-Methods"] = list(methods)
  end
  local asked = kong.request.get_header("Access-Control-Request-Headers")
  if headers == "*" then
    out["Access-Control-Allow-Headers"] = asked
  elseif headers ~= "" then
    out["Access-Control-Allow-Headers"] = list(headers)
  end
  if expose ~= "" then
    out["Access-Control-Expose-Headers"] = list(expose)
  end
  return kong.response.exit(200, nil, out)
end
`
	corsHeaderFilterLua = corsLua + `
return function()
  local origin = kong.request.get_header("Origin")
  if origin == nil or preflight() then
    return
  end
  local allow = allow_origin(origin)
  if allow == nil then
    return
  end
  kong.response.set_header("Access-Control-Allow-Origin", allow)
  if allow ~= "*" then
    kong.response.add_header("Vary", "Origin")
  end
  if credentials then
    kong.response.set_header("Access-Control-Allow-Credentials", "true")
  end
  if expose ~= "" then
    kong.response.set_header("Access-Control-Expose-Headers", list(expose))
  end
end
`
)

// corsValues are the filter's values for corsLua.
func corsValues(c *gwv1.HTTPCORSFilter) string {
	join := func(items []string) string { return strings.Join(items, ",") }
	var origins, methods []string
	for _, o := range c.AllowOrigins {
		origins = append(origins, string(o))
	}
	for _, m := range c.AllowMethods {
		methods = append(methods, string(m))
	}
	credentials := c.AllowCredentials != nil && *c.AllowCredentials
	maxAge := c.MaxAge
	if maxAge <= 0 {
		maxAge = 5 // the Gateway API's default
	}
	return luaValues(join(origins), strconv.FormatBool(credentials), join(methods),
		join(headerNames(c.AllowHeaders)), join(headerNames(c.ExposeHeaders)), strconv.Itoa(int(maxAge)))
}

var (
	corsOriginPattern = regexp.MustCompile(`^(\*|https?://((\*\.)?([a-zA-Z0-9-]+\.)*[a-zA-Z0-9-]+|\*)(:[0-9]{1,5})?)$`)
	// tokenPattern is an RFC 9110 token: a header or method name.
	tokenPattern = regexp.MustCompile("^[!#$%&'*+.^_`|~0-9A-Za-z-]+$")
)

// checkCORS refuses what the Gateway API does not allow in a CORS filter
// (the CRDs refuse it too; konglet does not count on them), and what the
// Lua cannot do: "*" in exposeHeaders with credentials, where the Gateway
// API wants the response's own header names.
func checkCORS(c *gwv1.HTTPCORSFilter) string {
	for _, o := range c.AllowOrigins {
		if !corsOriginPattern.MatchString(string(o)) {
			return fmt.Sprintf("filter CORS with origin %q: not scheme://host[:port] or *", o)
		}
	}
	lists := map[string][]string{"allowOrigins": nil, "allowMethods": nil, "allowHeaders": headerNames(c.AllowHeaders), "exposeHeaders": headerNames(c.ExposeHeaders)}
	for _, o := range c.AllowOrigins {
		lists["allowOrigins"] = append(lists["allowOrigins"], string(o))
	}
	for _, m := range c.AllowMethods {
		lists["allowMethods"] = append(lists["allowMethods"], string(m))
	}
	for _, field := range slices.Sorted(maps.Keys(lists)) {
		items := lists[field]
		if slices.Contains(items, "*") && len(items) > 1 {
			return fmt.Sprintf("filter CORS: %s cannot contain * alongside other values", field)
		}
		for _, v := range items {
			if field != "allowOrigins" && !tokenPattern.MatchString(v) {
				return fmt.Sprintf("filter CORS with %s %q: not a token", field, v)
			}
		}
	}
	if c.AllowCredentials != nil && *c.AllowCredentials && slices.Contains(lists["exposeHeaders"], "*") {
		return "filter CORS with exposeHeaders * and allowCredentials is not supported by konglet (it would have to list each response's header names)"
	}
	return ""
}
