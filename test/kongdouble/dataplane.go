package kongdouble

import (
	"bytes"
	"context"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/tls"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"math/big"
	"net"
	"net/http"
	"net/http/httputil"
	"net/url"
	"regexp"
	"strconv"
	"strings"
	"sync"
	"time"
)

// The data plane: what Kong 3.9's proxy does with a real HTTP request once
// the router picked a route. It reuses the double's router (Route) and
// applies the plugins konglet emits the way Kong's bundled plugins do (read
// from kong/plugins/*/handler.lua around 3.9):
//
//   - access phase, in descending plugin priority: cors (2000: a preflight
//     is answered here), request-transformer (801), redirect (779: answers),
//     request-termination (2: answers);
//   - header_filter phase on every response, proxied or produced by a plugin:
//     cors (2000, skipped after a preflight it answered), response-transformer
//     (800);
//   - then the balancer picks a target of the service's upstream (weighted
//     round robin, Kong's default algorithm) and the request is proxied with
//     Kong's upstream_uri rules (strip_path, service path, path_handling v0)
//     and preserve_host. Connection failures are retried on the next target
//     up to the service's retries.
//
// Kong's own answers: 404 {"message":"no Route matched with those values"},
// 503 {"message":"failure to get a peer from the ring-balancer"} for an
// upstream without healthy targets, 502 {"message":"An invalid response was
// received from the upstream server"} when the upstream cannot be reached,
// 504 {"message":"The upstream server is timing out"} after read_timeout.

// Resolver maps an upstream target ("198.18.0.7:3000") to the address to
// dial; ok false means the target is unreachable (connection refused).
type Resolver func(target string) (addr string, ok bool)

// DataPlane proxies real HTTP requests the way the Kong double's config
// says. One DataPlane serves every proxy listen of its Double.
type DataPlane struct {
	d       *Double
	resolve Resolver

	mu         sync.Mutex
	rr         map[string]*wrrState // upstream name -> balancer state
	transports map[string]*http.Transport
	defaultTLS *tls.Certificate
	udp        map[string]*udpSession // listen port/client address -> session
	streams    map[io.Closer]struct{} // open stream connections, ended by Close
	closed     bool
}

// NewDataPlane returns the data plane of d. resolve may be nil: targets are
// then dialed as they are.
func NewDataPlane(d *Double, resolve Resolver) *DataPlane {
	return &DataPlane{d: d, resolve: resolve, rr: map[string]*wrrState{}, transports: map[string]*http.Transport{},
		udp: map[string]*udpSession{}, streams: map[io.Closer]struct{}{}}
}

// ServeProxy is the handler of the Kong proxy listen on listenPort, dialing
// targets as they are (see DataPlane for a resolver).
func (d *Double) ServeProxy(listenPort int, tls bool) http.Handler {
	return NewDataPlane(d, nil).Handler(listenPort, tls)
}

// kongExit is a response produced by Kong or one of its plugins.
type kongExit struct {
	status  int
	headers http.Header
	body    []byte
}

func jsonExit(status int, msg string) *kongExit {
	b, _ := json.Marshal(map[string]string{"message": msg})
	h := http.Header{}
	h.Set("Content-Type", "application/json; charset=utf-8")
	return &kongExit{status: status, headers: h, body: append(b, '\n')}
}

// defaultMessages are Kong's messages for kong.response.exit without one
// (kong/tools/http.lua get_default_exit_body).
var defaultMessages = map[int]string{
	http.StatusBadRequest: "Bad request", http.StatusUnauthorized: "Unauthorized", http.StatusForbidden: "Forbidden",
	http.StatusNotFound: "Not found", http.StatusMethodNotAllowed: "Method not allowed", http.StatusRequestTimeout: "Request timeout",
	http.StatusConflict: "Conflict", http.StatusRequestEntityTooLarge: "Request size limit exceeded",
	http.StatusUnsupportedMediaType: "Unsupported Media Type", http.StatusTooManyRequests: "API rate limit exceeded",
	http.StatusInternalServerError: "An unexpected error occurred", http.StatusBadGateway: "An invalid response was received from the upstream server",
	http.StatusServiceUnavailable: "The upstream server is currently unavailable", http.StatusGatewayTimeout: "The upstream server is timing out",
}

// Handler is the Kong proxy listen on listenPort (tls: an ssl listen; the
// caller terminates TLS, e.g. with TLSConfig).
func (p *DataPlane) Handler(listenPort int, tls bool) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		p.serve(w, r, listenPort, tls || r.TLS != nil)
	})
}

// requestFor builds the router's Request from a real request.
func requestFor(r *http.Request, listenPort int, isTLS bool) Request {
	req := Request{ListenPort: listenPort, TLS: isTLS, Method: r.Method, Host: r.Host, Path: r.RequestURI, Headers: r.Header.Clone()}
	if r.RequestURI == "" || !strings.HasPrefix(r.RequestURI, "/") {
		req.Path = r.URL.RequestURI()
	}
	if r.TLS != nil {
		req.SNI = r.TLS.ServerName
	}
	if host, port, err := net.SplitHostPort(r.RemoteAddr); err == nil {
		req.SrcIP = host
		req.SrcPort, _ = strconv.Atoi(port)
	}
	if a, ok := r.Context().Value(http.LocalAddrContextKey).(net.Addr); ok {
		if host, _, err := net.SplitHostPort(a.String()); err == nil {
			req.DstIP = host
		}
	}
	return req
}

// routeMatch is the matched route with what the ATC router reports for
// http.path: the matched part (for strip_path) and the regex captures (the
// request-transformer's uri_captures).
type routeMatch struct {
	dec      Decision
	matched  string
	captures []string
	named    map[string]string
}

func (p *DataPlane) match(req Request) (routeMatch, bool) {
	for range 3 {
		dec, ok := p.d.route(req)
		if !ok {
			return routeMatch{}, false
		}
		p.d.mu.Lock()
		rt := p.d.router
		p.d.mu.Unlock()
		if rt == nil {
			continue
		}
		ctx := p.d.requestContext(req, rt.fields)
		for _, m := range rt.matchers {
			if !evalATC(m.expr, ctx) {
				continue
			}
			if id, _ := m.route["id"].(string); id != dec.RouteID {
				break // the configuration changed in between: route again
			}
			rm := routeMatch{dec: dec}
			pathOf := ""
			if v := ctx["http.path"]; len(v) > 0 {
				pathOf = v[0].str
			}
			capturePath(m.expr, ctx, pathOf, &rm, false)
			return rm, true
		}
	}
	return routeMatch{}, false
}

// capturePath evaluates n like evalATC (short-circuit) and records the
// first http.path predicate that matched outside a negation.
func capturePath(n exprNode, ctx atcContext, path string, rm *routeMatch, negated bool) bool {
	switch x := n.(type) {
	case logicalNode:
		switch x.op {
		case "&&":
			return capturePath(x.l, ctx, path, rm, negated) && capturePath(x.r, ctx, path, rm, negated)
		case "||":
			return capturePath(x.l, ctx, path, rm, negated) || capturePath(x.r, ctx, path, rm, negated)
		}
		return !capturePath(x.l, ctx, path, rm, !negated)
	case predicateNode:
		ok := evalPredicate(x, ctx)
		if ok && !negated && x.field == "http.path" && !x.lower && rm.matched == "" && rm.captures == nil {
			switch x.op {
			case "~":
				if sm := x.rhs.re.FindStringSubmatchIndex(path); sm != nil {
					rm.matched = path[sm[0]:sm[1]]
					names := x.rhs.re.SubexpNames()
					rm.captures = []string{}
					for i := 1; i < len(sm)/2; i++ {
						v := ""
						if sm[2*i] >= 0 {
							v = path[sm[2*i]:sm[2*i+1]]
						}
						rm.captures = append(rm.captures, v)
						if names[i] != "" {
							if rm.named == nil {
								rm.named = map[string]string{}
							}
							rm.named[names[i]] = v
						}
					}
				}
			case "==", "^=":
				rm.matched = x.rhs.str
			}
		}
		return ok
	}
	return false
}

func (p *DataPlane) serve(w http.ResponseWriter, r *http.Request, listenPort int, isTLS bool) {
	start := time.Now()
	req, lr, exit := p.d.rewrite(requestFor(r, listenPort, isTLS))
	defer func() {
		if lr != nil {
			lr.close()
		}
	}()
	if exit != nil {
		writeExit(w, exit, p.d.opts.Version, start)
		return
	}
	rm, ok := p.match(req)
	if !ok {
		writeExit(w, jsonExit(http.StatusNotFound, "no Route matched with those values"), p.d.opts.Version, start)
		return
	}
	dec := rm.dec
	if dec.RedirectStatus != 0 {
		writeExit(w, protocolRedirect(dec.RedirectStatus, r), p.d.opts.Version, start)
		return
	}
	// The Host and headers as the rewrite phase left them: Kong's router
	// sets $upstream_host from $http_host for a preserve_host route.
	out := &upstreamRequest{
		method:  r.Method,
		headers: req.Headers.Clone(),
		host:    req.Host,
		fwdHost: forwardedHost(req.Host),
		fwdPort: strconv.Itoa(p.d.hostPort(listenPort)),
		path:    rawPath(r),
		query:   r.URL.RawQuery,
		hasArgs: r.URL.RawQuery != "" || r.URL.ForceQuery || strings.HasSuffix(r.RequestURI, "?"),
	}
	out.path = upstreamURI(dec, rm.matched, out.path)

	preflight := false
	for _, pl := range dec.Plugins {
		cfg, _ := pl["config"].(map[string]any)
		switch pl["name"] {
		case "pre-function", "post-function":
			if lr == nil {
				lr = p.d.luaRequest(&req)
			}
			exit = serverlessAccess(lr, cfg, dec, out, p.d.opts.UntrustedLua)
		case "cors":
			exit = corsAccess(cfg, r)
			preflight = exit != nil || isPreflight(r)
		case "request-transformer":
			if err := requestTransform(cfg, out, rm); err != nil {
				exit = jsonExit(http.StatusInternalServerError, "An unexpected error occurred")
			}
		case "redirect":
			exit = redirectAccess(cfg, r)
		case "request-termination":
			exit = terminationAccess(cfg)
		}
		if exit != nil {
			break
		}
	}
	headerFilter := func(h http.Header) {
		for _, pl := range dec.Plugins {
			cfg, _ := pl["config"].(map[string]any)
			switch pl["name"] {
			case "pre-function", "post-function":
				if len(strList(cfg["header_filter"])) == 0 {
					continue
				}
				if lr == nil {
					lr = p.d.luaRequest(&req)
				}
				// Kong logs an error in header_filter; the response goes on.
				lr.respHeaders = h
				_ = lr.runPhase(cfg, "header_filter", p.d.opts.UntrustedLua)
				lr.respHeaders = nil
			case "cors":
				if !preflight {
					corsHeaderFilter(cfg, r, h)
				}
			case "response-transformer":
				responseTransform(cfg, h)
			}
		}
	}
	if exit != nil {
		headerFilter(exit.headers)
		writeExit(w, exit, p.d.opts.Version, start)
		return
	}
	if lr != nil && lr.upstream != "" {
		// kong.service.set_upstream: the balancer picks from that one.
		p.d.mu.Lock()
		cfg := p.d.config
		p.d.mu.Unlock()
		dec.Targets, dec.UpstreamName = cfg.upstreamTargets(lr.upstream)
	}
	p.proxy(w, r, dec, out, headerFilter, start)
}

// serverlessAccess runs a serverless plugin's access phase between Kong's
// access.before (the router set $upstream_host for a preserve_host route)
// and access.after (a non-empty $upstream_host is the upstream Host).
func serverlessAccess(lr *luaRequest, cfg map[string]any, dec Decision, out *upstreamRequest, untrustedLua string) *kongExit {
	lr.upstreamHost = ""
	if dec.PreserveHost || out.hostSet {
		lr.upstreamHost = out.host
	}
	lr.headers = out.headers
	exit := lr.runPhase(cfg, "access", untrustedLua)
	if lr.upstreamHost != "" {
		out.host, out.hostSet = lr.upstreamHost, true
	}
	return exit
}

func rawPath(r *http.Request) string {
	if r.RequestURI != "" && strings.HasPrefix(r.RequestURI, "/") {
		path, _, _ := strings.Cut(r.RequestURI, "?")
		return path
	}
	return r.URL.EscapedPath()
}

func writeExit(w http.ResponseWriter, e *kongExit, version string, start time.Time) {
	for k, vs := range e.headers {
		w.Header()[k] = vs
	}
	w.Header().Set("Server", "kong/"+version)
	w.Header().Set("X-Kong-Response-Latency", strconv.FormatInt(time.Since(start).Milliseconds(), 10))
	w.Header().Set("Content-Length", strconv.Itoa(len(e.body)))
	w.WriteHeader(e.status)
	_, _ = w.Write(e.body)
}

// protocolRedirect answers a plain-http request on an https-only route
// (kong/runloop/handler.lua: 426 or the route's https_redirect_status_code).
func protocolRedirect(status int, r *http.Request) *kongExit {
	if status == http.StatusUpgradeRequired {
		e := jsonExit(status, "Please use HTTPS protocol")
		e.headers.Set("Connection", "Upgrade")
		e.headers.Set("Upgrade", "TLS/1.2, HTTP/1.1")
		return e
	}
	host, _, err := net.SplitHostPort(r.Host)
	if err != nil {
		host = r.Host
	}
	e := &kongExit{status: status, headers: http.Header{}}
	e.headers.Set("Location", "https://"+host+r.RequestURI)
	return e
}

// upstreamRequest is what Kong sends to the service, as plugins change it.
type upstreamRequest struct {
	method  string
	headers http.Header
	host    string // the Host header when preserve_host (or set by a plugin)
	hostSet bool   // a plugin set the upstream Host
	// fwdHost and fwdPort are X-Forwarded-Host and -Port: nginx's $host
	// once the rewrite phase ran, and the port the connection reached.
	fwdHost, fwdPort string
	path             string // upstream_uri without the query
	query            string
	hasArgs          bool
}

// upstreamURI is Kong's upstream_uri for path_handling v0
// (kong/router/utils.lua get_upstream_uri_v0), without the query.
func upstreamURI(dec Decision, matched, reqPath string) string {
	base := dec.ServicePath
	if base == "" {
		base = "/"
	}
	postfix := reqPath
	if dec.StripPath && matched != "" && strings.HasPrefix(reqPath, matched) {
		postfix = reqPath[len(matched):]
	} else if dec.StripPath {
		postfix = reqPath
	}
	if strings.HasSuffix(base, "/") {
		if dec.StripPath && matched != "" {
			switch {
			case postfix == "":
				switch {
				case base == "/":
					return "/"
				case strings.HasSuffix(reqPath, "/"):
					return base
				default:
					return base[:len(base)-1]
				}
			case strings.HasPrefix(postfix, "/"):
				return base[:len(base)-1] + postfix
			default:
				return base + postfix
			}
		}
		return base + strings.TrimPrefix(reqPath, "/")
	}
	if dec.StripPath && matched != "" {
		switch {
		case postfix == "":
			return base
		case strings.HasPrefix(postfix, "/"):
			return base + postfix
		default:
			return base + "/" + postfix
		}
	}
	return base + reqPath
}

// ---- request-transformer ----

var reConfEntry = regexp.MustCompile(`^([^:]+):*(.*)$`)

// confPair splits a "name:value" entry as the plugins' iter() does with
// the Lua pattern ^([^:]+):*(.-)$ (every colon after the name is dropped).
func confPair(entry string) (name, value string, ok bool) {
	m := reConfEntry.FindStringSubmatch(entry)
	if m == nil {
		return "", "", false
	}
	return m[1], m[2], true
}

func confStrings(cfg map[string]any, section, key string) []string {
	s, _ := cfg[section].(map[string]any)
	return strList(s[key])
}

var reTemplate = regexp.MustCompile(`\$\((.*?)\)`)

// renderTemplate renders the request-transformer's $(...) templates the
// double knows: uri_captures[n] / uri_captures.name / uri_captures["name"],
// headers.name / headers["name"], query_params.name / query_params["name"].
func renderTemplate(tpl string, out *upstreamRequest, rm routeMatch, query url.Values) (string, error) {
	var err error
	res := reTemplate.ReplaceAllStringFunc(tpl, func(s string) string {
		expr := strings.TrimSpace(s[2 : len(s)-1])
		obj, key, ok := splitIndex(expr)
		if !ok {
			err = fmt.Errorf("unsupported template %q", expr)
			return ""
		}
		switch obj {
		case "uri_captures":
			if n, convErr := strconv.Atoi(key); convErr == nil {
				if n == 0 {
					return rm.matched
				}
				if n >= 1 && n <= len(rm.captures) {
					return rm.captures[n-1]
				}
				return ""
			}
			return rm.named[key]
		case "headers":
			return out.headers.Get(key)
		case "query_params":
			return query.Get(key)
		}
		err = fmt.Errorf("unsupported template %q", expr)
		return ""
	})
	return res, err
}

var reIndex = regexp.MustCompile(`^([a-z_]+)(?:\[\s*(?:"([^"]*)"|'([^']*)'|(\d+))\s*\]|\.([A-Za-z0-9_]+))$`)

func splitIndex(expr string) (string, string, bool) {
	m := reIndex.FindStringSubmatch(expr)
	if m == nil {
		return "", "", false
	}
	for _, k := range m[2:] {
		if k != "" {
			return m[1], k, true
		}
	}
	return m[1], "", true
}

// requestTransform is request-transformer's access phase for headers,
// querystring and replace.uri (body transforms are not emitted by konglet).
func requestTransform(cfg map[string]any, out *upstreamRequest, rm routeMatch) error {
	query, _ := url.ParseQuery(out.query)
	render := func(v string) (string, error) { return renderTemplate(v, out, rm, query) }
	h := out.headers
	present := func(name string) bool {
		if strings.EqualFold(name, "host") {
			return true
		}
		_, ok := h[http.CanonicalHeaderKey(name)]
		return ok
	}
	for _, e := range confStrings(cfg, "remove", "headers") {
		h.Del(e)
	}
	for _, e := range confStrings(cfg, "rename", "headers") {
		if old, nw, ok := confPair(e); ok && nw != "" {
			if vs, found := h[http.CanonicalHeaderKey(old)]; found && !strings.EqualFold(old, "host") {
				h.Del(old)
				h[http.CanonicalHeaderKey(nw)] = vs
			}
		}
	}
	for _, e := range confStrings(cfg, "replace", "headers") {
		name, value, ok := confPair(e)
		if !ok || !present(name) {
			continue
		}
		v, err := render(value)
		if err != nil {
			return err
		}
		if strings.EqualFold(name, "host") {
			out.host, out.hostSet = v, true
			continue
		}
		h.Set(name, v)
	}
	for _, e := range confStrings(cfg, "add", "headers") {
		name, value, ok := confPair(e)
		if !ok || strings.EqualFold(name, "host") || present(name) {
			continue
		}
		v, err := render(value)
		if err != nil {
			return err
		}
		h.Set(name, v)
	}
	for _, e := range confStrings(cfg, "append", "headers") {
		name, value, ok := confPair(e)
		if !ok || strings.EqualFold(name, "host") {
			continue
		}
		v, err := render(value)
		if err != nil {
			return err
		}
		h.Add(name, v)
	}
	queryChanged := false
	for _, e := range confStrings(cfg, "remove", "querystring") {
		if _, ok := query[e]; ok {
			query.Del(e)
			queryChanged = true
		}
	}
	for _, e := range confStrings(cfg, "replace", "querystring") {
		if name, value, ok := confPair(e); ok && query.Has(name) {
			query.Set(name, value)
			queryChanged = true
		}
	}
	for _, e := range confStrings(cfg, "add", "querystring") {
		if name, value, ok := confPair(e); ok && !query.Has(name) {
			query.Set(name, value)
			queryChanged = true
		}
	}
	for _, e := range confStrings(cfg, "append", "querystring") {
		if name, value, ok := confPair(e); ok {
			query.Add(name, value)
			queryChanged = true
		}
	}
	if queryChanged {
		out.query = query.Encode()
		out.hasArgs = true
	}
	if rep, _ := cfg["replace"].(map[string]any); rep != nil {
		if uri, ok := rep["uri"].(string); ok {
			v, err := render(uri)
			if err != nil {
				return err
			}
			out.path = v
		}
	}
	return nil
}

// ---- response-transformer (headers) ----

func responseTransform(cfg map[string]any, h http.Header) {
	for _, e := range confStrings(cfg, "remove", "headers") {
		h.Del(e)
	}
	for _, e := range confStrings(cfg, "rename", "headers") {
		if old, nw, ok := confPair(e); ok && nw != "" {
			if vs, found := h[http.CanonicalHeaderKey(old)]; found {
				h.Del(old)
				h[http.CanonicalHeaderKey(nw)] = vs
			}
		}
	}
	for _, e := range confStrings(cfg, "replace", "headers") {
		if name, value, ok := confPair(e); ok && h.Get(name) != "" {
			h.Set(name, value)
		}
	}
	for _, e := range confStrings(cfg, "add", "headers") {
		if name, value, ok := confPair(e); ok && h.Get(name) == "" {
			h.Add(name, value)
		}
	}
	for _, e := range confStrings(cfg, "append", "headers") {
		if name, value, ok := confPair(e); ok {
			h.Add(name, value)
		}
	}
}

// ---- redirect (Kong 3.9) ----

func redirectAccess(cfg map[string]any, r *http.Request) *kongExit {
	location, _ := cfg["location"].(string)
	if keep, _ := cfg["keep_incoming_path"].(bool); keep {
		if u, err := url.Parse(location); err == nil {
			u.Path, u.RawPath = r.URL.Path, r.URL.RawPath
			u.RawQuery = r.URL.RawQuery
			location = u.String()
		}
	}
	status := 301
	if s, ok := cfg["status_code"].(float64); ok {
		status = int(s)
	}
	e := &kongExit{status: status, headers: http.Header{}, body: []byte("redirecting")}
	e.headers.Set("Location", location)
	return e
}

// ---- request-termination ----

func terminationAccess(cfg map[string]any) *kongExit {
	status := 503
	if s, ok := cfg["status_code"].(float64); ok {
		status = int(s)
	}
	if body, ok := cfg["body"].(string); ok {
		ct, _ := cfg["content_type"].(string)
		if ct == "" {
			ct = "application/json; charset=utf-8"
		}
		e := &kongExit{status: status, headers: http.Header{}, body: []byte(body)}
		e.headers.Set("Content-Type", ct)
		return e
	}
	msg, ok := cfg["message"].(string)
	if !ok {
		msg = defaultMessages[status]
	}
	if msg == "" {
		return &kongExit{status: status, headers: http.Header{}}
	}
	return jsonExit(status, msg)
}

// ---- cors ----

func isPreflight(r *http.Request) bool {
	return r.Method == http.MethodOptions && r.Header.Get("Origin") != "" && r.Header.Get("Access-Control-Request-Method") != ""
}

type normalizedOrigin struct{ domain, host string }

func normalizeOrigin(o string) normalizedOrigin {
	u, err := url.Parse(o)
	if err != nil || u.Host == "" {
		return normalizedOrigin{domain: o, host: o}
	}
	host, port := u.Hostname(), u.Port()
	if (u.Scheme == "http" && port == "80") || (u.Scheme == "https" && port == "443") {
		port = ""
	}
	d := ""
	if u.Scheme != "" {
		d = u.Scheme + "://"
	}
	d += host
	if port != "" {
		d += ":" + port
	}
	return normalizedOrigin{domain: d, host: host}
}

var reOriginPlain = regexp.MustCompile(`^[A-Za-z0-9.:/-]+$`)
var reOriginSpecial = regexp.MustCompile(`[^A-Za-z0-9.:/-]`)

// corsOrigin is configure_origin: it sets Access-Control-Allow-Origin (and
// Vary) on h and says whether every origin is allowed.
func corsOrigin(cfg map[string]any, reqOrigin string, h http.Header, headerFilter bool) bool {
	origins := strList(cfg["origins"])
	if len(origins) == 0 || (len(origins) == 1 && origins[0] == "*") {
		h.Set("Access-Control-Allow-Origin", "*")
		return true
	}
	if headerFilter {
		h.Add("Vary", "Origin")
	} else {
		h.Set("Vary", "Origin")
	}
	if len(origins) == 1 && reOriginPlain.MatchString(origins[0]) {
		h.Set("Access-Control-Allow-Origin", origins[0])
		return false
	}
	if reqOrigin != "" {
		req := normalizeOrigin(reqOrigin)
		for _, entry := range origins {
			if entry == "*" {
				h.Set("Access-Control-Allow-Origin", "*")
				return true
			}
			byHost := !strings.Contains(entry, ":")
			found := false
			if reOriginSpecial.MatchString(entry) {
				re := entry
				if !strings.HasSuffix(re, "$") {
					re += "$"
				}
				re = strings.TrimPrefix(re, "^")
				subject := req.domain
				if byHost {
					subject = req.host
				}
				if compiled, err := regexp.Compile("^(?:" + re + ")"); err == nil {
					found = compiled.MatchString(subject)
				}
			} else {
				found = req.domain == normalizeOrigin(entry).domain
			}
			if found {
				h.Set("Access-Control-Allow-Origin", req.domain)
				return false
			}
		}
	}
	h.Del("Access-Control-Allow-Origin")
	return false
}

func corsCredentials(cfg map[string]any, allowAll bool, reqOrigin string, h http.Header, headerFilter bool) {
	if c, _ := cfg["credentials"].(bool); !c {
		return
	}
	if !allowAll {
		h.Set("Access-Control-Allow-Credentials", "true")
		return
	}
	if reqOrigin != "" {
		if headerFilter {
			h.Add("Vary", "Origin")
		} else {
			h.Set("Vary", "Origin")
		}
		h.Set("Access-Control-Allow-Origin", reqOrigin)
		h.Set("Access-Control-Allow-Credentials", "true")
	}
}

// corsAccess answers a preflight (unless preflight_continue).
func corsAccess(cfg map[string]any, r *http.Request) *kongExit {
	if !isPreflight(r) {
		return nil
	}
	if c, _ := cfg["preflight_continue"].(bool); c {
		return nil
	}
	origin := r.Header.Get("Origin")
	h := http.Header{}
	allowAll := corsOrigin(cfg, origin, h, false)
	corsCredentials(cfg, allowAll, origin, h, false)
	if hs := strList(cfg["headers"]); len(hs) > 0 {
		h.Set("Access-Control-Allow-Headers", strings.Join(hs, ","))
	} else if acrh := r.Header.Get("Access-Control-Request-Headers"); acrh != "" {
		h.Set("Access-Control-Allow-Headers", acrh)
	}
	methods := "GET,HEAD,PUT,PATCH,POST,DELETE,OPTIONS,TRACE,CONNECT"
	if ms, ok := cfg["methods"]; ok && ms != nil {
		methods = strings.Join(strList(ms), ",")
	}
	h.Set("Access-Control-Allow-Methods", methods)
	if ma, ok := cfg["max_age"].(float64); ok {
		h.Set("Access-Control-Max-Age", strconv.FormatFloat(ma, 'f', -1, 64))
	}
	if pn, _ := cfg["private_network"].(bool); pn && r.Header.Get("Access-Control-Request-Private-Network") == "true" {
		h.Set("Access-Control-Allow-Private-Network", "true")
	}
	return &kongExit{status: http.StatusOK, headers: h}
}

func corsHeaderFilter(cfg map[string]any, r *http.Request, h http.Header) {
	origin := r.Header.Get("Origin")
	if absent, _ := cfg["allow_origin_absent"].(bool); origin == "" && !absent {
		return
	}
	allowAll := corsOrigin(cfg, origin, h, true)
	corsCredentials(cfg, allowAll, origin, h, true)
	if eh := strList(cfg["exposed_headers"]); len(eh) > 0 {
		h.Set("Access-Control-Expose-Headers", strings.Join(eh, ","))
	}
}

// ---- balancer ----

// wrrState is a smooth weighted round robin over one upstream's targets.
type wrrState struct {
	key     string
	current map[string]int
}

// order returns the targets in the order to try them: the balancer's pick
// first, then the others (Kong retries on the next peer).
func (p *DataPlane) order(upstream string, targets []Target) []Target {
	if len(targets) <= 1 {
		return targets
	}
	var key strings.Builder
	total := 0
	for _, t := range targets {
		fmt.Fprintf(&key, "%s=%d;", t.Target, t.Weight)
		total += t.Weight
	}
	p.mu.Lock()
	st := p.rr[upstream]
	if st == nil || st.key != key.String() {
		st = &wrrState{key: key.String(), current: map[string]int{}}
		p.rr[upstream] = st
	}
	best := -1
	for i, t := range targets {
		st.current[t.Target] += t.Weight
		if best < 0 || st.current[t.Target] > st.current[targets[best].Target] {
			best = i
		}
	}
	st.current[targets[best].Target] -= total
	p.mu.Unlock()
	out := make([]Target, 0, len(targets))
	for i := range targets {
		out = append(out, targets[(best+i)%len(targets)])
	}
	return out
}

// serviceEntity returns the loaded service of a decision.
func (p *DataPlane) serviceEntity(name string) map[string]any {
	p.d.mu.Lock()
	defer p.d.mu.Unlock()
	if p.d.config == nil {
		return nil
	}
	for _, id := range p.d.config.sortedIDs("services") {
		if s := p.d.config.entities["services"][id]; s["name"] == name {
			return s
		}
	}
	return nil
}

func msField(svc map[string]any, key string) time.Duration {
	v, ok := svc[key].(float64)
	if !ok || v <= 0 {
		v = 60000
	}
	return time.Duration(v) * time.Millisecond
}

func (p *DataPlane) transport(protocol string, connect, read time.Duration, up upstreamTLS) *http.Transport {
	key := fmt.Sprintf("%s/%d/%d/%s", protocol, connect, read, up.key)
	p.mu.Lock()
	defer p.mu.Unlock()
	if t := p.transports[key]; t != nil {
		return t
	}
	t := &http.Transport{
		DialContext: func(ctx context.Context, network, addr string) (net.Conn, error) {
			return (&net.Dialer{Timeout: connect}).DialContext(ctx, network, addr)
		},
		ResponseHeaderTimeout: read,
		MaxIdleConnsPerHost:   16,
		IdleConnTimeout:       60 * time.Second,
		TLSClientConfig:       up.config(),
	}
	if protocol == "grpc" {
		protos := new(http.Protocols)
		protos.SetUnencryptedHTTP2(true)
		t.Protocols = protos
	}
	if protocol == "grpcs" {
		protos := new(http.Protocols)
		protos.SetHTTP2(true)
		t.Protocols = protos
	}
	p.transports[key] = t
	return t
}

// Close releases idle upstream connections and ends stream sessions.
func (p *DataPlane) Close() {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.closed = true
	for _, t := range p.transports {
		t.CloseIdleConnections()
	}
	for c := range p.streams {
		_ = c.Close()
	}
}

var errUnreachable = errors.New("connection refused")

func (p *DataPlane) proxy(w http.ResponseWriter, r *http.Request, dec Decision, out *upstreamRequest, headerFilter func(http.Header), start time.Time) {
	version := p.d.opts.Version
	svc := p.serviceEntity(dec.ServiceName)
	if svc == nil {
		// a route without a service: Kong answers 503 (no service)
		e := jsonExit(http.StatusServiceUnavailable, "no Service found with those values")
		headerFilter(e.headers)
		writeExit(w, e, version, start)
		return
	}
	protocol, _ := svc["protocol"].(string)
	var targets []Target
	if dec.UpstreamName != "" {
		if len(dec.Targets) == 0 {
			e := jsonExit(http.StatusServiceUnavailable, "failure to get a peer from the ring-balancer")
			headerFilter(e.headers)
			writeExit(w, e, version, start)
			return
		}
		targets = p.order(dec.UpstreamName, dec.Targets)
	} else {
		targets = []Target{{Target: net.JoinHostPort(dec.ServiceHost, strconv.Itoa(dec.ServicePort)), Weight: 100}}
	}
	retries := 5
	if rv, ok := svc["retries"].(float64); ok {
		retries = int(rv)
	}
	scheme := "http"
	if protocol == "https" || protocol == "grpcs" {
		scheme = "https"
	}

	var body []byte
	if r.Body != nil && r.Body != http.NoBody && r.Header.Get("Upgrade") == "" {
		body, _ = io.ReadAll(r.Body)
	}
	var lastErr error
	for attempt := 0; attempt <= retries && attempt < len(targets)*(retries+1); attempt++ {
		target := targets[attempt%len(targets)]
		addr := target.Target
		if p.resolve != nil {
			resolved, ok := p.resolve(addr)
			if !ok {
				lastErr = errUnreachable
				continue
			}
			addr = resolved
		}
		host := out.host
		if !dec.PreserveHost && !out.hostSet {
			host = target.Target
			if h, port, err := net.SplitHostPort(target.Target); err == nil && (port == "80" || port == "443") {
				host = h
			}
		}
		upURL := &url.URL{Scheme: scheme, Host: addr, RawQuery: out.query, ForceQuery: out.hasArgs && out.query == ""}
		if unescaped, err := url.PathUnescape(out.path); err == nil {
			upURL.Path, upURL.RawPath = unescaped, out.path
		} else {
			upURL.Path = out.path
		}
		tr := p.transport(protocol, msField(svc, "connect_timeout"), msField(svc, "read_timeout"), p.serviceTLS(svc, host))
		req := r.Clone(r.Context())
		req.URL = upURL
		req.RequestURI = ""
		req.Host = host
		req.Header = forwardedHeaders(r, out)
		if body != nil {
			req.Body = io.NopCloser(bytes.NewReader(body))
			req.ContentLength = int64(len(body))
		}
		if r.Header.Get("Upgrade") != "" {
			// WebSocket and other upgrades: one attempt through ReverseProxy.
			p.upgrade(w, req, tr, headerFilter, version)
			return
		}
		upStart := time.Now()
		res, err := tr.RoundTrip(req)
		if err != nil {
			lastErr = err
			var ne net.Error
			if errors.As(err, &ne) && ne.Timeout() && !isDialError(err) {
				break
			}
			if isDialError(err) {
				continue
			}
			break
		}
		defer res.Body.Close()
		h := w.Header()
		for k, vs := range res.Header {
			if isHopByHop(k) {
				continue
			}
			h[k] = vs
		}
		h.Add("Via", "1.1 kong/"+version)
		h.Set("X-Kong-Upstream-Latency", strconv.FormatInt(time.Since(upStart).Milliseconds(), 10))
		h.Set("X-Kong-Proxy-Latency", strconv.FormatInt(upStart.Sub(start).Milliseconds(), 10))
		headerFilter(h)
		w.WriteHeader(res.StatusCode)
		if f, ok := w.(http.Flusher); ok && (protocol == "grpc" || protocol == "grpcs") {
			f.Flush()
		}
		_, _ = io.Copy(w, res.Body)
		for k, vs := range res.Trailer {
			for _, v := range vs {
				w.Header().Add(http.TrailerPrefix+k, v)
			}
		}
		return
	}
	var e *kongExit
	var ne net.Error
	switch {
	case errors.As(lastErr, &ne) && ne.Timeout() && !isDialError(lastErr):
		e = jsonExit(http.StatusGatewayTimeout, "The upstream server is timing out")
	default:
		e = jsonExit(http.StatusBadGateway, "An invalid response was received from the upstream server")
	}
	headerFilter(e.headers)
	writeExit(w, e, version, start)
}

func (p *DataPlane) upgrade(w http.ResponseWriter, req *http.Request, tr *http.Transport, headerFilter func(http.Header), version string) {
	rp := &httputil.ReverseProxy{
		Rewrite: func(pr *httputil.ProxyRequest) {
			pr.Out.URL = req.URL
			pr.Out.Host = req.Host
			pr.Out.Header = req.Header
		},
		Transport: tr,
		ModifyResponse: func(res *http.Response) error {
			res.Header.Add("Via", "1.1 kong/"+version)
			headerFilter(res.Header)
			return nil
		},
	}
	rp.ServeHTTP(w, req)
}

func isDialError(err error) bool {
	var oe *net.OpError
	return errors.Is(err, errUnreachable) || (errors.As(err, &oe) && oe.Op == "dial")
}

var hopByHop = []string{"Connection", "Keep-Alive", "Proxy-Connection", "Transfer-Encoding", "Upgrade", "Te", "Trailer"}

func isHopByHop(k string) bool {
	for _, h := range hopByHop {
		if strings.EqualFold(h, k) {
			return true
		}
	}
	return false
}

// forwardedHeaders are the request headers Kong sends upstream: the
// client's (after plugins) with X-Forwarded-* and X-Real-IP set
// (kong/runloop/handler.lua access.before/after, trusted_ips empty: the
// host is $host, the port ctx.host_port, never what the Host header says).
func forwardedHeaders(r *http.Request, up *upstreamRequest) http.Header {
	out := up.headers.Clone()
	te := out.Get("Te")
	for _, k := range hopByHop {
		if k != "Upgrade" && k != "Connection" {
			out.Del(k)
		}
	}
	if strings.EqualFold(te, "trailers") {
		out.Set("Te", "trailers") // gRPC needs it; nginx's grpc_pass sends it
	}
	if r.Header.Get("Upgrade") == "" {
		out.Del("Upgrade")
		out.Del("Connection")
	}
	clientIP, _, _ := net.SplitHostPort(r.RemoteAddr)
	proto := "http"
	if r.TLS != nil {
		proto = "https"
	}
	out.Set("X-Real-IP", clientIP)
	out.Set("X-Forwarded-For", clientIP)
	out.Set("X-Forwarded-Proto", proto)
	out.Set("X-Forwarded-Host", up.fwdHost)
	out.Set("X-Forwarded-Port", up.fwdPort)
	out.Set("X-Forwarded-Path", r.URL.Path)
	return out
}

// forwardedHost is nginx's $host for a Host header: the server_name
// ("kong" in Kong's template) when there is none.
func forwardedHost(host string) string {
	if name, ok := nginxHost(host); ok {
		return name
	}
	return "kong"
}

// ---- TLS ----

// TLSConfig terminates TLS on an ssl proxy listen with the loaded
// certificates, chosen by SNI as Kong does (exact name, then a wildcard
// "*.example.com" or "example.*" SNI, then the catch-all "*"), else Kong's
// default certificate.
func (p *DataPlane) TLSConfig() *tls.Config {
	return &tls.Config{
		MinVersion: tls.VersionTLS12,
		NextProtos: []string{"h2", "http/1.1"},
		GetCertificate: func(hello *tls.ClientHelloInfo) (*tls.Certificate, error) {
			if c := p.certificateFor(hello); c != nil {
				return c, nil
			}
			return p.defaultCertificate()
		},
	}
}

// certificateFor finds the certificate of the client's server name; of a
// certificate and its alternative (cert_alt, another key type), Kong sets
// both and OpenSSL serves the first the client supports.
func (p *DataPlane) certificateFor(hello *tls.ClientHelloInfo) *tls.Certificate {
	sni := strings.ToLower(hello.ServerName)
	p.d.mu.Lock()
	cfg := p.d.config
	p.d.mu.Unlock()
	if cfg == nil || sni == "" {
		return nil // no SNI: Kong serves its default certificate
	}
	// kong/runloop/certificate.lua find_certificate: the exact name, the
	// name with its first label replaced by "*", with its last label
	// replaced by "*", then the catch-all SNI "*".
	candidates := []string{sni}
	if i := strings.Index(sni, "."); i > 0 {
		candidates = append(candidates, "*"+sni[i:])
	}
	if i := strings.LastIndex(sni, "."); i > 0 {
		candidates = append(candidates, sni[:i]+".*")
	}
	candidates = append(candidates, "*")
	byName := map[string]string{}
	for _, id := range cfg.sortedIDs("snis") {
		s := cfg.entities["snis"][id]
		name, _ := s["name"].(string)
		byName[strings.ToLower(name)] = refID(s["certificate"])
	}
	id := ""
	for _, c := range candidates {
		if byName[c] != "" {
			id = byName[c]
			break
		}
	}
	if id == "" {
		return nil
	}
	c := cfg.entities["certificates"][id]
	// OpenSSL picks by key type only: the names are not checked.
	byType := *hello
	byType.ServerName = ""
	var first *tls.Certificate
	for _, field := range [][2]string{{"cert", "key"}, {"cert_alt", "key_alt"}} {
		certPEM, _ := c[field[0]].(string)
		keyPEM, _ := c[field[1]].(string)
		pair, err := tls.X509KeyPair([]byte(certPEM), []byte(keyPEM))
		if err != nil {
			continue
		}
		if byType.SupportsCertificate(&pair) == nil {
			return &pair
		}
		if first == nil {
			first = &pair
		}
	}
	return first
}

func (p *DataPlane) defaultCertificate() (*tls.Certificate, error) {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.defaultTLS != nil {
		return p.defaultTLS, nil
	}
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		return nil, err
	}
	tpl := &x509.Certificate{
		SerialNumber: big.NewInt(1),
		Subject:      pkix.Name{CommonName: "localhost", Organization: []string{"Kong"}},
		NotBefore:    time.Now().Add(-time.Hour),
		NotAfter:     time.Now().Add(24 * time.Hour),
		KeyUsage:     x509.KeyUsageDigitalSignature,
		ExtKeyUsage:  []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth},
		DNSNames:     []string{"localhost"},
	}
	der, err := x509.CreateCertificate(rand.Reader, tpl, tpl, &key.PublicKey, key)
	if err != nil {
		return nil, err
	}
	p.defaultTLS = &tls.Certificate{Certificate: [][]byte{der}, PrivateKey: key}
	return p.defaultTLS, nil
}
