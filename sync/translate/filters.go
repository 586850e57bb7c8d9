package translate

import (
	"fmt"
	"net"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"time"

	gwv1 "sigs.k8s.io/gateway-api/apis/v1"

	"github.com/konglet/konglet/proxy/declarative"
)

// ruleFilters are the filters of one rule that Kong will apply: the rule's
// own and, where a rule has a single backend, that backend's (Kong cannot
// filter per target).
type ruleFilters struct {
	filters  []gwv1.HTTPRouteFilter
	timeouts *gwv1.HTTPRouteTimeouts
	// lua: Kong runs pre-function Lua, so redirects are answered by
	// redirectLua rather than Kong's redirect plugin.
	lua bool
	// perBackend: the rule has several backends and some filter their
	// requests, which backendLua does (backend.headers).
	perBackend bool
	// upstreamHost is the Host, and so the TLS server name, Kong sends to
	// backends under a BackendTLSPolicy ("" for the client's).
	upstreamHost string
}

// collectFilters checks that Kong can apply every filter of the rule and
// says which cannot, by name: a rule is never served without its filters.
func (t *translator) collectFilters(rule routeRule) (ruleFilters, string) {
	out := ruleFilters{filters: slices.Clone(rule.filters), timeouts: rule.timeouts, lua: t.snap.Kong.LuaAllowed()}
	if rule.unsupported != "" {
		return out, rule.unsupported
	}
	// A backendRef of weight 0 gets no request, so neither do its filters
	// (the refs are copied only then: the input is never written).
	unserved := func(b gwv1.HTTPBackendRef) bool { return b.Weight != nil && *b.Weight == 0 }
	served := rule.backendRefs
	if slices.ContainsFunc(served, unserved) {
		served = slices.DeleteFunc(slices.Clone(served), unserved)
	}
	withFilters := 0
	for _, b := range served {
		if len(b.Filters) > 0 {
			withFilters++
		}
	}
	switch {
	case withFilters > 0 && len(served) > 1:
		if msg := t.checkBackendFilters(served); msg != "" {
			return out, msg
		}
		out.perBackend = true
	case withFilters > 0:
		out.filters = append(out.filters, served[0].Filters...)
	}
	seen := map[gwv1.HTTPRouteFilterType]bool{}
	for _, f := range out.filters {
		if seen[f.Type] {
			return out, fmt.Sprintf("filter %s is given twice (once on the rule and once on its backendRef)", f.Type)
		}
		seen[f.Type] = true
		if msg := t.checkFilter(f); msg != "" {
			return out, msg
		}
		if f.Type == gwv1.HTTPRouteFilterRequestRedirect {
			if msg := checkRedirectPrefix(f.RequestRedirect, rule.matches); msg != "" {
				return out, msg
			}
		}
	}
	if out.timeouts != nil {
		for _, d := range []*gwv1.Duration{out.timeouts.Request, out.timeouts.BackendRequest} {
			if d == nil {
				continue
			}
			if _, err := time.ParseDuration(string(*d)); err != nil {
				return out, fmt.Sprintf("timeout %q is not a duration", *d)
			}
		}
	}
	return out, ""
}

func (t *translator) checkFilter(f gwv1.HTTPRouteFilter) string {
	plugin := ""
	switch f.Type {
	case gwv1.HTTPRouteFilterRequestHeaderModifier:
		if f.RequestHeaderModifier == nil {
			return "filter RequestHeaderModifier has no requestHeaderModifier"
		}
		plugin = "request-transformer"
		if msg := checkHeaderModifier(f.Type, f.RequestHeaderModifier, true); msg != "" {
			return msg
		}
	case gwv1.HTTPRouteFilterResponseHeaderModifier:
		if f.ResponseHeaderModifier == nil {
			return "filter ResponseHeaderModifier has no responseHeaderModifier"
		}
		plugin = "response-transformer"
		if msg := checkHeaderModifier(f.Type, f.ResponseHeaderModifier, false); msg != "" {
			return msg
		}
	case gwv1.HTTPRouteFilterURLRewrite:
		if f.URLRewrite == nil {
			return "filter URLRewrite has no urlRewrite"
		}
		plugin = "request-transformer"
		if msg := t.checkRewritePath(f.URLRewrite.Path); msg != "" {
			return msg
		}
	case gwv1.HTTPRouteFilterRequestRedirect:
		if f.RequestRedirect == nil {
			return "filter RequestRedirect has no requestRedirect"
		}
		if msg := checkRedirect(f.RequestRedirect); msg != "" {
			return msg
		}
		plugin = "redirect"
		if t.snap.Kong.LuaAllowed() {
			plugin = "pre-function"
		} else if p := f.RequestRedirect.Path; p != nil && p.Type != gwv1.FullPathHTTPPathModifier {
			return fmt.Sprintf("filter RequestRedirect with path type %s needs Kong to run konglet's pre-function Lua (Kong's redirect plugin has a fixed location)", p.Type)
		}
	case gwv1.HTTPRouteFilterCORS:
		if f.CORS == nil {
			return "filter CORS has no cors"
		}
		if !t.snap.Kong.LuaAllowed() {
			return "filter CORS needs Kong to run konglet's pre-function Lua (Kong's cors plugin answers preflights differently from the Gateway API)"
		}
		plugin = "pre-function"
		if msg := checkCORS(f.CORS); msg != "" {
			return msg
		}
	default:
		return fmt.Sprintf("filter %s is not supported by Kong", f.Type)
	}
	if !t.snap.Kong.PluginEnabled(plugin) {
		return fmt.Sprintf("filter %s needs Kong's %s plugin, which is not enabled (add it to Kong's plugins property)", f.Type, plugin)
	}
	return ""
}

// checkRewritePath accepts what Kong's request-transformer can do: a full
// path, or a prefix replacement through the capture of the rest of the
// path in the route's path regex, in either router flavor (Gateway API
// admits ReplacePrefixMatch only on PathPrefix matches).
func (t *translator) checkRewritePath(p *gwv1.HTTPPathModifier) string {
	if p == nil {
		return ""
	}
	var value *string
	switch p.Type {
	case gwv1.FullPathHTTPPathModifier:
		value = p.ReplaceFullPath
	case gwv1.PrefixMatchHTTPPathModifier:
		value = p.ReplacePrefixMatch
	default:
		return fmt.Sprintf("filter URLRewrite with path type %s is not supported", p.Type)
	}
	if value == nil || !strings.HasPrefix(*value, "/") || strings.Contains(*value, "$(") {
		return fmt.Sprintf("filter URLRewrite with %s needs a path that starts with / and has no $(", p.Type)
	}
	return ""
}

// prefixRewrite is the replacement of a URLRewrite ReplacePrefixMatch
// filter, if the rule has one.
func (f ruleFilters) prefixRewrite() (string, bool) {
	for _, flt := range f.filters {
		if flt.Type == gwv1.HTTPRouteFilterURLRewrite && flt.URLRewrite != nil && flt.URLRewrite.Path != nil &&
			flt.URLRewrite.Path.Type == gwv1.PrefixMatchHTTPPathModifier && flt.URLRewrite.Path.ReplacePrefixMatch != nil {
			return *flt.URLRewrite.Path.ReplacePrefixMatch, true
		}
	}
	return "", false
}

// checkHeaderModifier checks that Kong's request-transformer or
// response-transformer takes the filter's headers as they are: Kong
// refuses a header name other than letters, digits, '-' and '_' (the
// Gateway API allows more), and control characters in a value; it drops
// the colons a value starts with (it reads a "name:value" pair as the name,
// every colon after it, then the value) and evaluates $( as a template. The
// response-transformer takes any name to remove (removeNames false).
func checkHeaderModifier(typ gwv1.HTTPRouteFilterType, m *gwv1.HTTPHeaderFilter, removeNames bool) string {
	var names []string
	if removeNames {
		names = slices.Clone(m.Remove)
	}
	for _, h := range append(slices.Clone(m.Set), m.Add...) {
		names = append(names, string(h.Name))
		switch {
		case strings.Contains(h.Value, "$("):
			return fmt.Sprintf("filter %s: header value %q contains $(, which Kong would evaluate as a template", typ, h.Value)
		case strings.HasPrefix(h.Value, ":"):
			return fmt.Sprintf("filter %s: header value %q starts with a colon, which Kong would drop", typ, h.Value)
		case strings.ContainsFunc(h.Value, isControl):
			return fmt.Sprintf("filter %s: header value %q has control characters, which Kong refuses", typ, h.Value)
		}
	}
	for _, n := range names {
		if !headerNamePattern.MatchString(n) {
			return fmt.Sprintf("filter %s: header name %q: Kong takes only letters, digits, '-' and '_' in a header name it sets or removes", typ, n)
		}
	}
	return ""
}

// isControl tells a character no header value may hold: a control
// character other than tab.
func isControl(r rune) bool { return (r < 0x20 && r != '\t') || r == 0x7f }

// plugins builds the Kong plugins of one Kong route: host is the route's
// hostname ("" for any), ports the listener ports it is served on.
func (f ruleFilters) plugins(routeName, host string, ports []int, m gwv1.HTTPRouteMatch, tags []string) []*declarative.Plugin {
	var out []*declarative.Plugin
	add := func(name string, config map[string]any) {
		out = append(out, &declarative.Plugin{ID: declarative.ID("plugin", routeName, name), Name: name, Config: config, Tags: tags})
	}
	var request map[string]any
	// The Lua chunks of the route's pre-function, by phase: a CORS
	// preflight is answered before a redirect.
	var access, headerFilter []string
	for _, flt := range f.filters {
		switch flt.Type {
		case gwv1.HTTPRouteFilterRequestHeaderModifier:
			request = mergeTransformer(request, headerTransformer(flt.RequestHeaderModifier))
		case gwv1.HTTPRouteFilterResponseHeaderModifier:
			add("response-transformer", headerTransformer(flt.ResponseHeaderModifier))
		case gwv1.HTTPRouteFilterURLRewrite:
			request = mergeTransformer(request, rewriteTransformer(flt.URLRewrite, m))
		case gwv1.HTTPRouteFilterRequestRedirect:
			if f.lua {
				access = append(access, redirectChunk(flt.RequestRedirect, m))
			} else {
				add("redirect", redirectConfig(flt.RequestRedirect, host, ports))
			}
		case gwv1.HTTPRouteFilterCORS:
			values := corsValues(flt.CORS)
			access = append([]string{values + corsAccessLua}, access...)
			headerFilter = append(headerFilter, values+corsHeaderFilterLua)
		}
	}
	if f.upstreamHost != "" {
		// Kong replaces Host even when absent and sends it as the SNI.
		request = mergeTransformer(request, map[string]any{"replace": map[string]any{"headers": []string{"host:" + f.upstreamHost}}})
	}
	if request != nil {
		add("request-transformer", request)
	}
	if len(access) > 0 || len(headerFilter) > 0 {
		// Kong runs one configuration of a plugin per request, the most
		// specific: this one replaces the global Host normalizer's, whose
		// access chunk (giving the upstream the client's Host) comes first.
		cfg := map[string]any{"access": append([]string{hostRestoreLua}, access...)}
		if len(headerFilter) > 0 {
			cfg["header_filter"] = headerFilter
		}
		add("pre-function", cfg)
	}
	slices.SortFunc(out, func(a, b *declarative.Plugin) int { return strings.Compare(a.Name, b.Name) })
	return out
}

// redirects tells whether the rule answers with a redirect.
func (f ruleFilters) redirects() bool {
	return slices.ContainsFunc(f.filters, func(flt gwv1.HTTPRouteFilter) bool {
		return flt.Type == gwv1.HTTPRouteFilterRequestRedirect
	})
}

// redirectKeepsHost tells whether Kong's redirect plugin would have to take
// its hostname from the request (which checkRedirectHosts must allow); the
// Lua redirect takes it from the request itself.
func (f ruleFilters) redirectKeepsHost() bool {
	return !f.lua && slices.ContainsFunc(f.filters, func(flt gwv1.HTTPRouteFilter) bool {
		return flt.Type == gwv1.HTTPRouteFilterRequestRedirect && flt.RequestRedirect != nil && flt.RequestRedirect.Hostname == nil
	})
}

// headerTransformer maps a header filter onto Kong's transformer plugins,
// which apply remove, replace (if present), add (if absent), append in that
// order: Gateway API "set" is replace plus add, "add" is append.
func headerTransformer(m *gwv1.HTTPHeaderFilter) map[string]any {
	cfg := map[string]any{}
	pairs := func(hs []gwv1.HTTPHeader) []string {
		out := make([]string, len(hs))
		for i, h := range hs {
			out[i] = string(h.Name) + ":" + h.Value
		}
		return out
	}
	if len(m.Remove) > 0 {
		cfg["remove"] = map[string]any{"headers": slices.Clone(m.Remove)}
	}
	if len(m.Set) > 0 {
		cfg["replace"] = map[string]any{"headers": pairs(m.Set)}
		cfg["add"] = map[string]any{"headers": pairs(m.Set)}
	}
	if len(m.Add) > 0 {
		cfg["append"] = map[string]any{"headers": pairs(m.Add)}
	}
	return cfg
}

func rewriteTransformer(r *gwv1.HTTPURLRewriteFilter, m gwv1.HTTPRouteMatch) map[string]any {
	replace := map[string]any{}
	if r.Hostname != nil {
		// Kong's request-transformer replaces Host even when the request
		// has none, which is what a rewrite needs.
		replace["headers"] = []string{"host:" + string(*r.Hostname)}
	}
	switch {
	case r.Path == nil:
	case r.Path.ReplaceFullPath != nil:
		replace["uri"] = *r.Path.ReplaceFullPath
	case r.Path.ReplacePrefixMatch != nil:
		// The route's path regex captures the rest of the path after the
		// matched prefix (prefixCapture); the template puts it after the
		// replacement.
		rest := strings.TrimSuffix(*r.Path.ReplacePrefixMatch, "/")
		if rest == "" {
			replace["uri"] = "/$(uri_captures[1])"
		} else {
			replace["uri"] = rest + "$(uri_captures[1])"
		}
	}
	return map[string]any{"replace": replace}
}

// prefixCapture is the path regex of a PathPrefix match whose prefix a
// rewrite replaces: group 1 is the rest of the path, without its leading
// slash when the replacement is "/" (so that "/" + rest is never "//").
// Both forms match whole segments only, as PathPrefix does.
func prefixCapture(prefix, replacement string) string {
	p := regexp.QuoteMeta(strings.TrimSuffix(prefix, "/"))
	if strings.TrimSuffix(replacement, "/") == "" {
		return "^" + p + "(?:/|$)(.*)$"
	}
	return "^" + p + "(/.*|)$"
}

// mergeTransformer joins two request-transformer configs: Kong allows one
// plugin of a name per route.
func mergeTransformer(a, b map[string]any) map[string]any {
	if a == nil {
		return b
	}
	for section, v := range b {
		bs := v.(map[string]any)
		as, ok := a[section].(map[string]any)
		if !ok {
			a[section] = bs
			continue
		}
		for key, val := range bs {
			if list, ok := val.([]string); ok {
				existing, _ := as[key].([]string)
				as[key] = append(slices.Clone(existing), list...)
			} else {
				as[key] = val
			}
		}
	}
	return a
}

// redirectConfig builds Kong's redirect plugin config, whose location is
// fixed: host is the route's exact hostname (checkRedirectHosts).
func redirectConfig(r *gwv1.HTTPRequestRedirectFilter, host string, ports []int) map[string]any {
	scheme := "http"
	if r.Scheme != nil {
		scheme = *r.Scheme
	}
	hostname := host
	if r.Hostname != nil {
		hostname = string(*r.Hostname)
	}
	authority := hostname
	switch {
	case r.Port != nil:
		if !defaultPort(scheme, int(*r.Port)) {
			authority = net.JoinHostPort(hostname, strconv.Itoa(int(*r.Port)))
		}
	case r.Scheme == nil && len(ports) == 1 && !defaultPort(scheme, ports[0]):
		authority = net.JoinHostPort(hostname, strconv.Itoa(ports[0]))
	}
	code := 302
	if r.StatusCode != nil {
		code = *r.StatusCode
	}
	cfg := map[string]any{"status_code": code, "location": scheme + "://" + authority, "keep_incoming_path": true}
	if r.Path != nil && r.Path.ReplaceFullPath != nil {
		cfg["location"] = scheme + "://" + authority + *r.Path.ReplaceFullPath
		cfg["keep_incoming_path"] = false
	}
	return cfg
}

func defaultPort(scheme string, port int) bool {
	return (scheme == "http" && port == 80) || (scheme == "https" && port == 443)
}

func headerNames(hs []gwv1.HTTPHeaderName) []string {
	out := make([]string, len(hs))
	for i, h := range hs {
		out[i] = string(h)
	}
	return out
}

// serviceTimeouts sets Kong's per-service timeouts from the rule's: Kong has
// no whole-request timeout, so backendRequest (else request) bounds each
// read and write to the backend.
func (f ruleFilters) serviceTimeouts(svc *declarative.Service) {
	if f.timeouts == nil {
		return
	}
	d := f.timeouts.BackendRequest
	if d == nil {
		d = f.timeouts.Request
	}
	if d == nil {
		return
	}
	parsed, _ := time.ParseDuration(string(*d))
	ms := int(min(parsed.Milliseconds(), maxKongTimeout))
	if ms <= 0 {
		ms = maxKongTimeout // "0s" disables the timeout: Kong's largest
	}
	svc.ReadTimeout, svc.WriteTimeout = ms, ms
}

const maxKongTimeout = 1<<31 - 2
