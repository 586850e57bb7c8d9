package kongdouble

import (
	"cmp"
	"fmt"
	"maps"
	"net/http"
	"net/netip"
	"net/url"
	"regexp"
	"slices"
	"sort"
	"strconv"
	"strings"
)

// Request describes a request arriving at one of Kong's proxy listeners.
type Request struct {
	ListenPort int    // the Kong listen port that accepted the connection (e.g. 8000)
	TLS        bool   // https / grpcs
	SNI        string // TLS server name
	Method     string // default GET
	Host       string // Host header, may include ":port"
	Path       string // may include "?query"
	Headers    http.Header
	SrcIP      string // client address, default 127.0.0.1
	SrcPort    int    // client port, default 40000
	DstIP      string // address the connection arrived on, default the listener's (127.0.0.1 for 0.0.0.0)
}

// Target is one upstream target with a positive weight.
type Target struct {
	Target string // "10.0.0.1:8080"
	Weight int
}

// Decision is what Kong would do with a request: which route matched and
// where it would proxy.
type Decision struct {
	RouteName, RouteID string
	ServiceName        string
	ServiceHost        string // an upstream name or a plain host
	ServicePort        int
	ServicePath        string
	UpstreamName       string   // "" when the service host is not an upstream
	Targets            []Target // the upstream's targets with weight > 0, sorted by Target
	StripPath          bool
	PreserveHost       bool
	Plugins            []map[string]any // route, service and global plugins that apply, in execution order
	// RedirectStatus is non-zero when Kong answers instead of proxying
	// because the route only accepts https/grpcs (426 or the route's
	// https_redirect_status_code).
	RedirectStatus int
	// TerminateTLS: on an ssl stream listen, the first match handed the
	// connection to Kong's TLS terminator (a "tls" route), not to the
	// passthrough block.
	TerminateTLS bool
}

type matcher struct {
	priority uint64
	id       string
	routeID  string // id differs for the parts of a route split by path kind
	route    map[string]any
	expr     exprNode
}

type router struct {
	matchers []matcher
	fields   map[string]int // fields the routes use -> number of routes using it
}

var streamProtocols = []any{"tcp", "tls", "udp", "tls_passthrough"}

func strList(v any) []string {
	seq, _ := asSeq(v)
	out := make([]string, 0, len(seq))
	for _, e := range seq {
		if s, ok := e.(string); ok {
			out = append(out, s)
		}
	}
	return out
}

func isStreamRoute(route map[string]any) bool {
	ps := strList(route["protocols"])
	return len(ps) > 0 && isOneOf(ps[0], streamProtocols)
}

// escapeStr is transform.lua's escape_str.
func escapeStr(s string) string {
	if !strings.Contains(s, `"#`) {
		return `r#"` + s + `"#`
	}
	s = strings.ReplaceAll(s, `\`, `\\`)
	return `"` + strings.ReplaceAll(s, `"`, `\"`) + `"`
}

func genForField(name string, vals []string, op func(string) string, val func(op, v string) string) string {
	if len(vals) == 0 {
		return ""
	}
	parts := make([]string, len(vals))
	for i, v := range vals {
		o := op(v)
		if val != nil {
			v = val(o, v)
		}
		parts[i] = fmt.Sprintf("%s %s %s", name, o, escapeStr(v))
	}
	return "(" + strings.Join(parts, " || ") + ")"
}

func constOp(op string) func(string) string { return func(string) string { return op } }

func genForNets(ipField, portField string, v any) string {
	seq, _ := asSeq(v)
	if len(seq) == 0 {
		return ""
	}
	var parts []string
	for _, e := range seq {
		m, _ := e.(map[string]any)
		var ip, port string
		if s, ok := m["ip"].(string); ok {
			// Kong masks IPv4 CIDRs only (parse_ip_addr has a FIXME for IPv6).
			if pfx, err := netip.ParsePrefix(s); err == nil && pfx.Addr().Is4() {
				ip = ipField + " in " + pfx.Masked().String()
			} else if err == nil {
				ip = ipField + " in " + s
			} else {
				ip = ipField + " == " + s
			}
		}
		if n, ok := m["port"].(float64); ok {
			port = portField + " == " + strconv.Itoa(int(n))
		}
		switch {
		case ip == "":
			parts = append(parts, port)
		case port == "":
			parts = append(parts, ip)
		default:
			parts = append(parts, "("+ip+" && "+port+")")
		}
	}
	return "(" + strings.Join(parts, " || ") + ")"
}

var reNamedGroup = regexp.MustCompile(`\?<`)

// compatExpression is transform.lua's get_expression for a route defined
// with traditional fields.
func compatExpression(route map[string]any) string {
	var parts []string
	if g := genForField("tls.sni", strList(route["snis"]), func(sni string) string {
		switch {
		case strings.HasPrefix(sni, "*"):
			return "=^"
		case strings.HasSuffix(sni, "*"):
			return "^="
		}
		return "=="
	}, func(op, sni string) string {
		if op == "^=" {
			return sni[:len(sni)-1]
		}
		if len(sni) > 1 && strings.HasSuffix(sni, ".") {
			sni = sni[:len(sni)-1]
		}
		if op == "=^" {
			sni = sni[1:]
		}
		return sni
	}); g != "" {
		proto := "https"
		if isStreamRoute(route) {
			proto = "tls"
		}
		parts = append(parts, `(net.protocol != r#"`+proto+`"# || `+g+")")
	}
	for _, n := range [][3]string{{"sources", "net.src.ip", "net.src.port"}, {"destinations", "net.dst.ip", "net.dst.port"}} {
		if g := genForNets(n[1], n[2], route[n[0]]); g != "" {
			parts = append(parts, g)
		}
	}
	if isStreamRoute(route) {
		return strings.Join(parts, " && ")
	}
	if g := genForField("http.method", strList(route["methods"]), constOp("=="), nil); g != "" {
		parts = append(parts, g)
	}
	if hosts := strList(route["hosts"]); len(hosts) > 0 {
		var hs []string
		for _, h := range hosts {
			host, port, hasPort := splitHostPort(h)
			op := "=="
			switch {
			case strings.HasPrefix(host, "*"):
				op, host = "=^", host[1:]
			case strings.HasSuffix(host, "*"):
				op, host = "^=", host[:len(host)-1]
			}
			e := `http.host ` + op + ` r#"` + host + `"#`
			if hasPort {
				e = "(" + e + " && net.dst.port == " + strconv.Itoa(port) + ")"
			}
			hs = append(hs, e)
		}
		parts = append(parts, "("+strings.Join(hs, " || ")+")")
	}
	if g := genForField("http.path", strList(route["paths"]), func(p string) string {
		if strings.HasPrefix(p, "~") {
			return "~"
		}
		return "^="
	}, func(op, p string) string {
		if op == "~" {
			return "^" + reNamedGroup.ReplaceAllString(p[1:], "?P<")
		}
		return p
	}); g != "" {
		parts = append(parts, g)
	}
	if headers, ok := route["headers"].(map[string]any); ok && len(headers) > 0 {
		var hs []string
		for _, name := range sortedKeys(headers) {
			field := "any(lower(http.headers." + strings.ReplaceAll(strings.ToLower(name), "-", "_") + "))"
			var vs []string
			for _, v := range strList(headers[name]) {
				op := "=="
				if strings.HasPrefix(v, "~*") {
					op, v = "~", v[2:]
				}
				vs = append(vs, field+" "+op+" "+escapeStr(strings.ToLower(v)))
			}
			hs = append(hs, "("+strings.Join(vs, " || ")+")")
		}
		parts = append(parts, strings.Join(hs, " && "))
	}
	return strings.Join(parts, " && ")
}

func isEmptyField(v any) bool {
	switch x := v.(type) {
	case nil:
		return true
	case []any:
		return len(x) == 0
	case map[string]any:
		return len(x) == 0
	}
	return false
}

const expressionOnlyBits = uint64(0xFF) << 56

// compatPriority is kong/router/transform.lua get_priority for an http route (paths
// already grouped so that they share one kind and length), as Kong 3.9 runs
// it under LuaJIT: its lshift_uint64 rebinds its uint64 cdata to the Lua
// number it is given, so weight, header count and regex_priority are
// shifted with the 32-bit bit.lshift (luaShift); only the plain-host and
// regex bits are uint64 cdata. bor then ORs in 64 bits, each number
// sign-extended (when no argument is cdata the 32-bit result reaches the
// router's uintptr_t priority through FFI, sign-extended the same way on
// x86-64): the three shifted fields overlap in bits 19-31 and a set bit 31
// (weight 4 or more, or regex_priority bit 12) sets every higher bit.
func compatPriority(route map[string]any) uint64 {
	weight := int64(0)
	for _, f := range []string{"sources", "destinations", "methods", "hosts", "snis"} {
		if !isEmptyField(route[f]) {
			weight++
		}
	}
	headers, _ := route["headers"].(map[string]any)
	headerCount := int64(min(len(headers), 255))
	if headerCount > 0 {
		weight++
	}
	_, hostsIsTable := asSeq(route["hosts"])
	plainHostOnly := hostsIsTable
	for _, h := range strList(route["hosts"]) {
		if strings.Contains(h, "*") {
			plainHostOnly = false
		}
	}
	uriLength, regexURL := 0, false
	if paths := strList(route["paths"]); len(paths) > 0 {
		weight++
		if strings.HasPrefix(paths[0], "~") {
			regexURL = true
		} else {
			uriLength = len(paths[0])
		}
	}
	regexPriority := int64(0)
	if regexURL {
		rp, _ := route["regex_priority"].(float64)
		regexPriority = int64(rp)
	}
	p := luaShift(weight, 61) | luaShift(headerCount, 52) | luaShift(regexPriority, 19) | uint64(uriLength&0x7FFFF)
	if plainHostOnly {
		p |= 1 << 60
	}
	if regexURL {
		p |= 1 << 51
	}
	return p
}

// luaShift is LuaJIT's bit.lshift of a Lua number (the value taken modulo
// 2^32, the count modulo 32, the result an int32) as bor widens it to 64
// bits: sign-extended.
func luaShift(v int64, n uint) uint64 {
	return uint64(int64(int32(uint32(v) << (n & 31))))
}

// groupPaths splits paths by kind and length, in order of first appearance,
// as the compat router does before computing priorities.
func groupPaths(paths []string) [][]string {
	var groups [][]string
	index := map[int]int{}
	for _, p := range paths {
		k := len(p)
		if strings.HasPrefix(p, "~") {
			k = -1
		}
		if i, ok := index[k]; ok {
			groups[i] = append(groups[i], p)
			continue
		}
		index[k] = len(groups)
		groups = append(groups, []string{p})
	}
	return groups
}

var reNetPort = regexp.MustCompile(`(net\.port)(\s*)([=><!])`)

func protocolClause(protocols []string) string {
	if len(protocols) == 1 && isOneOf(protocols[0], []any{"https", "tls", "tls_passthrough"}) {
		return ""
	}
	override := map[string]string{"tls_passthrough": "tcp", "grpc": "http", "grpcs": "https"}
	return genForField("net.protocol", protocols, constOp("=="), func(_, p string) string {
		if o, ok := override[p]; ok {
			return o
		}
		return p
	})
}

// routeExpression is the expression a route is validated with: its own
// expression (net.port amended) or the one derived from traditional fields.
func routeExpression(route map[string]any) string {
	if e, ok := route["expression"].(string); ok {
		if !strings.Contains(e, "net.port") {
			return e // what the replacement would return, without its cost
		}
		return reNetPort.ReplaceAllString(e, "net.dst.port$2$3")
	}
	return compatExpression(route)
}

var reSegmentSuffix = regexp.MustCompile(`^(0|[1-9]\d*)(_([1-9]\d*))?$`)

// validateRouteExpression is the routes schema's validate_route check.
func validateRouteExpression(in map[string]any) string {
	const prefix = "Router Expression failed validation: "
	const fieldsList = "'methods', 'hosts', 'paths', 'headers', 'snis', 'sources' or 'destinations'"
	exprEmpty := in["expression"] == nil
	othersEmpty := true
	for _, f := range []string{"snis", "sources", "destinations", "methods", "hosts", "paths", "headers"} {
		if !isEmptyField(in[f]) {
			othersEmpty = false
		}
	}
	rp, _ := in["regex_priority"].(float64)
	prio, _ := in["priority"].(float64)
	switch {
	case exprEmpty && othersEmpty:
		return ""
	case !exprEmpty && !othersEmpty:
		return prefix + "cannot set 'expression' with " + fieldsList + " simultaneously"
	case !exprEmpty && rp != 0:
		return prefix + "cannot set 'regex_priority' with 'expression' simultaneously"
	case !othersEmpty && prio != 0:
		return prefix + "cannot set 'priority' with " + fieldsList + " simultaneously"
	}
	schema := httpATCSchema
	if isStreamRoute(in) {
		schema = streamATCSchema
	}
	fields, msg := validateATC(schema, routeExpression(in))
	if msg != "" {
		return prefix + msg
	}
	for _, f := range fields {
		if suffix, ok := strings.CutPrefix(f, "http.path.segments."); ok && suffix != "len" {
			m := reSegmentSuffix.FindStringSubmatch(suffix)
			if m == nil || (m[2] != "" && atoi(m[1]) >= atoi(m[3])) {
				return prefix + "illformed http.path.segments.* field"
			}
		}
	}
	return ""
}

func atoi(s string) int {
	n, _ := strconv.Atoi(s)
	return n
}

// buildRouter compiles the loaded routes of one nginx subsystem (http, or
// stream when stream is true) into matchers ordered as the ATC router tries
// them: descending priority, then descending id. Like Kong's
// runloop/handler.lua new_router, each subsystem's router only holds the
// routes whose protocols belong to it, and a route whose service is
// disabled (enabled=false) is left out.
func buildRouter(l *loaded, flavor string, stream bool) *router {
	var routes []*compiledRoute
	for _, id := range l.sortedIDs("routes") {
		routes = append(routes, compileRoute(id, l.entities["routes"][id], flavor))
	}
	return updateRouter(nil, nil, routes, l, stream)
}

// updateRouter is buildRouter's answer for l, made from prev (the router
// of a load that differs from l by the routes in removed, keyed by id, and
// added) without touching prev, which may still be in use.
func updateRouter(prev *router, removed map[string]*compiledRoute, added []*compiledRoute, l *loaded, stream bool) *router {
	rt := &router{fields: map[string]int{}}
	var kept []matcher
	if prev != nil {
		rt.fields, kept = maps.Clone(prev.fields), prev.matchers
	}
	if len(removed) > 0 {
		dropped := map[string]bool{}
		kept = slices.DeleteFunc(slices.Clone(kept), func(m matcher) bool {
			if removed[m.routeID] == nil {
				return false
			}
			dropped[m.routeID] = true
			return true
		})
		for id := range dropped {
			for _, f := range removed[id].fields {
				if rt.fields[f]--; rt.fields[f] == 0 {
					delete(rt.fields, f)
				}
			}
		}
	}
	var in []matcher
	for _, cr := range added {
		if cr.stream != stream {
			continue
		}
		if svc := l.entities["services"][cr.service]; svc != nil && svc["enabled"] == false {
			continue
		}
		in = append(in, cr.matchers...)
		for _, f := range cr.fields {
			rt.fields[f]++
		}
	}
	slices.SortFunc(in, matcherOrder)
	rt.matchers = make([]matcher, 0, len(kept)+len(in))
	for len(kept) > 0 && len(in) > 0 {
		if matcherOrder(kept[0], in[0]) < 0 {
			rt.matchers, kept = append(rt.matchers, kept[0]), kept[1:]
		} else {
			rt.matchers, in = append(rt.matchers, in[0]), in[1:]
		}
	}
	rt.matchers = append(append(rt.matchers, kept...), in...)
	return rt
}

// matcherOrder is the order routes are tried in. No two matchers tie:
// their ids are distinct.
func matcherOrder(a, b matcher) int {
	if a.priority != b.priority {
		return cmp.Compare(b.priority, a.priority)
	}
	return strings.Compare(b.id, a.id)
}

// compiledRoute is what a route brings to its subsystem's router, whatever
// the other entities.
type compiledRoute struct {
	stream   bool
	service  string // its service's id
	matchers []matcher
	fields   []string
}

// compileRoute parses a route's expressions.
func compileRoute(id string, route map[string]any, flavor string) *compiledRoute {
	cr := &compiledRoute{stream: isStreamRoute(route), service: refID(route["service"])}
	fields := map[string]bool{}
	add := func(mid string, prio uint64, exp string) {
		n, err := parseATC(exp)
		if err != nil {
			return // only possible with the traditional flavor's PCRE-only regexes
		}
		collectFields(n, fields)
		cr.matchers = append(cr.matchers, matcher{priority: prio, id: mid, routeID: id, route: route, expr: n})
	}
	defer func() { cr.fields = slices.Sorted(maps.Keys(fields)) }()
	protocols := strList(route["protocols"])
	clause := ""
	if flavor == "expressions" {
		clause = protocolClause(protocols)
	}
	withClause := func(exp string) string {
		if clause == "" {
			return exp
		}
		return exp + " && " + clause
	}
	if _, ok := route["expression"].(string); ok {
		prio, _ := route["priority"].(float64)
		add(id, expressionOnlyBits|uint64(prio), withClause(routeExpression(route)))
		return cr
	}
	if cr.stream {
		add(id, streamPriority(route), withClause(compatExpression(route)))
		return cr
	}
	groups := groupPaths(strList(route["paths"]))
	if len(groups) <= 1 {
		add(id, compatPriority(route), withClause(compatExpression(route)))
		return cr
	}
	for i, g := range groups {
		split := map[string]any{}
		for k, v := range route {
			split[k] = v
		}
		paths := make([]any, len(g))
		for j, p := range g {
			paths[j] = p
		}
		split["paths"] = paths
		add(uuidV5(splitRouteNamespace, fmt.Sprintf("%s#%d", id, i+1)), compatPriority(split), withClause(compatExpression(split)))
	}
	return cr
}

func collectFields(n exprNode, into map[string]bool) {
	switch x := n.(type) {
	case logicalNode:
		collectFields(x.l, into)
		if x.r != nil {
			collectFields(x.r, into)
		}
	case predicateNode:
		into[x.field] = true
	}
}

// requestContext extracts the router fields from a request, as
// kong/router/fields.lua does.
func (d *Double) requestContext(req Request, fields map[string]int) atcContext {
	ctx := atcContext{}
	str := func(f, v string) { ctx[f] = []atcValue{{kind: vString, str: v}} }
	scheme := "http"
	if req.TLS {
		scheme = "https"
	}
	str("net.protocol", scheme)
	if req.TLS && req.SNI != "" {
		str("tls.sni", req.SNI)
	}
	method := req.Method
	if method == "" {
		method = http.MethodGet
	}
	str("http.method", method)

	hostHeader := req.Host
	if hostHeader == "" {
		hostHeader = req.Headers.Get("Host")
	}
	host, hostPort, hasPort := splitHostPort(hostHeader)
	if host != "" {
		str("http.host", host)
	}

	rawPath, rawQuery, _ := strings.Cut(req.Path, "?")
	if rawPath == "" {
		rawPath = "/"
	}
	path := normalizePath(rawPath)
	str("http.path", path)
	segments := strings.Split(strings.TrimPrefix(path, "/"), "/")
	ctx["http.path.segments.len"] = []atcValue{{kind: vInt, num: int64(len(segments))}}

	dstPort := d.hostPort(d.listenPort(req))
	if hasPort {
		dstPort = hostPort
	}
	ctx["net.dst.port"] = []atcValue{{kind: vInt, num: int64(dstPort)}}
	srcIP, srcPort, dstIP := req.SrcIP, req.SrcPort, req.DstIP
	if srcIP == "" {
		srcIP = "127.0.0.1"
	}
	if srcPort == 0 {
		srcPort = 40000
	}
	if dstIP == "" {
		dstIP = d.listenIP(d.listenPort(req))
	}
	ctx["net.src.port"] = []atcValue{{kind: vInt, num: int64(srcPort)}}
	if a, err := netip.ParseAddr(srcIP); err == nil {
		ctx["net.src.ip"] = []atcValue{{kind: vIP, ip: a}}
	}
	if a, err := netip.ParseAddr(dstIP); err == nil {
		ctx["net.dst.ip"] = []atcValue{{kind: vIP, ip: a}}
	}

	headers := map[string][]string{}
	for k, vs := range req.Headers {
		headers[strings.ToLower(k)] = append(headers[strings.ToLower(k)], vs...)
	}
	if hostHeader != "" && headers["host"] == nil {
		headers["host"] = []string{hostHeader}
	}
	queries, _ := url.ParseQuery(rawQuery)
	for f := range fields {
		switch {
		case strings.HasPrefix(f, "http.headers."):
			name := strings.TrimPrefix(f, "http.headers.")
			vs, ok := headers[name]
			if !ok {
				vs, ok = headers[strings.ReplaceAll(name, "_", "-")]
			}
			if ok {
				ctx[f] = stringValues(vs)
			}
		case strings.HasPrefix(f, "http.queries."):
			if vs, ok := queries[strings.TrimPrefix(f, "http.queries.")]; ok {
				ctx[f] = stringValues(vs)
			}
		case strings.HasPrefix(f, "http.path.segments.") && f != "http.path.segments.len":
			if v, ok := pathSegments(segments, strings.TrimPrefix(f, "http.path.segments.")); ok {
				str(f, v)
			}
		}
	}
	return ctx
}

func stringValues(vs []string) []atcValue {
	out := make([]atcValue, len(vs))
	for i, v := range vs {
		out[i] = atcValue{kind: vString, str: v}
	}
	return out
}

// pathSegments resolves http.path.segments.N and .N_M (0-based, M inclusive).
func pathSegments(segments []string, rng string) (string, bool) {
	a, b, isRange := strings.Cut(rng, "_")
	from, err := strconv.Atoi(a)
	if err != nil || from < 0 {
		return "", false
	}
	if !isRange {
		if from < len(segments) {
			return segments[from], true
		}
		return "", false
	}
	to, err := strconv.Atoi(b)
	if err != nil || from >= to || from > len(segments)-1 || to > len(segments)-1 {
		return "", false
	}
	return strings.Join(segments[from:to+1], "/"), true
}

// Route answers which route, service and upstream Kong would pick for req
// with the currently loaded configuration, after the rewrite phase of the
// global serverless plugins (which may change the Host the router reads).
// A request that such a plugin ends matches nothing.
func (d *Double) Route(req Request) (Decision, bool) {
	req, lr, exit := d.rewrite(req)
	if lr != nil {
		defer lr.close()
	}
	if exit != nil {
		return Decision{}, false
	}
	return d.route(req)
}

// rewrite runs the rewrite phase of the global pre-function and
// post-function plugins, in plugin order, as Kong's Kong.rewrite does
// before the router runs in access (only global plugins have a rewrite
// phase). lr carries the request's Lua state to the access phase; it is nil
// when no chunk ran.
func (d *Double) rewrite(req Request) (Request, *luaRequest, *kongExit) {
	d.mu.Lock()
	cfg := d.config
	d.mu.Unlock()
	if cfg == nil {
		return req, nil, nil
	}
	proto := "http"
	if req.TLS {
		proto = "https"
	}
	var lr *luaRequest
	for _, pl := range pluginsFor(cfg, "", "", func(protocols []string) bool { return containsStr(protocols, proto) }) {
		conf, _ := pl["config"].(map[string]any)
		if name := pl["name"]; (name != "pre-function" && name != "post-function") || len(strList(conf["rewrite"])) == 0 {
			continue
		}
		if lr == nil {
			lr = d.luaRequest(&req)
		}
		if exit := lr.runPhase(conf, "rewrite", d.opts.UntrustedLua); exit != nil {
			return req, lr, exit
		}
	}
	if lr != nil {
		req.Host = lr.host
		if !lr.hasHost {
			req.Headers.Del("Host")
		}
	}
	return req, lr, nil
}

// luaRequest starts the Lua state of req, whose headers it takes a copy of
// (ngx.req.set_header changes them).
func (d *Double) luaRequest(req *Request) *luaRequest {
	host := req.Host
	if host == "" {
		host = req.Headers.Get("Host")
	}
	req.Headers = req.Headers.Clone()
	if req.Headers == nil {
		req.Headers = http.Header{}
	}
	scheme := "http"
	if req.TLS {
		scheme = "https"
	}
	method := req.Method
	if method == "" {
		method = http.MethodGet
	}
	lr := newLuaRequest(host, req.Headers, scheme, method, req.Path, d.hostPort(req.ListenPort))
	lr.upstreamExists = func(name string) bool {
		d.mu.Lock()
		cfg := d.config
		d.mu.Unlock()
		if cfg == nil {
			return false
		}
		_, up := cfg.upstreamTargets(name)
		return up != ""
	}
	return lr
}

// route is Route without the rewrite phase.
func (d *Double) route(req Request) (Decision, bool) {
	d.mu.Lock()
	rt, cfg := d.router, d.config
	d.mu.Unlock()
	if rt == nil || cfg == nil {
		return Decision{}, false
	}
	ctx := d.requestContext(req, rt.fields)
	for _, m := range rt.matchers {
		if evalATC(m.expr, ctx) {
			return decide(cfg, m.route, req), true
		}
	}
	return Decision{}, false
}

func refID(v any) string {
	m, _ := v.(map[string]any)
	id, _ := m["id"].(string)
	return id
}

func decide(cfg *loaded, route map[string]any, req Request) Decision {
	dec, serviceID := routeDecision(cfg, route, false)
	protocols := strList(route["protocols"])
	switch {
	case !req.TLS && containsStr(protocols, "https") && !containsStr(protocols, "http"):
		code, _ := route["https_redirect_status_code"].(float64)
		dec.RedirectStatus = int(code)
	case !req.TLS && containsStr(protocols, "grpcs") && !containsStr(protocols, "grpc"):
		dec.RedirectStatus = http.StatusUpgradeRequired
	}
	dec.Plugins = applicablePlugins(cfg, dec.RouteID, serviceID, req, protocols)
	return dec
}

// subsystemOf is constants.PROTOCOLS_WITH_SUBSYSTEM: true for the stream
// subsystem's protocols.
func subsystemOf(protocol string) (stream bool) {
	return isOneOf(protocol, streamProtocols)
}

// routeDecision fills the route, service and upstream parts of a Decision.
// As in Kong's get_service_for_route, a service whose protocol belongs to
// the other subsystem is not attached to the route (the route is routed
// with no service), and its id is not returned.
func routeDecision(cfg *loaded, route map[string]any, stream bool) (Decision, string) {
	dec := Decision{}
	dec.RouteID, _ = route["id"].(string)
	dec.RouteName, _ = route["name"].(string)
	dec.StripPath, _ = route["strip_path"].(bool)
	dec.PreserveHost, _ = route["preserve_host"].(bool)
	serviceID := refID(route["service"])
	svc := cfg.entities["services"][serviceID]
	if proto, _ := svc["protocol"].(string); svc == nil || subsystemOf(proto) != stream {
		return dec, ""
	}
	dec.ServiceName, _ = svc["name"].(string)
	dec.ServiceHost, _ = svc["host"].(string)
	port, _ := svc["port"].(float64)
	dec.ServicePort = int(port)
	dec.ServicePath, _ = svc["path"].(string)
	dec.Targets, dec.UpstreamName = cfg.upstreamTargets(dec.ServiceHost)
	return dec, serviceID
}

// upstreamTargets lists the targets with a positive weight of the upstream
// called name, sorted; upstream is "" when there is no such upstream.
func (l *loaded) upstreamTargets(name string) (targets []Target, upstream string) {
	var ids []string
	targetByID := l.entities["targets"]
	if l.cached != nil {
		up := l.byKey["upstreams"][name]
		if up == nil {
			return nil, ""
		}
		ids = slices.Sorted(maps.Keys(l.targetsOf[up.id]))
	} else {
		uid := ""
		for _, id := range l.sortedIDs("upstreams") {
			if l.entities["upstreams"][id]["name"] == name {
				uid = id
			}
		}
		if uid == "" {
			return nil, ""
		}
		for _, id := range l.sortedIDs("targets") {
			if refID(targetByID[id]["upstream"]) == uid {
				ids = append(ids, id)
			}
		}
	}
	for _, id := range ids {
		t := targetByID[id]
		if w, _ := t["weight"].(float64); w > 0 {
			targets = append(targets, Target{Target: targetWithPort(t["target"].(string)), Weight: int(w)})
		}
	}
	sort.Slice(targets, func(i, j int) bool { return targets[i].Target < targets[j].Target })
	return targets, name
}

// targetWithPort adds the default target port (8000) Kong's balancer uses.
func targetWithPort(t string) string {
	h, err := normalizeIP(t)
	if err != "" {
		return t
	}
	port := 8000
	if h.hasPort {
		port = h.port
	}
	host := h.host
	if h.typ == "ipv6" {
		host = "[" + host + "]"
	}
	return host + ":" + strconv.Itoa(port)
}

// applicablePlugins keeps, per plugin name, the most specific enabled
// plugin (route+service > route > service > global) that runs for the
// request's protocol, ordered by handler priority.
func applicablePlugins(cfg *loaded, routeID, serviceID string, req Request, routeProtocols []string) []map[string]any {
	proto := "http"
	if req.TLS {
		proto = "https"
	}
	if !containsStr(routeProtocols, "http") && !containsStr(routeProtocols, "https") && (containsStr(routeProtocols, "grpc") || containsStr(routeProtocols, "grpcs")) {
		proto = map[bool]string{false: "grpc", true: "grpcs"}[req.TLS]
	}
	return pluginsFor(cfg, routeID, serviceID, func(protocols []string) bool { return containsStr(protocols, proto) })
}

// pluginsFor is applicablePlugins with the protocol test as a parameter.
func pluginsFor(cfg *loaded, routeID, serviceID string, runs func(pluginProtocols []string) bool) []map[string]any {
	best := map[string]map[string]any{}
	rank := map[string]int{}
	for _, id := range cfg.sortedIDs("plugins") {
		p := cfg.entities["plugins"][id]
		if p["enabled"] != true || refID(p["consumer"]) != "" || !runs(strList(p["protocols"])) {
			continue
		}
		r, s := refID(p["route"]), refID(p["service"])
		score := 0
		switch {
		case r != "" && s != "":
			if r != routeID || s != serviceID {
				continue
			}
			score = 3
		case r != "":
			if r != routeID {
				continue
			}
			score = 2
		case s != "":
			if s != serviceID || serviceID == "" {
				continue
			}
			score = 1
		}
		name, _ := p["name"].(string)
		if cur, ok := rank[name]; !ok || score > cur {
			best[name], rank[name] = p, score
		}
	}
	names := make([]string, 0, len(best))
	for n := range best {
		names = append(names, n)
	}
	sort.Slice(names, func(i, j int) bool {
		pi, pj := bundledPlugins[names[i]], bundledPlugins[names[j]]
		if pi != pj {
			return pi > pj
		}
		return names[i] < names[j]
	})
	out := make([]map[string]any, len(names))
	for i, n := range names {
		out[i] = cfg.stamped("plugins", best[n])
	}
	return out
}
