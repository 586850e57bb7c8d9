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
)

// attachment is where one route is served: hostname ("" for any) to the
// listener ports, with the most specific listener that serves it there.
type attachment map[string]map[gwv1.PortNumber]servedBy

// servedBy is the listener through which a route serves a hostname on a port.
type servedBy struct {
	protocol     string // Kong's route protocol
	listenerHost string // the listener's hostname, "" for any
	dstPort      int    // what Kong's net.dst.port says for this listener
	listener     *listener
}

func (t *translation) routes() {
	routes := make([]route, 0, len(t.snap.HTTPRoutes)+len(t.snap.GRPCRoutes))
	for _, r := range t.snap.HTTPRoutes {
		routes = append(routes, fromHTTPRoute(r))
	}
	for _, r := range t.snap.GRPCRoutes {
		routes = append(routes, fromGRPCRoute(r))
	}
	for _, r := range t.snap.TLSRoutes {
		routes = append(routes, fromTLSRoute(r))
	}
	for _, r := range t.snap.TCPRoutes {
		routes = append(routes, fromTCPRoute(r))
	}
	for _, r := range t.snap.UDPRoutes {
		routes = append(routes, fromUDPRoute(r))
	}
	// The order is the Gateway API's tie-break between routes: oldest first,
	// then by namespace/name. A route's index in it is its rank.
	slices.SortFunc(routes, func(a, b route) int {
		return cmp.Or(a.meta.CreationTimestamp.Compare(b.meta.CreationTimestamp.Time),
			cmp.Compare(a.meta.Namespace, b.meta.Namespace), cmp.Compare(a.meta.Name, b.meta.Name), cmp.Compare(a.kind, b.kind))
	})
	for rank, r := range routes {
		t.route(r, rank)
	}
	t.finishGateways()
}

func (t *translation) route(r route, rank int) {
	if t.nextMemo != nil && memoizable(r) {
		if m := t.remembered(r); m != nil {
			t.replay(r, m, rank)
			return
		}
		t.startRecording()
		defer t.finishRecording(r)
	}
	gen := r.meta.Generation
	type verdict struct {
		ref             gwv1.ParentReference
		reason, message string
	}
	var verdicts []verdict
	where := attachment{}
	for _, ref := range r.parentRefs {
		listeners, ours := t.parentListeners(r.meta.Namespace, ref)
		if !ours || slices.ContainsFunc(verdicts, func(v verdict) bool { return sameParentRef(v.ref, ref) }) {
			continue
		}
		reason, msg := t.attach(r, listeners, ref, where)
		verdicts = append(verdicts, verdict{ref, reason, msg})
	}
	if verdicts == nil {
		return
	}
	rules := t.rules(r)
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
	t.status.Routes[r.key()] = parents
	if servable {
		t.emit(r, rank, rules, where)
	}
}

// checkRedirectHosts drops rules whose redirect has to keep the request's
// hostname where the route serves a wildcard or any hostname: Kong's
// redirect plugin has a fixed location.
func checkRedirectHosts(rules []ruleResult, where attachment) {
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
func (t *translation) parentListeners(routeNamespace string, ref gwv1.ParentReference) (ls []*listener, ok bool) {
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
	for _, g := range t.gws {
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

// attach finds the listeners of g that accept the route through ref and
// records where it is served. It returns the reason when none does.
func (t *translation) attach(r route, listeners []*listener, ref gwv1.ParentReference, where attachment) (reason, message string) {
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
		if (r.kind == kindTCPRoute || r.kind == kindUDPRoute) && l.attached > 0 && l.lastAttached != r.meta {
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
		if l.lastAttached != r.meta {
			l.attached++
			l.lastAttached = r.meta
			t.recordAttach(l)
		}
		if !l.usable() {
			continue // attached, but Kong cannot serve the listener
		}
		lh := hostnameOf(l.spec.Hostname)
		for _, h := range hosts {
			if where[h] == nil {
				where[h] = map[gwv1.PortNumber]servedBy{}
			}
			// Through two listeners on one port, the more specific one counts.
			if prev, ok := where[h][l.spec.Port]; !ok || hostSpecificity(lh) > hostSpecificity(prev.listenerHost) {
				where[h][l.spec.Port] = servedBy{r.kongProtocol(l.kongProtocol), lh, l.dstPort, l}
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

func (t *translation) namespaceAllowed(l *listener, ns string) bool {
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

// emit adds the Kong service and routes of every servable rule.
func (t *translation) emit(r route, rank int, rules []ruleResult, where attachment) {
	tags := objectTags(string(r.kind), *r.meta)
	places := t.placements(where)
	base := strings.ToLower(string(r.kind)) + "." + r.meta.Namespace + "." + r.meta.Name + "."
	for _, rule := range rules {
		if rule.dropped != "" {
			continue
		}
		// Protocol and port are Kong's defaults (http, 80); the port only
		// matters for a host that is not an upstream.
		ruleBase := base + strconv.Itoa(rule.index)
		svc := &declarative.Service{Name: ruleBase, Tags: tags, Protocol: r.serviceProtocol()}
		svc.Host = t.upstreamFor(rule.backends)
		rule.filters.serviceTimeouts(svc)
		for mi, m := range rule.matches {
			for pi, place := range places {
				name := ruleBase + "." + strconv.Itoa(mi) + "." + strconv.Itoa(pi)
				plugins := rule.filters.plugins(name, place.host, place.ports, m, tags)
				kr := t.kongRoute(name, place, m, rule.filters, r.stream())
				kr.order = routeOrder{route: rank, rule: rule.index, match: mi}
				kr.route.Plugins = plugins
				if len(rule.backends) == 0 && !redirects(plugins) && !r.stream() {
					kr.route.Plugins = append(kr.route.Plugins, t.noBackendPlugin(name, tags))
				}
				svc.Routes = append(svc.Routes, kr.route)
			}
		}
		t.services = append(t.services, svc)
	}
}

// noBackendPlugin answers 500 where a rule has no usable backend, as the
// Gateway API requires.
func (t *translation) noBackendPlugin(routeName string, tags []string) *declarative.Plugin {
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
