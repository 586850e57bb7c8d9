package translate

import (
	"fmt"
	"slices"
	"strconv"
	"strings"

	gwv1 "sigs.k8s.io/gateway-api/apis/v1"
)

// Kong applies plugins per route, and its balancer picks a target after
// them, so a rule whose backends filter their requests differently cannot
// be one upstream. Where Kong runs Lua, each backend of such a rule gets an
// upstream of its own and a per-route post-function (the last plugin of
// the access phase, after the rule's own request-transformer, as the
// Gateway API applies backend filters after the rule's) picks one by
// weight, sends the request there (kong.service.set_upstream) and applies
// that backend's RequestHeaderModifier: remove, set, then add, as the
// request-transformer does. The values reach the code through luaValues:
// the number of backends, then per backend its upstream, its weight and its
// set, add and remove lists, each element hex-encoded again and joined by
// commas (luaList).
const backendLua = luaUnhex + `local function unlist(s)
  local t = {}
  for item in string.gmatch(s, "[^,]+") do
    t[#t + 1] = unhex(item)
  end
  return t
end

local backends, total = {}, 0
for i = 1, tonumber(konglet[1]) do
  local v = 1 + (i - 1) * 5
  local weight = tonumber(konglet[v + 2])
  backends[i] = { upstream = konglet[v + 1], weight = weight,
    set = unlist(konglet[v + 3]), add = unlist(konglet[v + 4]), remove = unlist(konglet[v + 5]) }
  total = total + weight
end

local function pair(h)
  local colon = string.find(h, ":", 1, true)
  return string.sub(h, 1, colon - 1), string.sub(h, colon + 1)
end

return function()
  local pick = math.random() * total
  local chosen = backends[#backends]
  for _, b in ipairs(backends) do
    if pick < b.weight then
      chosen = b
      break
    end
    pick = pick - b.weight
  end
  assert(kong.service.set_upstream(chosen.upstream))
  for _, name in ipairs(chosen.remove) do
    kong.service.request.clear_header(name)
  end
  for _, h in ipairs(chosen.set) do
    kong.service.request.set_header(pair(h))
  end
  for _, h in ipairs(chosen.add) do
    kong.service.request.add_header(pair(h))
  end
end
`

// luaList is a list as one luaValues value: each item hex-encoded, joined
// by commas (which hexadecimal digits never are).
func luaList(items []string) string {
	var b strings.Builder
	for i, item := range items {
		if i > 0 {
			b.WriteByte(',')
		}
		fmt.Fprintf(&b, "%x", item)
	}
	return b.String()
}

// backendChunk is the access chunk that picks one of the rule's backends
// and filters the request for it; upstreams are the backends' own.
func backendChunk(backends []backend) string {
	values := []string{strconv.Itoa(len(backends))}
	for _, b := range backends {
		var set, add, remove []string
		if h := b.headers; h != nil {
			for _, x := range h.Set {
				set = append(set, string(x.Name)+":"+x.Value)
			}
			for _, x := range h.Add {
				add = append(add, string(x.Name)+":"+x.Value)
			}
			remove = h.Remove
		}
		values = append(values, upstreamName([]backend{b}), strconv.Itoa(int(b.weight)), luaList(set), luaList(add), luaList(remove))
	}
	return luaValues(values...) + backendLua
}

// checkBackendFilters: several backends may filter their requests only
// with RequestHeaderModifier, through backendLua.
func (t *translator) checkBackendFilters(refs []gwv1.HTTPBackendRef) string {
	if !t.snap.Kong.LuaAllowed() || !t.snap.Kong.PluginEnabled("post-function") {
		return "filters on one of several backendRefs need Kong to run konglet's post-function Lua (Kong applies plugins per route, not per target)"
	}
	for _, ref := range refs {
		for _, f := range ref.Filters {
			if f.Type != gwv1.HTTPRouteFilterRequestHeaderModifier || f.RequestHeaderModifier == nil || len(ref.Filters) > 1 {
				return fmt.Sprintf("filter %s on one of several backendRefs is not supported by konglet (only one RequestHeaderModifier per backendRef is)", f.Type)
			}
			m := f.RequestHeaderModifier
			names := slices.Clone(m.Remove)
			for _, h := range append(slices.Clone(m.Set), m.Add...) {
				names = append(names, string(h.Name))
			}
			for _, n := range names {
				if !tokenPattern.MatchString(n) || strings.EqualFold(n, "host") {
					return fmt.Sprintf("filter RequestHeaderModifier on a backendRef with header name %q: not a header name konglet can set per backend", n)
				}
			}
			for _, h := range append(slices.Clone(m.Set), m.Add...) {
				if strings.ContainsFunc(h.Value, isControl) {
					return fmt.Sprintf("filter RequestHeaderModifier on a backendRef with header value %q: control characters", h.Value)
				}
			}
		}
	}
	return ""
}
