package translate

import (
	"cmp"
	"fmt"
	"slices"
	"strconv"
	"strings"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
	gwv1 "sigs.k8s.io/gateway-api/apis/v1"

	"github.com/konglet/konglet/proxy/declarative"
	"github.com/konglet/konglet/sync/snapshot"
)

// attachment is what a route's parentRefs attach it to, one after the
// other.
type attachment struct {
	// listeners are the indexes of the listeners the route is attached to,
	// each once: a route that names a listener through two parentRefs
	// counts once in its attachedRoutes.
	listeners []int
	served    served
}

// served is where a route is served: hostname ("" for any) to the listener
// ports, with the most specific listener that serves it there.
type served map[string]map[gwv1.PortNumber]servedBy

// servedBy is the listener through which a route serves a hostname on a port.
type servedBy struct {
	protocol     string // Kong's route protocol
	listenerHost string // the listener's hostname, "" for any
	dstPort      int    // what Kong's net.dst.port says for this listener
	listener     *listener
}

// rankedRoutes lists the routes of every kind in the Gateway API's
// tie-break order between routes: oldest first, then by namespace/name. A
// route's index in it is its rank.
func rankedRoutes(s *snapshot.Snapshot) []route {
	routes := make([]route, 0, len(s.HTTPRoutes)+len(s.GRPCRoutes))
	for _, r := range s.HTTPRoutes {
		routes = append(routes, fromHTTPRoute(r))
	}
	for _, r := range s.GRPCRoutes {
		routes = append(routes, fromGRPCRoute(r))
	}
	for _, r := range s.TLSRoutes {
		routes = append(routes, fromTLSRoute(r))
	}
	for _, r := range s.TCPRoutes {
		routes = append(routes, fromTCPRoute(r))
	}
	for _, r := range s.UDPRoutes {
		routes = append(routes, fromUDPRoute(r))
	}
	slices.SortFunc(routes, func(a, b route) int {
		return cmp.Or(a.meta.CreationTimestamp.Compare(b.meta.CreationTimestamp.Time),
			cmp.Compare(a.meta.Namespace, b.meta.Namespace), cmp.Compare(a.meta.Name, b.meta.Name), cmp.Compare(a.kind, b.kind))
	})
	return routes
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
	listeners  []int
	services   []*declarative.Service
	kongRoutes []*kongRoute
	// upstreams are those of its services, each once.
	upstreams []*declarative.Upstream
	// backends are the Services its backendRefs looked up.
	backends []backendInput
}

// mergedRoutes are the outputs of the routes, merged in rank order.
type mergedRoutes struct {
	statuses map[ObjectRef][]gwv1.RouteParentStatus
	// attached counts the routes attached to each listener (by index).
	attached   []int
	services   []*declarative.Service
	kongRoutes []*kongRoute
	// upstreams are shared by rules with the same backends, in any route:
	// the first route's is kept.
	upstreams map[string]*declarative.Upstream
}

// translateRoutes translates the routes in rank order and merges their
// outputs; with kept (a Memo's), an unchanged route's previous output is
// merged instead.
func (t *translator) translateRoutes(routes []route, gws []*gateway, ports listenerPorts, kept *keptRoutes) mergedRoutes {
	merged := mergedRoutes{
		statuses:  make(map[ObjectRef][]gwv1.RouteParentStatus, len(routes)),
		attached:  make([]int, len(allListeners(gws))),
		upstreams: map[string]*declarative.Upstream{},
	}
	for rank, r := range routes {
		out := kept.reusable(r, t.snap)
		if out == nil {
			out = t.translateRoute(r, gws, ports, merged.attached)
		}
		merged.add(r, rank, out)
		kept.keep(r, out)
	}
	return merged
}

// add merges one route's output: the route's rank, which depends on the
// other routes, is applied here, to a new output and a kept one alike.
func (m *mergedRoutes) add(r route, rank int, out *routeOutput) {
	if len(out.parents) > 0 {
		m.statuses[r.key()] = out.parents
	}
	for _, i := range out.listeners {
		m.attached[i]++
	}
	m.services = append(m.services, out.services...)
	for _, kr := range out.kongRoutes {
		kr.order.route = rank
	}
	m.kongRoutes = append(m.kongRoutes, out.kongRoutes...)
	for _, u := range out.upstreams {
		if _, ok := m.upstreams[u.Name]; !ok {
			m.upstreams[u.Name] = u
		}
	}
}

// translateRoute translates one route on the bound Gateways; attachedBefore
// counts the routes of lower rank attached to each listener.
func (t *translator) translateRoute(r route, gws []*gateway, ports listenerPorts, attachedBefore []int) *routeOutput {
	out := &routeOutput{}
	gen := r.meta.Generation
	type verdict struct {
		ref             gwv1.ParentReference
		reason, message string
	}
	var verdicts []verdict
	where := attachment{served: served{}}
	for _, ref := range r.parentRefs {
		listeners, ours := parentListeners(gws, r.meta.Namespace, ref)
		if !ours || slices.ContainsFunc(verdicts, func(v verdict) bool { return sameParentRef(v.ref, ref) }) {
			continue
		}
		reason, msg := t.attach(r, listeners, ref, &where, attachedBefore)
		verdicts = append(verdicts, verdict{ref, reason, msg})
	}
	out.listeners = where.listeners
	if verdicts == nil {
		return out
	}
	rules, read := t.rules(r)
	out.backends = read
	checkRedirectHosts(rules, where.served)
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
		st := gwv1.RouteParentStatus{ParentRef: v.ref, ControllerName: gwv1.GatewayController(t.snap.ControllerName)}
		if reason == "" {
			servable = true
			st.Conditions = append(st.Conditions, condition(string(gwv1.RouteConditionAccepted), true, string(gwv1.RouteReasonAccepted), "", gen))
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
		out.services, out.kongRoutes, out.upstreams = t.emit(r, rules, t.placements(where.served, ports))
	}
	return out
}

// checkRedirectHosts drops rules whose redirect has to keep the request's
// hostname where the route serves a wildcard or any hostname: Kong's
// redirect plugin has a fixed location.
func checkRedirectHosts(rules []ruleResult, where served) {
	for i := range rules {
		if rules[i].dropped != "" || !rules[i].filters.redirectKeepsHost() {
			continue
		}
		for h := range where {
			if h == "" || isWildcard(h) {
				rules[i].dropped = fmt.Sprintf("rule %d: filter RequestRedirect without a hostname needs exact route hostnames (Kong's redirect plugin has a fixed location)", rules[i].index)
				break
			}
		}
	}
}

// parentListeners returns the listeners a parentRef can attach to: a bound
// Gateway's own, or those of an accepted ListenerSet of a bound Gateway;
// ok is false when the ref is not for this konglet.
func parentListeners(gws []*gateway, routeNamespace string, ref gwv1.ParentReference) (ls []*listener, ok bool) {
	if ref.Group != nil && *ref.Group != gwv1.GroupName {
		return nil, false
	}
	ns := routeNamespace
	if ref.Namespace != nil {
		ns = string(*ref.Namespace)
	}
	kind := gwv1.Kind(kindGateway)
	if ref.Kind != nil {
		kind = *ref.Kind
	}
	for _, g := range gws {
		switch kind {
		case kindGateway:
			if g.key.Namespace == ns && g.key.Name == string(ref.Name) {
				return g.listeners, true
			}
		case kindListenerSet:
			for _, s := range g.sets {
				if s.obj.Namespace == ns && s.obj.Name == string(ref.Name) {
					return s.listeners, true
				}
			}
		}
	}
	return nil, false
}

func sameParentRef(a, b gwv1.ParentReference) bool {
	str := func(p *gwv1.SectionName) string {
		if p == nil {
			return ""
		}
		return string(*p)
	}
	port := func(p *gwv1.PortNumber) gwv1.PortNumber {
		if p == nil {
			return 0
		}
		return *p
	}
	ns := func(p *gwv1.Namespace) string {
		if p == nil {
			return ""
		}
		return string(*p)
	}
	return a.Name == b.Name && ns(a.Namespace) == ns(b.Namespace) && str(a.SectionName) == str(b.SectionName) && port(a.Port) == port(b.Port)
}

// attach finds the listeners that accept the route through ref and adds
// them, and where they serve it, to where. It returns the reason when none
// does. attachedBefore counts the routes of lower rank on each listener.
func (t *translator) attach(r route, listeners []*listener, ref gwv1.ParentReference, where *attachment, attachedBefore []int) (reason, message string) {
	var candidates []*listener
	for _, l := range listeners {
		if ref.SectionName != nil && l.spec.Name != *ref.SectionName {
			continue
		}
		if ref.Port != nil && l.spec.Port != *ref.Port {
			continue
		}
		candidates = append(candidates, l)
	}
	if len(candidates) == 0 {
		return string(gwv1.RouteReasonNoMatchingParent), "the parent has no listener that matches the parentRef's sectionName and port"
	}
	reason, message = string(gwv1.RouteReasonNoMatchingParent), "no matching listener is valid"
	attached := false
	for _, l := range candidates {
		if !l.attachable() {
			continue
		}
		if !kindAllowed(l, r.kind) || !t.namespaceAllowed(l, r.meta.Namespace) {
			if !attached && reason != string(gwv1.RouteReasonNoMatchingListenerHostname) {
				reason, message = string(gwv1.RouteReasonNotAllowedByListeners), fmt.Sprintf("listener %q does not allow this route", l.spec.Name)
			}
			continue
		}
		hosts, ok := intersectHostnames(l.spec.Hostname, r.hostnames)
		if !ok {
			reason, message = string(gwv1.RouteReasonNoMatchingListenerHostname), fmt.Sprintf("no hostname of the route matches listener %q", l.spec.Name)
			continue
		}
		if (r.kind == kindTCPRoute || r.kind == kindUDPRoute) && attachedBefore[l.index] > 0 {
			// One TCP or UDP listener forwards to one route: the oldest.
			reason, message = string(gwv1.RouteReasonNotAllowedByListeners),
				fmt.Sprintf("listener %q already forwards to an older %s; Kong cannot tell their connections apart", l.spec.Name, r.kind)
			continue
		}
		if r.grpc() && l.kongProtocol == "http" && !l.listen.HTTP2 {
			reason, message = string(gwv1.RouteReasonUnsupportedValue),
				fmt.Sprintf("gRPC without TLS needs HTTP/2 on Kong's listen %d: add http2 to that proxy_listen", l.listen.Port)
			continue
		}
		attached = true
		if !slices.Contains(where.listeners, l.index) {
			where.listeners = append(where.listeners, l.index)
		}
		if !l.usable() {
			continue // attached, but Kong cannot serve the listener
		}
		lh := hostnameOf(l.spec.Hostname)
		for _, h := range hosts {
			if where.served[h] == nil {
				where.served[h] = map[gwv1.PortNumber]servedBy{}
			}
			// Through two listeners on one port, the more specific one counts.
			if prev, ok := where.served[h][l.spec.Port]; !ok || hostSpecificity(lh) > hostSpecificity(prev.listenerHost) {
				where.served[h][l.spec.Port] = servedBy{r.kongProtocol(l.kongProtocol), lh, l.dstPort, l}
			}
		}
	}
	if attached {
		return "", ""
	}
	return reason, message
}

func kindAllowed(l *listener, kind gwv1.Kind) bool {
	return slices.ContainsFunc(l.kinds, func(k gwv1.RouteGroupKind) bool { return k.Kind == kind })
}

func (t *translator) namespaceAllowed(l *listener, ns string) bool {
	from := gwv1.NamespacesFromSame
	var selector *metav1.LabelSelector
	if l.spec.AllowedRoutes != nil && l.spec.AllowedRoutes.Namespaces != nil {
		if l.spec.AllowedRoutes.Namespaces.From != nil {
			from = *l.spec.AllowedRoutes.Namespaces.From
		}
		selector = l.spec.AllowedRoutes.Namespaces.Selector
	}
	switch from {
	case gwv1.NamespacesFromAll:
		return true
	case gwv1.NamespacesFromSame:
		return ns == l.namespace
	case gwv1.NamespacesFromSelector:
		namespace := t.snap.Namespaces[ns]
		if selector == nil || namespace == nil {
			return false
		}
		sel, err := metav1.LabelSelectorAsSelector(selector)
		return err == nil && sel.Matches(labels.Set(namespace.Labels))
	}
	return false
}

// emit builds the Kong service of every servable rule, with a Kong route
// per match and placement, and the upstreams they balance over.
func (t *translator) emit(r route, rules []ruleResult, places []placement) (services []*declarative.Service, kongRoutes []*kongRoute, upstreams []*declarative.Upstream) {
	tags := objectTags(string(r.kind), *r.meta)
	base := strings.ToLower(string(r.kind)) + "." + r.meta.Namespace + "." + r.meta.Name + "."
	for _, rule := range rules {
		if rule.dropped != "" {
			continue
		}
		// Protocol and port are Kong's defaults (http, 80); the port only
		// matters for a host that is not an upstream.
		ruleBase := base + strconv.Itoa(rule.index)
		svc := &declarative.Service{Name: ruleBase, Tags: tags, Protocol: r.serviceProtocol(), Host: noBackendHost}
		if len(rule.backends) > 0 {
			svc.Host = upstreamName(rule.backends)
			// Rules with the same backends share one upstream.
			if !slices.ContainsFunc(upstreams, func(u *declarative.Upstream) bool { return u.Name == svc.Host }) {
				upstreams = append(upstreams, t.upstream(svc.Host, rule.backends))
			}
		}
		rule.filters.serviceTimeouts(svc)
		for mi, m := range rule.matches {
			for pi, place := range places {
				name := ruleBase + "." + strconv.Itoa(mi) + "." + strconv.Itoa(pi)
				plugins := rule.filters.plugins(name, place.host, place.ports, m, tags)
				kr := t.kongRoute(name, place, m, rule.filters, r.stream())
				kr.order = routeOrder{rule: rule.index, match: mi}
				kr.route.Plugins = plugins
				if len(rule.backends) == 0 && !redirects(plugins) && !r.stream() {
					kr.route.Plugins = append(kr.route.Plugins, t.noBackendPlugin(name, tags))
				}
				svc.Routes = append(svc.Routes, kr.route)
				kongRoutes = append(kongRoutes, kr)
			}
		}
		services = append(services, svc)
	}
	return services, kongRoutes, upstreams
}

// noBackendPlugin answers 500 where a rule has no usable backend, as the
// Gateway API requires.
func (t *translator) noBackendPlugin(routeName string, tags []string) *declarative.Plugin {
	return &declarative.Plugin{
		ID:   declarative.ID("plugin", routeName, "request-termination"),
		Name: "request-termination",
		Config: map[string]any{
			"status_code": 500,
			"message":     "no usable backend for this route rule",
		},
		Tags: tags,
	}
}

func redirects(plugins []*declarative.Plugin) bool {
	return slices.ContainsFunc(plugins, func(p *declarative.Plugin) bool { return p.Name == "redirect" })
}

func joinMessages(msgs []string) string {
	return strings.Join(msgs, "; ")
}
