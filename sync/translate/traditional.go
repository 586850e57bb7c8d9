package translate

import (
	"cmp"
	"math"
	"math/bits"
	"slices"
	"strconv"
	"strings"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	gwv1 "sigs.k8s.io/gateway-api/apis/v1"

	"github.com/konglet/konglet/proxy/declarative"
)

// Kong's traditional_compatible router gives an HTTP route the priority
// that kong/router/transform.lua get_priority computes under LuaJIT. There,
// weight (the number of fields), header count and regex_priority are Lua
// numbers, so its "64-bit" shifts are 32-bit bit.lshift calls (count mod
// 32): they land in one 13-bit field f at bits 19-31 of the priority, OR-ed
// together: weight<<10 | headers<<1 | regex_priority. When f's bit 12 is
// set (weight 4, or regex_priority 4096 and up) the 32-bit value is
// negative and its sign extension sets every higher bit. Only the
// plain-hosts (60) and regex-path (51) bits are real 64-bit bits. Every
// konglet HTTP route has one regex path (bit 51 set, no length bits), so
// Kong orders them by rank: first the routes with f's bit 12 set, by f's
// low 12 bits; then, by f, those with plain hosts; then the others.
const (
	fieldBits = 12
	negative  = 1 << fieldBits // f's sign bit
	plainTier = 1 << fieldBits // the rank of the first plain-hosts route
	negTier   = 2 << fieldBits // the rank of the first negative route
	rankLimit = 3 << fieldBits
)

// fixedBits are the bits of f that Kong sets for r whatever its
// regex_priority, and whether r has plain hosts only.
func fixedBits(r *declarative.Route) (f int, plain bool) {
	weight := 0
	for _, set := range []bool{len(r.Methods) > 0, len(r.Hosts) > 0, len(r.Headers) > 0, len(r.Paths) > 0} {
		if set {
			weight++
		}
	}
	plain = len(r.Hosts) > 0 && !slices.ContainsFunc(r.Hosts, func(h string) bool { return strings.Contains(h, "*") })
	return weight<<10 | min(len(r.Headers), 255)<<1, plain
}

// highestRank is the highest rank below limit that a route of the given
// fixed bits can take, and the f (its regex_priority) that gives it.
// regex_priority can only add bits to the fixed ones.
func highestRank(fixed int, plain bool, limit int) (rank, f int, ok bool) {
	if v := highestSuperset(fixed&^negative, min(limit-negTier, 1<<fieldBits)); v >= 0 {
		return negTier + v, negative | v, true
	}
	if fixed&negative != 0 {
		return 0, 0, false
	}
	tier := 0
	if plain {
		tier = plainTier
	}
	if v := highestSuperset(fixed, min(limit-tier, 1<<fieldBits)); v >= 0 {
		return tier + v, v, true
	}
	return 0, 0, false
}

// highestSuperset is the largest v < limit that has every bit of need, or -1.
func highestSuperset(need, limit int) int {
	for v := limit - 1; v >= need; {
		missing := need &^ v
		if missing == 0 {
			return v
		}
		// The numbers below v that keep v's bits above the highest missing
		// one lack it too: skip to the next lower setting of those bits.
		above := 1 << bits.Len(uint(missing))
		v = v&^(above-1) - 1
	}
	return -1
}

// rankTraditional encodes Gateway API precedence in Kong's ranks: walking
// the HTTP routes from the one Gateway API prefers most, each takes the
// highest rank its fixed bits allow below the routes before it that may
// match the same request, its regex_priority being that rank's f. Routes
// of different plain hostnames never match one request: each hostname's
// routes count down from the top, below any route without a plain
// hostname ranked before them (precedenceClass ranks none so); the routes
// without one rank below every route before them. Negative ranks (f bit
// 12) are kept for the routes that must outrank a route Kong makes
// negative whatever its regex_priority (four fields), or, without plain
// hosts, one with: among negative ranks the plain-hosts bit does not
// count, and weight and header count only require some bits of f. Each
// header count requires its own bits, so one chain of 4096 ranks holds
// about 1000 routes without header matches, 500 with up to three. A route
// for which no lower rank is left takes its lowest one and may outrank
// routes Gateway API prefers: those are returned, for their owners to be
// told.
func rankTraditional(kongRoutes []*kongRoute) (unranked []*declarative.Route) {
	var http []*kongRoute
	for _, kr := range kongRoutes {
		if kr.path.Type != nil {
			http = append(http, kr)
		}
	}
	slices.SortStableFunc(http, func(a, b *kongRoute) int {
		return cmp.Or(cmp.Compare(b.class, a.class), a.order.compare(b.order))
	})
	// A route takes a negative rank only if it must outrank a later route
	// that Kong makes negative whatever its regex_priority (four fields),
	// or, having no plain hosts, a later one with (Kong ranks those above):
	// the last such route of all, of the routes without a plain hostname,
	// of each plain hostname; and the last with plain hosts.
	lastForced, lastShared, lastPlain := -1, -1, -1
	lastHost := map[string]int{}
	for i, kr := range http {
		fixed, plain := fixedBits(kr.route)
		if plain {
			lastPlain = i
		}
		if fixed&negative != 0 {
			lastForced = i
			if host, ok := plainHostname(kr.route); ok {
				lastHost[host] = i
			} else {
				lastShared = i
			}
		}
	}
	// Each limit is the lowest rank so far: of every route, of the routes
	// without a plain hostname, of each plain hostname's routes.
	limit, shared := rankLimit, rankLimit
	hostLimit := map[string]int{}
	for i, kr := range http {
		fixed, plain := fixedBits(kr.route)
		host, ok := plainHostname(kr.route)
		l, last := limit, lastForced
		if !plain {
			last = max(last, lastPlain)
		}
		if ok {
			l, last = shared, lastShared
			if hl, seen := hostLimit[host]; seen {
				l = min(l, hl)
			}
			if hi, seen := lastHost[host]; seen {
				last = max(last, hi)
			}
		}
		if i > last {
			l = min(l, negTier)
		}
		rank, f, fits := highestRank(fixed, plain, l)
		if !fits {
			kr.route.RegexPrio = int64(fixed)
			unranked = append(unranked, kr.route)
			continue
		}
		kr.route.RegexPrio = int64(f)
		limit = min(limit, rank)
		if ok {
			hostLimit[host] = rank
		} else {
			shared = rank
		}
	}
	return unranked
}

// unrankedNote tells a route's owner that Kong may prefer it to routes
// Gateway API prefers.
const unrankedNote = "the traditional_compatible router has no priority left to rank some of its matches below every route Gateway API prefers on the same hostname (about 250 to 1000 routes per hostname, see docs/features.md), so Kong may pick them first; the expressions router ranks every route exactly"

// noteUnranked adds unrankedNote to the Accepted condition of the owners of
// unranked Kong routes (those of services). The entries may be a Memo's:
// they are copied.
func noteUnranked(statuses map[ObjectRef][]gwv1.RouteParentStatus, services []*declarative.Service, unranked []*declarative.Route) {
	owner := map[*declarative.Route]*declarative.Service{}
	for _, svc := range services {
		for _, r := range svc.Routes {
			owner[r] = svc
		}
	}
	told := map[ObjectRef]bool{}
	for _, r := range unranked {
		svc := owner[r]
		if svc == nil {
			continue
		}
		ref, ok := RefFromTags(svc.Tags)
		if !ok || told[ref] {
			continue // the listener isolation's, owned by no route
		}
		told[ref] = true
		parents := slices.Clone(statuses[ref])
		for i := range parents {
			parents[i].Conditions = slices.Clone(parents[i].Conditions)
			for j, c := range parents[i].Conditions {
				if c.Type == string(gwv1.RouteConditionAccepted) && c.Status == metav1.ConditionTrue {
					parents[i].Conditions[j].Message = joinMessages(slices.DeleteFunc([]string{c.Message, unrankedNote}, func(m string) bool { return m == "" }))
				}
			}
		}
		statuses[ref] = parents
	}
}

// plainHostname is the one hostname, without port, of r's hosts, if they
// have one and no wildcard.
func plainHostname(r *declarative.Route) (string, bool) {
	var name string
	for i, h := range r.Hosts {
		h, _, _ = strings.Cut(strings.ToLower(h), ":")
		if strings.Contains(h, "*") || i > 0 && h != name {
			return "", false
		}
		name = h
	}
	return name, name != ""
}

// isolationService answers 404, with Kong's own message, for the requests
// of a listener's hostname that no route of that listener matches: without
// it the traditional router, which has no negation, would hand them to the
// routes of a broader listener on the same port (Gateway API listener
// isolation). Each of its routes ranks below every route of its listener
// and, through rankTraditional, above the broader ones.
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
