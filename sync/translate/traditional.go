package translate

import (
	"cmp"
	"maps"
	"math"
	"slices"
	"strconv"
	"strings"

	gwv1 "sigs.k8s.io/gateway-api/apis/v1"

	"github.com/konglet/konglet/proxy/declarative"
)

// Kong's traditional_compatible router orders routes by (number of fields,
// plain hosts only, header count, regex path, regex_priority, plain path
// length) (kong/router/transform.lua get_priority). Only the low 13 bits of
// regex_priority survive its 32-bit shift, and bit 12 would turn the
// priority negative: konglet uses 12 bits.
const maxRegexPriority = 1<<12 - 1

// kongKey is the part of a traditional route's priority above
// regex_priority (every konglet path is a regex, so that bit is common).
type kongKey struct{ weight, plainHosts, headers int }

func keyOf(r *declarative.Route) kongKey {
	k := kongKey{headers: len(r.Headers)}
	for _, set := range []bool{len(r.Methods) > 0, len(r.Hosts) > 0, len(r.Headers) > 0, len(r.Paths) > 0} {
		if set {
			k.weight++
		}
	}
	if len(r.Hosts) > 0 && !slices.ContainsFunc(r.Hosts, func(h string) bool { return strings.Contains(h, "*") }) {
		k.plainHosts = 1
	}
	return k
}

func (a kongKey) compare(b kongKey) int {
	return cmp.Or(cmp.Compare(a.weight, b.weight), cmp.Compare(a.plainHosts, b.plainHosts), cmp.Compare(a.headers, b.headers))
}

// maxConjunctions bounds the routes rankTraditional adds, per route given.
const maxConjunctions = 4

// rankTraditional encodes Gateway API precedence in what the traditional
// router keeps. Where a route X that Gateway API prefers has fewer fields
// than a route Y that can match the same request, Kong would pick Y: so X
// gets a conjunction, a copy of X that also requires Y's methods, headers
// and hosts. The copy matches exactly the requests both match, has at
// least Y's fields, and outranks Y by regex_priority. Copies are checked
// the same way until nothing is left to fix. regex_priority then ranks
// routes of equal fields in Gateway API order. It returns the services
// with their copies (services that gain routes are copied, not changed:
// a Memo keeps them).
func rankTraditional(kongRoutes []*kongRoute, services []*declarative.Service) []*declarative.Service {
	var http []*kongRoute
	owner := map[*declarative.Route]*declarative.Service{}
	for _, svc := range services {
		for _, r := range svc.Routes {
			owner[r] = svc
		}
	}
	for _, kr := range kongRoutes {
		if kr.path.Type != nil {
			http = append(http, kr)
		}
	}
	byPrecedence := func(a, b *kongRoute) int {
		return cmp.Or(cmp.Compare(b.class, a.class), a.order.compare(b.order))
	}
	slices.SortStableFunc(http, byPrecedence)
	added := map[*declarative.Service][]*declarative.Route{}
	// base names the route a copy narrows; seen holds what exists.
	base := map[*declarative.Route]string{}
	seen := map[string]bool{}
	for _, kr := range http {
		base[kr.route] = kr.route.Name
		seen[conjunctionKey(kr.route.Name, kr.route)] = true
	}
	// Only a pair whose less preferred route has more of Kong's fields
	// needs a conjunction: routes are grouped by those fields.
	keys := make(map[*kongRoute]kongKey, len(http))
	groups := map[kongKey][]*kongRoute{}
	for _, kr := range http {
		k := keyOf(kr.route)
		keys[kr], groups[k] = k, append(groups[k], kr)
	}
	budget := maxConjunctions * len(http)
	for changed := true; changed && budget > 0; {
		changed = false
		var fresh []*kongRoute
		// Sorted, so that copies are made, and named, in the same order
		// on every replica.
		order := slices.SortedFunc(maps.Keys(groups), kongKey.compare)
		for _, x := range http {
			for _, k := range order {
				if keys[x].compare(k) >= 0 {
					continue
				}
				for _, y := range groups[k] {
					if budget == 0 || byPrecedence(x, y) >= 0 || !mayOverlap(x, y) {
						continue
					}
					c := conjunction(x, y)
					key := conjunctionKey(base[x.route], c.route)
					if seen[key] {
						continue
					}
					seen[key] = true
					svc := owner[x.route]
					base[c.route] = base[x.route]
					c.route.Name = base[x.route] + "-" + strconv.Itoa(len(added[svc])+1)
					c.route.Plugins = renamedPlugins(x.route.Plugins, c.route.Name)
					owner[c.route] = svc
					added[svc] = append(added[svc], c.route)
					keys[c] = keyOf(c.route)
					fresh = append(fresh, c)
					budget--
					changed = true
				}
			}
		}
		for _, c := range fresh {
			groups[keys[c]] = append(groups[keys[c]], c)
		}
		http = append(http, fresh...)
		slices.SortStableFunc(http, byPrecedence)
	}
	// regex_priority counts down from the most preferred route of each
	// set of equal fields (routes beyond 4096 of one set tie at 0).
	next := map[kongKey]int{}
	for _, kr := range http {
		k := keys[kr]
		kr.route.RegexPrio = int64(max(maxRegexPriority-next[k], 0))
		next[k]++
	}
	if len(added) == 0 {
		return services
	}
	out := make([]*declarative.Service, len(services))
	for i, svc := range services {
		out[i] = svc
		if extra := added[svc]; len(extra) > 0 {
			c := *svc
			c.Routes = append(slices.Clip(svc.Routes), extra...)
			out[i] = &c
		}
	}
	return out
}

// conjunction is x also requiring what y requires beyond x's own path:
// y's methods and hosts where x has none, and y's headers (x's value wins
// for a name both match, which mayOverlap found compatible).
func conjunction(x, y *kongRoute) *kongRoute {
	r := *x.route
	if len(r.Methods) == 0 {
		r.Methods = y.route.Methods
	}
	if len(r.Hosts) == 0 {
		r.Hosts = y.route.Hosts
	}
	if len(y.route.Headers) > 0 {
		r.Headers = maps.Clone(y.route.Headers)
		maps.Copy(r.Headers, x.route.Headers)
	}
	c := *x
	c.route = &r
	return &c
}

// conjunctionKey identifies a route by the one it narrows (base) and what
// it requires besides its path.
func conjunctionKey(base string, r *declarative.Route) string {
	var b strings.Builder
	b.WriteString(base + "|" + strings.Join(r.Methods, ",") + "|" + strings.Join(r.Hosts, ","))
	for _, name := range slices.Sorted(maps.Keys(r.Headers)) {
		b.WriteString("|" + name + "=" + r.Headers[name][0])
	}
	return b.String()
}

func renamedPlugins(plugins []*declarative.Plugin, routeName string) []*declarative.Plugin {
	out := make([]*declarative.Plugin, len(plugins))
	for i, p := range plugins {
		c := *p
		c.ID = declarative.ID("plugin", routeName, p.Name)
		out[i] = &c
	}
	return out
}

// schemes are the request schemes a route's protocols let through: Kong
// routes gRPC as http/https, and adds no protocol clause to a route that
// accepts https alone (it answers plain HTTP with 426).
func schemes(protocols []string) (http, https bool) {
	if len(protocols) == 1 && protocols[0] == "https" {
		return true, true
	}
	for _, p := range protocols {
		http = http || p == "http" || p == "grpc"
		https = https || p == "https" || p == "grpcs"
	}
	return http, https
}

// mayOverlap tells whether one request can match both routes; it answers
// yes when unsure.
func mayOverlap(x, y *kongRoute) bool {
	a, b := x.route, y.route
	ah, as := schemes(a.Protocols)
	bh, bs := schemes(b.Protocols)
	if !(ah && bh || as && bs) {
		return false
	}
	if len(a.Methods) > 0 && len(b.Methods) > 0 && !slices.ContainsFunc(a.Methods, func(m string) bool { return slices.Contains(b.Methods, m) }) {
		return false
	}
	if len(a.Hosts) > 0 && len(b.Hosts) > 0 && !slices.ContainsFunc(a.Hosts, func(h string) bool {
		return slices.ContainsFunc(b.Hosts, func(o string) bool { return hostsMeet(h, o) })
	}) {
		return false
	}
	for name, va := range a.Headers {
		if vb, ok := b.Headers[name]; ok && !strings.HasPrefix(va[0], "~*") && !strings.HasPrefix(vb[0], "~*") && !strings.EqualFold(va[0], vb[0]) {
			return false
		}
	}
	return pathsMeet(x, y)
}

// hostsMeet compares two Kong hosts entries (host[:port]).
func hostsMeet(a, b string) bool {
	ha, pa, _ := strings.Cut(a, ":")
	hb, pb, _ := strings.Cut(b, ":")
	if pa != "" && pb != "" && pa != pb {
		return false
	}
	switch {
	case isWildcard(ha) && isWildcard(hb):
		return strings.HasSuffix(ha[1:], hb[1:]) || strings.HasSuffix(hb[1:], ha[1:])
	case isWildcard(ha):
		return wildcardMatches(ha, hb)
	case isWildcard(hb):
		return wildcardMatches(hb, ha)
	}
	return strings.EqualFold(ha, hb)
}

// pathsMeet compares Exact and PathPrefix matches (a regex may meet anything).
func pathsMeet(x, y *kongRoute) bool {
	a, b := x.path, y.path
	if *a.Type == gwv1.PathMatchRegularExpression || *b.Type == gwv1.PathMatchRegularExpression {
		return true
	}
	va, vb := kongPath(a), kongPath(b)
	switch {
	case *a.Type == gwv1.PathMatchExact && *b.Type == gwv1.PathMatchExact:
		return va == vb
	case *a.Type == gwv1.PathMatchExact:
		return underPrefix(va, vb)
	case *b.Type == gwv1.PathMatchExact:
		return underPrefix(vb, va)
	}
	return underPrefix(va, vb) || underPrefix(vb, va)
}

// underPrefix tells whether path is matched by the PathPrefix prefix.
func underPrefix(path, prefix string) bool {
	prefix = strings.TrimSuffix(prefix, "/")
	return prefix == "" || path == prefix || strings.HasPrefix(path, prefix+"/")
}

// isolationService answers 404, with Kong's own message, for the requests
// of a listener's hostname that no route of that listener matches: without
// it the traditional router, which has no negation, would hand them to the
// routes of a broader listener on the same port (Gateway API listener
// isolation). Each of its routes ranks below every route of its listener
// and, through rankTraditional's conjunctions, above the broader ones.
func (t *translator) isolationService(gws []*gateway, ports listenerPorts) (*declarative.Service, []*kongRoute) {
	svc := &declarative.Service{Name: "listener-isolation.konglet", Host: noBackendHost}
	var kongRoutes []*kongRoute
	seen := map[string]bool{}
	prefix := gwv1.HTTPPathMatch{Type: ptr(gwv1.PathMatchPathPrefix), Value: ptr("/")}
	for _, l := range allListeners(gws) {
		if !l.usable() || (l.kongProtocol != "http" && l.kongProtocol != "https") {
			continue
		}
		host := hostnameOf(l.spec.Hostname)
		if !slices.ContainsFunc(ports.hosts[l.spec.Port], func(other string) bool {
			return hostSpecificity(other) < hostSpecificity(host) && covers(other, host)
		}) {
			continue // no broader listener on the port
		}
		kongHost := host
		if len(ports.ofProtocol[l.kongProtocol]) > 1 || l.kongProtocol == "https" && len(ports.ofProtocol["http"]) > 0 {
			kongHost += ":" + strconv.Itoa(l.dstPort)
		}
		name := "isolation." + l.kongProtocol + "." + strings.ReplaceAll(kongHost, "*", "wildcard")
		name = strings.ReplaceAll(name, ":", ".")
		if seen[name] {
			continue
		}
		seen[name] = true
		r := &declarative.Route{Name: name, Protocols: []string{l.kongProtocol}, Hosts: []string{kongHost}, Paths: []string{"~/"},
			StripPath: &no, PreserveHost: &yes,
			Plugins: []*declarative.Plugin{{ID: declarative.ID("plugin", name, "request-termination"), Name: "request-termination",
				Config: map[string]any{"status_code": 404, "message": "no Route matched with those values"}}}}
		svc.Routes = append(svc.Routes, r)
		kongRoutes = append(kongRoutes, &kongRoute{route: r, class: precedenceClass(host, gwv1.HTTPRouteMatch{Path: &prefix}),
			order: routeOrder{route: math.MaxInt}, path: prefix})
	}
	return svc, kongRoutes
}
