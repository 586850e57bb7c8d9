package translate

import (
	"cmp"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"unicode/utf8"

	gwv1 "sigs.k8s.io/gateway-api/apis/v1"

	"github.com/konglet/konglet/proxy/declarative"
	"github.com/konglet/konglet/sync/snapshot"
)

// kongRoute is a Kong route waiting for its priority, which depends on the
// other routes of the same precedence class.
type kongRoute struct {
	route *declarative.Route
	// class orders routes by Gateway API precedence (higher wins); routes of
	// the same class are then ordered by order.
	class uint64
	order routeOrder
	// path is the Gateway API path match (HTTP routes only): traditional
	// ranking asks whether two routes can match one request.
	path gwv1.HTTPPathMatch
}

// routeOrder breaks ties the Gateway API way: route (ranked oldest first,
// then by namespace/name, see rankedRoutes), then rule and match order.
type routeOrder struct {
	route, rule, match int
}

func (a routeOrder) compare(b routeOrder) int {
	return cmp.Or(cmp.Compare(a.route, b.route), cmp.Compare(a.rule, b.rule), cmp.Compare(a.match, b.match))
}

// The precedence class packs, from most to least significant: hostname
// specificity (8 bits), path (10), method (1), header count (5, at most 30:
// the class of all ones is misdirectedClass), query count (5). The rank inside a class takes the 17 low bits of Kong's 46-bit priority.
const (
	rankBits     = 17
	maxRank      = 1<<rankBits - 1
	hostExact    = 255
	pathExact    = 1023
	pathRegex    = 1022
	maxPrefixLen = 1021
)

func precedenceClass(host string, m gwv1.HTTPRouteMatch) uint64 {
	var h uint64
	switch {
	case host == "":
	case isWildcard(host):
		h = uint64(min(len(host)-1, hostExact-1))
	default:
		h = hostExact
	}
	var p uint64
	switch *m.Path.Type {
	case gwv1.PathMatchExact:
		p = pathExact
	case gwv1.PathMatchRegularExpression:
		p = pathRegex
	default:
		p = uint64(min(len(strings.TrimSuffix(*m.Path.Value, "/"))+1, maxPrefixLen))
	}
	var method uint64
	if m.Method != nil {
		method = 1
	}
	return h<<21 | p<<11 | method<<10 | uint64(min(len(m.Headers), 30))<<5 | uint64(min(len(m.QueryParams), 31))
}

// no and yes are the strip_path and preserve_host of every HTTP route,
// shared: nothing writes through them.
var no, yes = false, true

// kongRoute builds the Kong route for one match in one placement into r,
// a zero Route.
func (t *translator) kongRoute(r *declarative.Route, name string, place placement, m gwv1.HTTPRouteMatch, filters ruleFilters, stream bool) kongRoute {
	r.Name, r.Protocols = name, place.protocols
	expressions := t.snap.Kong.RouterFlavor == snapshot.RouterExpressions
	switch {
	case stream && expressions:
		r.Expression = streamExpression(place)
	case stream:
		streamFields(r, place)
	case expressions:
		r.Expression = httpExpression(place, m, filters)
	default:
		traditionalFields(r, place, m, filters)
	}
	kr := kongRoute{route: r, class: precedenceClass(place.host, m)}
	if !stream {
		// strip_path and preserve_host are HTTP-only fields in Kong.
		r.StripPath, r.PreserveHost = &no, &yes
		kr.path = *m.Path
	}
	return kr
}

// assignPriorities gives every expressions route a unique priority that
// encodes the Gateway API precedence, so Kong never falls back to its id
// order. Inside a class, priorities count down from the oldest route: a new
// route (the newest) takes the next value down and moves no other route's
// priority, so a change stays a small change of the document. Kong routes
// of one match on several hostnames tie: their names (unique) order them,
// so that where they were in the input (which any other route moves) does
// not.
func assignPriorities(kongRoutes []*kongRoute) {
	// Sorted by order and name, not by class first: the routes come
	// merged in rank order, so this order is almost the input's (a sort
	// of a sorted slice is one pass), and a route's place in its class
	// is how many of the class came before it.
	slices.SortFunc(kongRoutes, func(a, b *kongRoute) int {
		if c := a.order.compare(b.order); c != 0 {
			return c // no name to read (cmp.Or would)
		}
		return strings.Compare(a.route.Name, b.route.Name)
	})
	before := map[uint64]int{}
	for _, kr := range kongRoutes {
		i := before[kr.class]
		before[kr.class] = i + 1
		kr.route.Priority = kr.class<<rankBits | uint64(maxRank-min(i, maxRank))
	}
}

// httpExpression writes a match in Kong's expressions language. Every clause
// is parenthesised: the reference parser binds || tighter than &&. It is
// written into one buffer: a first translation writes one per Kong route,
// and a string per clause and literal was a fifth of its allocations.
func httpExpression(place placement, m gwv1.HTTPRouteMatch, filters ruleFilters) string {
	var buf [256]byte
	x := expression(buf[:0])
	if place.matchPort {
		x = x.and("(")
		for i, p := range place.ports {
			if i > 0 {
				x = x.raw(" || ")
			}
			x = x.raw("net.dst.port == ")
			x = strconv.AppendInt(x, int64(p), 10)
		}
		x = x.raw(")")
	}
	if place.host != "" {
		x = x.and("(").hostPredicate(place.host).raw(")")
	}
	for _, h := range place.excluded {
		x = x.and("!(").hostPredicate(h).raw(")")
	}
	value := kongPath(*m.Path)
	switch *m.Path.Type {
	case gwv1.PathMatchExact:
		x = x.and("(http.path == ").quote(value).raw(")")
	case gwv1.PathMatchRegularExpression:
		x = x.and("(http.path ~ ").quote(anchored(value)).raw(")")
	default:
		if replacement, ok := filters.prefixRewrite(); ok {
			x = x.and("(http.path ~ ").quote(prefixCapture(value, replacement)).raw(")")
			break
		}
		prefix := strings.TrimSuffix(value, "/")
		if prefix != "" {
			x = x.and("(http.path == ").quote(prefix).raw(" || http.path ^= ").quote(prefix + "/").raw(")")
		}
	}
	if m.Method != nil {
		x = x.and("(http.method == ").quote(string(*m.Method)).raw(")")
	}
	for _, h := range m.Headers {
		x = x.and("(any(http.headers.").raw(strings.ReplaceAll(string(h.Name), "-", "_")).raw(")")
		x = x.valueClause((*gwv1.HeaderMatchType)(h.Type), h.Value).raw(")")
	}
	for _, q := range m.QueryParams {
		x = x.and("(any(http.queries.").raw(string(q.Name)).raw(")")
		x = x.valueClause((*gwv1.HeaderMatchType)(q.Type), q.Value).raw(")")
	}
	if len(x) == 0 {
		// A route must say something: every normalized path starts with /.
		x = x.raw(`(http.path ^= "/")`)
	}
	return string(x)
}

// expression appends an expression of Kong's router to a buffer (a slice,
// not a pointer, so that a buffer on the stack stays there).
type expression []byte

// and starts a clause with s, after " && " unless it is the first.
func (x expression) and(s string) expression {
	if len(x) > 0 {
		x = x.raw(" && ")
	}
	return x.raw(s)
}

func (x expression) raw(s string) expression { return append(x, s...) }

// quote appends a string literal of the expressions language.
func (x expression) quote(s string) expression {
	x = append(x, '"')
	for _, r := range s {
		switch r {
		case '"':
			x = x.raw(`\"`)
		case '\\':
			x = x.raw(`\\`)
		case '\n':
			x = x.raw(`\n`)
		case '\r':
			x = x.raw(`\r`)
		case '\t':
			x = x.raw(`\t`)
		default:
			x = utf8.AppendRune(x, r)
		}
	}
	return append(x, '"')
}

// hostPredicate matches a hostname whatever the letter case of the request.
func (x expression) hostPredicate(host string) expression {
	if isWildcard(host) {
		return x.raw("lower(http.host) =^ ").quote(host[1:])
	}
	return x.raw("lower(http.host) == ").quote(host)
}

// valueClause compares the field just written with a header or query
// parameter match's value.
func (x expression) valueClause(typ *gwv1.HeaderMatchType, value string) expression {
	if typ != nil && *typ == gwv1.HeaderMatchRegularExpression {
		return x.raw(" ~ ").quote(anchored(value))
	}
	return x.raw(" == ").quote(value)
}

// streamExpression matches a connection by the port it arrived on and, for
// TLS, the server name (SNI is case-insensitive but sent lowercase).
func streamExpression(place placement) string {
	var portClauses, clauses []string
	for _, p := range place.ports {
		if p == 0 {
			portClauses = nil // one listen where Kong's port cannot be matched
			break
		}
		portClauses = append(portClauses, "net.dst.port == "+strconv.Itoa(p))
	}
	if len(portClauses) > 0 {
		clauses = append(clauses, "("+strings.Join(portClauses, " || ")+")")
	}
	switch {
	case place.host == "":
	case isWildcard(place.host):
		clauses = append(clauses, "(tls.sni =^ "+quote(place.host[1:])+")")
	default:
		clauses = append(clauses, "(tls.sni == "+quote(place.host)+")")
	}
	for _, h := range place.excluded {
		if isWildcard(h) {
			clauses = append(clauses, "!(tls.sni =^ "+quote(h[1:])+")")
		} else {
			clauses = append(clauses, "!(tls.sni == "+quote(h)+")")
		}
	}
	return strings.Join(clauses, " && ")
}

// streamFields writes a stream match with traditional fields.
func streamFields(r *declarative.Route, place placement) {
	for _, p := range place.ports {
		if p == 0 {
			r.Destinations = nil // see streamDstPort
			break
		}
		r.Destinations = append(r.Destinations, declarative.Endpoint{Port: p})
	}
	if place.host != "" {
		r.SNIs = []string{place.host}
	}
}

// hostPredicate matches a hostname whatever the letter case of the request.
func hostPredicate(host string) string {
	return string(expression(nil).hostPredicate(host))
}

// anchored makes a Gateway API regular expression match the whole value:
// Kong's ~ operator searches, it does not anchor.
func anchored(re string) string { return "^(?:" + re + ")$" }

// quote writes a string literal of the expressions language.
func quote(s string) string {
	return string(expression(nil).quote(s))
}

// traditionalFields writes a match with Kong's traditional route fields.
// Paths are always regexes, so that Kong's "regex path" bit is the same for
// every route and regex_priority always counts (traditional.go ranks them),
// and prefixes end at a segment boundary. Where several ports carry HTTP,
// a hostname carries the port (Kong then matches net.dst.port too).
func traditionalFields(r *declarative.Route, place placement, m gwv1.HTTPRouteMatch, filters ruleFilters) {
	if place.host != "" {
		if place.matchPort {
			for _, p := range place.ports {
				r.Hosts = append(r.Hosts, place.host+":"+strconv.Itoa(p))
			}
		} else {
			r.Hosts = []string{place.host}
		}
	}
	value := kongPath(*m.Path)
	switch *m.Path.Type {
	case gwv1.PathMatchExact:
		r.Paths = []string{"~" + regexp.QuoteMeta(value) + "$"}
	case gwv1.PathMatchRegularExpression:
		if strings.HasPrefix(value, "/") && !strings.Contains(value, "|") {
			r.Paths = []string{"~" + value + "$"}
		} else {
			r.Paths = []string{traditionalRegex(anchored(value))}
		}
	default:
		if replacement, ok := filters.prefixRewrite(); ok {
			r.Paths = []string{traditionalRegex(prefixCapture(value, replacement))}
		} else if prefix := strings.TrimSuffix(value, "/"); prefix != "" {
			r.Paths = []string{"~" + regexp.QuoteMeta(prefix) + "(/|$)"}
		} else {
			r.Paths = []string{"~/"}
		}
	}
	if m.Method != nil {
		r.Methods = []string{string(*m.Method)}
	}
	if len(m.Headers) > 0 {
		r.Headers = map[string][]string{}
		for _, h := range m.Headers {
			v := h.Value
			switch {
			case h.Type != nil && *h.Type == gwv1.HeaderMatchRegularExpression:
				v = "~*" + anchored(h.Value)
			case strings.HasPrefix(v, "~*"):
				// Kong reads a value that starts with ~* as a regex (~*.*
				// matches anything): an exact one is written as a regex
				// of its quoted self.
				v = "~*" + anchored(regexp.QuoteMeta(h.Value))
			}
			r.Headers[string(h.Name)] = []string{v}
		}
	}
}

// traditionalRegex writes a regex anchored with ^ as a Kong regex path:
// Kong prepends the ^ itself and wants ~/ first, which /{0} (nothing)
// provides for a regex that does not start with a slash.
func traditionalRegex(re string) string {
	re = strings.TrimPrefix(re, "^")
	if strings.HasPrefix(re, "/") {
		return "~" + re
	}
	return "~/{0}" + re
}

// kongPath writes an Exact or PathPrefix value the way Kong's router sees
// request paths (kong/tools/uri.lua normalize): percent-encoded characters
// decoded except reserved ones, whose hex is upper-cased. A regex is left
// as written: it is the author's, matched against that normalized path.
func kongPath(m gwv1.HTTPPathMatch) string {
	v := *m.Value
	if *m.Type == gwv1.PathMatchRegularExpression || !strings.Contains(v, "%") {
		return v
	}
	var b strings.Builder
	for i := 0; i < len(v); i++ {
		if v[i] == '%' && i+2 < len(v) {
			if n, err := strconv.ParseUint(v[i+1:i+3], 16, 8); err == nil {
				if strings.IndexByte("!*'();:@&=+$,/?%#[]", byte(n)) < 0 {
					b.WriteByte(byte(n))
				} else {
					b.WriteString("%" + strings.ToUpper(v[i+1:i+3]))
				}
				i += 2
				continue
			}
		}
		b.WriteByte(v[i])
	}
	return b.String()
}
