package translate

import (
	"fmt"
	"runtime"
	"slices"
	"strings"
	"sync"
	"sync/atomic"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	gwv1 "sigs.k8s.io/gateway-api/apis/v1"

	"github.com/konglet/konglet/proxy/declarative"
	"github.com/konglet/konglet/sync/snapshot"
)

// rankedRoutes lists the routes of every kind in the Gateway API's
// tie-break order between routes: oldest first, then by namespace/name. A
// route's index in it is its rank. The routes a Memo kept (kept: nil
// without one) are taken as they were, in the order of their previous
// ranks: only the others are converted and sorted, then merged in (the
// order is total, so this is the one a sort of all of them gives).
// previous has, by rank, the previous output of a kept route (else nil).
// A kept route is the one its output holds, not a copy.
func rankedRoutes(s *snapshot.Snapshot, kept *keptRoutes) (ranked []*route, previous []*routeOutput) {
	// fresh has room for at least the routes that have no kept output.
	n := len(s.HTTPRoutes) + len(s.GRPCRoutes) + len(s.TLSRoutes) + len(s.TCPRoutes) + len(s.UDPRoutes)
	var byRank []*routeOutput
	if kept != nil {
		byRank = make([]*routeOutput, kept.previousRanks)
		n -= min(n, len(kept.previous))
	}
	fresh := make([]route, 0, n)
	// A kept output is taken once (a snapshot not from informers may list
	// a route twice).
	take := func(kind gwv1.Kind, meta *metav1.ObjectMeta, from func() route) {
		if out := kept.previousOf(kind, meta); out != nil && byRank[out.rank] == nil {
			if out.route.meta != meta {
				// The same spec in a newer object: the output reads the
				// new one, and the old one can go.
				out.route = from()
			}
			byRank[out.rank] = out
		} else {
			fresh = append(fresh, from())
		}
	}
	for _, r := range s.HTTPRoutes {
		take(kindHTTPRoute, &r.ObjectMeta, func() route { return fromHTTPRoute(r) })
	}
	for _, r := range s.GRPCRoutes {
		take(kindGRPCRoute, &r.ObjectMeta, func() route { return fromGRPCRoute(r) })
	}
	// The other kinds are never kept.
	for _, r := range s.TLSRoutes {
		fresh = append(fresh, fromTLSRoute(r))
	}
	for _, r := range s.TCPRoutes {
		fresh = append(fresh, fromTCPRoute(r))
	}
	for _, r := range s.UDPRoutes {
		fresh = append(fresh, fromUDPRoute(r))
	}
	// By pointer: a route is too large a value to move at every swap, and
	// to copy for every kept one.
	order := make([]*route, len(fresh))
	for i := range fresh {
		order[i] = &fresh[i]
	}
	sortFunc(order, compareRanks)
	inOrder := slices.DeleteFunc(byRank, func(out *routeOutput) bool { return out == nil })
	n = len(inOrder) + len(order)
	ranked, previous = make([]*route, 0, n), make([]*routeOutput, 0, n)
	takeKept := func(outs []*routeOutput) {
		for _, out := range outs {
			ranked, previous = append(ranked, &out.route), append(previous, out)
		}
	}
	for _, r := range order {
		before, _ := slices.BinarySearchFunc(inOrder, r, func(out *routeOutput, r *route) int { return compareRanks(&out.route, r) })
		takeKept(inOrder[:before])
		ranked, previous, inOrder = append(ranked, r), append(previous, nil), inOrder[before:]
	}
	takeKept(inOrder)
	return ranked, previous
}

// compareRanks compares a field only where the ones before it tie (cmp.Or
// would compare them all): it is most of the sort of a first translation.
func compareRanks(a, b *route) int {
	if c := a.meta.CreationTimestamp.Compare(b.meta.CreationTimestamp.Time); c != 0 {
		return c
	}
	if c := strings.Compare(a.meta.Namespace, b.meta.Namespace); c != 0 {
		return c
	}
	if c := strings.Compare(a.meta.Name, b.meta.Name); c != 0 {
		return c
	}
	return strings.Compare(string(a.kind), string(b.kind))
}

// routeOutput is what the translation of one route produces, and what it
// read beyond the inputs every route shares: a Memo keeps it, and while the
// route and what it read stay the same, the next translation merges it
// again instead of translating the route.
type routeOutput struct {
	// parents are the route's status entries; none for a route of no bound
	// Gateway.
	parents []gwv1.RouteParentStatus
	// listeners are the indexes of the listeners it is attached to.
	listeners []int
	services  []*declarative.Service
	// kongRoutes are its services' routes, with what ranks them.
	kongRoutes []kongRoute
	// upstreams are those of its services, each once.
	upstreams []*declarative.Upstream
	// backends are the Services its backendRefs looked up.
	backends []backendInput
	// lostOn are the listeners where an older route of the other kind
	// (HTTPRoute, GRPCRoute) shares a hostname: the route is not accepted
	// there. It depends on other routes, so a Memo compares it.
	lostOn map[int]string
	// route and rank are the route as the last translation that kept it
	// saw it, and its rank there.
	route route
	rank  int
	// The lists of the usual route (one rule, one listener) start in
	// these: a first translation makes tens of thousands of outputs, and
	// each list was an allocation. They are clipped, so an append copies.
	// The statuses have lists of their own: the status writer keeps them
	// after a route is gone, and would keep the whole output with them.
	listenerBuf [1]int
	serviceBuf  [1]*declarative.Service
	upstreamBuf [1]*declarative.Upstream
}

// mergedRoutes are the outputs of the routes, merged in rank order.
type mergedRoutes struct {
	// outs are the routes' outputs by rank; reused tells which a Memo
	// kept.
	outs   []*routeOutput
	reused []bool
	// attached counts the routes attached to each listener (by index).
	attached   []int
	services   []*declarative.Service
	kongRoutes []*kongRoute
	// upstreams are shared by rules with the same backends, in any route:
	// the first route's is kept.
	upstreams map[string]*declarative.Upstream
}

// translatedOurs counts the routes of the bound Gateways (those with a
// status entry of ours) translated anew, not taken over from a Memo.
func (m *mergedRoutes) translatedOurs() int {
	n := 0
	for rank, out := range m.outs {
		if !m.reused[rank] && len(out.parents) > 0 {
			n++
		}
	}
	return n
}

// translateRoutes translates the routes in rank order and merges their
// outputs but for their statuses (see statuses); an unchanged route's
// previous output (by rank in previous, a Memo's) is merged instead.
func (t *translator) translateRoutes(routes []*route, previous []*routeOutput, gws []*gateway, ports listenerPorts) mergedRoutes {
	merged := mergedRoutes{
		attached:  make([]int, len(allListeners(gws))),
		upstreams: make(map[string]*declarative.Upstream, len(routes)),
	}
	lost := kindConflicts(routes, gws, t.namespaceAllowed)
	outs := make([]*routeOutput, len(routes))
	var independents []int
	reused := make([]bool, len(routes))
	for rank, r := range routes {
		outs[rank] = t.reusable(previous[rank], r.meta.Namespace, lost[r.meta])
		reused[rank] = outs[rank] != nil
		if !reused[rank] && independent(*r) {
			independents = append(independents, rank)
		}
	}
	parallel(len(independents), func(i int) {
		rank := independents[i]
		r := routes[rank]
		// No other route's attachment matters to an independent one.
		outs[rank] = t.translateRoute(*r, gws, ports, nil, lost[r.meta])
	})
	// The lists are allocated once, at the size of the outputs there are
	// and the service assemble adds (the few routes of other kinds,
	// translated below, may grow them).
	var services, kongRoutes int
	for _, out := range outs {
		if out != nil {
			services, kongRoutes = services+len(out.services), kongRoutes+len(out.kongRoutes)
		}
	}
	merged.services, merged.kongRoutes = make([]*declarative.Service, 0, services+1), make([]*kongRoute, 0, kongRoutes)
	for rank, r := range routes {
		if outs[rank] == nil {
			outs[rank] = t.translateRoute(*r, gws, ports, merged.attached, lost[r.meta])
		}
		merged.add(rank, outs[rank])
	}
	merged.outs, merged.reused = outs, reused
	return merged
}

// statuses merges the routes' statuses and hands their outputs, with
// their ranks, to the next translation (kept: nil without a Memo). It
// reads nothing that assemble writes, and the reverse: run has them done
// at once (a first translation inserts thousands of statuses).
func (m *mergedRoutes) statuses(routes []*route, kept *keptRoutes) map[ObjectRef][]gwv1.RouteParentStatus {
	statuses := kept.statuses(len(routes))
	if kept != nil {
		kept.next = make(map[routeIdentity]*routeOutput, len(routes))
	}
	withStatus := 0
	for rank, r := range routes {
		out := m.outs[rank]
		switch {
		case m.reused[rank]: // in those the Memo started from already
		case len(out.parents) > 0:
			statuses[r.key()] = out.parents
		default:
			delete(statuses, r.key())
		}
		kept.keep(*r, rank, out)
		if len(out.parents) > 0 {
			withStatus++
		}
	}
	if len(statuses) != withStatus {
		// Routes gone left their entries in the previous statuses.
		statuses = make(map[ObjectRef][]gwv1.RouteParentStatus, withStatus)
		for rank, r := range routes {
			if parents := m.outs[rank].parents; len(parents) > 0 {
				statuses[r.key()] = parents
			}
		}
	}
	if kept != nil {
		kept.nextRanks, kept.nextStatuses = len(routes), statuses
	}
	return statuses
}

// parallelChunk is how many routes a worker takes at a time: enough to
// make the handing out negligible, few enough to share the tail. (A var
// only so that a test can make every scenario run in parallel.)
var parallelChunk = 64

// parallel runs do(0..n-1) on up to GOMAXPROCS goroutines: a first
// translation of thousands of routes is most of a cold start. The order
// of the calls does not matter to the result (each writes its own slot).
func parallel(n int, do func(i int)) {
	chunk := parallelChunk
	workers := min(runtime.GOMAXPROCS(0), (n+chunk-1)/chunk)
	if workers <= 1 {
		for i := range n {
			do(i)
		}
		return
	}
	var next atomic.Int64
	var wg sync.WaitGroup
	for range workers {
		wg.Go(func() {
			for {
				start := int(next.Add(int64(chunk))) - chunk
				if start >= n {
					return
				}
				for i := start; i < min(start+chunk, n); i++ {
					do(i)
				}
			}
		})
	}
	wg.Wait()
}

// minParallelSort is the shortest slice sortFunc sorts in two halves at
// once: below it, a goroutine and the merge cost more than they save.
const minParallelSort = 2048

// sortFunc is slices.SortFunc on up to two goroutines: the halves are
// sorted at once, then merged (the sorts of a first translation's routes,
// services and upstreams would otherwise leave a core idle). cmp must be
// a total order, as every sort of the translation's is: the result is
// then the one slices.SortFunc gives.
func sortFunc[T any](s []T, cmp func(a, b T) int) {
	if len(s) < minParallelSort || runtime.GOMAXPROCS(0) < 2 {
		slices.SortFunc(s, cmp)
		return
	}
	left, right := s[:len(s)/2], s[len(s)/2:]
	var wg sync.WaitGroup
	wg.Go(func() { slices.SortFunc(left, cmp) })
	slices.SortFunc(right, cmp)
	wg.Wait()
	// Merged from the front into s: what is written never overtakes what
	// is still to be read of right, and left is read from a copy.
	left = slices.Clone(left)
	i, j := 0, 0
	for k := range s {
		if j == len(right) || i < len(left) && cmp(left[i], right[j]) <= 0 {
			s[k], i = left[i], i+1
		} else {
			s[k], j = right[j], j+1
		}
	}
}

// add merges one route's output: the route's rank, which depends on the
// other routes, is applied here, to a new output and a kept one alike.
func (m *mergedRoutes) add(rank int, out *routeOutput) {
	for _, i := range out.listeners {
		m.attached[i]++
	}
	m.services = append(m.services, out.services...)
	for i := range out.kongRoutes {
		kr := &out.kongRoutes[i]
		kr.order.route = rank
		m.kongRoutes = append(m.kongRoutes, kr)
	}
	for _, u := range out.upstreams {
		if _, ok := m.upstreams[u.Name]; !ok {
			m.upstreams[u.Name] = u
		}
	}
}

// translateRoute translates one route on the bound Gateways; attachedBefore
// counts the routes of lower rank attached to each listener, and lostOn
// names the listeners an older route of the other kind holds.
func (t *translator) translateRoute(r route, gws []*gateway, ports listenerPorts, attachedBefore []int, lostOn map[int]string) *routeOutput {
	out := &routeOutput{lostOn: lostOn}
	out.listeners = out.listenerBuf[:0]
	gen := r.meta.Generation
	type verdict struct {
		ref             gwv1.ParentReference
		reason, message string
	}
	verdicts := make([]verdict, 0, 2) // on the stack for the usual one or two parentRefs
	var where attachment
	badHostname, hasBadHostname := invalidHostname(r.hostnames)
	for _, ref := range r.parentRefs {
		listeners, ours := parentListeners(gws, r.meta.Namespace, ref)
		if !ours || slices.ContainsFunc(verdicts, func(v verdict) bool { return sameParentRef(v.ref, ref) }) {
			continue
		}
		if hasBadHostname {
			verdicts = append(verdicts, verdict{ref, string(gwv1.RouteReasonUnsupportedValue), fmt.Sprintf("hostname %q is not a valid hostname", badHostname)})
			continue
		}
		if msg := t.unmatchedPort(r, listeners, ref, ports); msg != "" {
			verdicts = append(verdicts, verdict{ref, string(gwv1.RouteReasonUnsupportedValue), msg})
			continue
		}
		var reason, msg string
		out.listeners, reason, msg = t.attach(r, listeners, ref, &where, out.listeners, attachedBefore, lostOn)
		verdicts = append(verdicts, verdict{ref, reason, msg})
	}
	out.listeners = slices.Clip(out.listeners)
	if len(verdicts) == 0 {
		return out
	}
	rules, read := t.rules(r)
	out.backends = read
	clientCert := clientCertOf(r, gws, rules)
	checkRedirectHosts(rules, where)
	refusal, refused := t.refused[r.key()]
	servable := false
	parents := make([]gwv1.RouteParentStatus, 0, len(verdicts))
	for _, v := range verdicts {
		reason, msg := v.reason, v.message
		if reason == "" {
			reason, msg = rulesVerdict(rules)
		}
		if reason == "" && refused {
			reason, msg = string(gwv1.RouteReasonUnsupportedValue), refusal
		}
		st := gwv1.RouteParentStatus{ParentRef: v.ref, ControllerName: gwv1.GatewayController(t.snap.ControllerName),
			Conditions: make([]metav1.Condition, 0, 2)} // Accepted, ResolvedRefs (rarely PartiallyInvalid)
		if reason == "" {
			servable = true
			st.Conditions = append(st.Conditions, condition(string(gwv1.RouteConditionAccepted), true, string(gwv1.RouteReasonAccepted), notes(rules), gen))
		} else {
			st.Conditions = append(st.Conditions, condition(string(gwv1.RouteConditionAccepted), false, reason, msg, gen))
		}
		st.Conditions = append(st.Conditions, resolvedRefsCondition(rules, gen))
		if partial := partiallyInvalid(rules, gen); partial != nil && reason == "" {
			st.Conditions = append(st.Conditions, *partial)
		}
		parents = append(parents, st)
	}
	out.parents = parents
	if servable {
		var places [2]placement // on the stack for the usual one or two
		t.emit(out, r, rules, t.placements(places[:0], where, ports), clientCert)
	}
	return out
}

// checkRedirectHosts drops rules whose redirect has to keep the request's
// hostname where the route serves a wildcard or any hostname: Kong's
// redirect plugin has a fixed location.
func checkRedirectHosts(rules []ruleResult, where attachment) {
	for i := range rules {
		if rules[i].dropped != "" || !rules[i].filters.redirectKeepsHost() {
			continue
		}
		for _, at := range where {
			if at.host == "" || isWildcard(at.host) {
				rules[i].dropped = fmt.Sprintf("rule %d: filter RequestRedirect without a hostname needs exact route hostnames (Kong's redirect plugin has a fixed location)", rules[i].index)
				break
			}
		}
	}
}
