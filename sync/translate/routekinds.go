package translate

import (
	"fmt"
	"regexp"
	"strconv"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	gwv1 "sigs.k8s.io/gateway-api/apis/v1"
)

// route is a route of any kind as the translation sees it. A gRPC call is
// an HTTP/2 request for the path /<service>/<method>, so GRPCRoute matches
// become HTTP path matches; a TLSRoute, TCPRoute or UDPRoute rule is a rule
// with one empty match. All kinds share one translation.
type route struct {
	kind       gwv1.Kind
	meta       *metav1.ObjectMeta
	parentRefs []gwv1.ParentReference
	hostnames  []gwv1.Hostname
	rules      []routeRule
}

type routeRule struct {
	name        *gwv1.SectionName
	matches     []gwv1.HTTPRouteMatch
	filters     []gwv1.HTTPRouteFilter
	backendRefs []gwv1.HTTPBackendRef
	timeouts    *gwv1.HTTPRouteTimeouts
	// unsupported names a field of the rule Kong cannot do ("" if none).
	unsupported string
}

func (r route) grpc() bool { return r.kind == kindGRPCRoute }

// stream tells whether the route is served by Kong's stream subsystem.
func (r route) stream() bool {
	return r.kind == kindTLSRoute || r.kind == kindTCPRoute || r.kind == kindUDPRoute
}

func (r route) key() ObjectRef {
	return ObjectRef{gwv1.GroupName, string(r.kind), r.meta.Namespace, r.meta.Name}
}

func fromHTTPRoute(r *gwv1.HTTPRoute) route {
	out := route{kind: kindHTTPRoute, meta: &r.ObjectMeta, parentRefs: r.Spec.ParentRefs, hostnames: r.Spec.Hostnames,
		rules: make([]routeRule, len(r.Spec.Rules))}
	for i, rule := range r.Spec.Rules {
		out.rules[i] = routeRule{name: rule.Name, matches: rule.Matches, filters: rule.Filters, backendRefs: rule.BackendRefs, timeouts: rule.Timeouts,
			unsupported: unsupportedRuleFields(rule.Retry != nil, rule.SessionPersistence != nil)}
	}
	return out
}

func fromGRPCRoute(r *gwv1.GRPCRoute) route {
	out := route{kind: kindGRPCRoute, meta: &r.ObjectMeta, parentRefs: r.Spec.ParentRefs, hostnames: r.Spec.Hostnames,
		rules: make([]routeRule, len(r.Spec.Rules))}
	for i, rule := range r.Spec.Rules {
		rr := routeRule{name: rule.Name, unsupported: unsupportedRuleFields(false, rule.SessionPersistence != nil)}
		for _, m := range rule.Matches {
			rr.matches = append(rr.matches, grpcMatch(m))
		}
		if len(rule.Matches) == 0 {
			// Gateway API: no match means every gRPC call.
			rr.matches = []gwv1.HTTPRouteMatch{{}}
		}
		rr.filters = grpcFilters(rule.Filters)
		for _, b := range rule.BackendRefs {
			rr.backendRefs = append(rr.backendRefs, gwv1.HTTPBackendRef{BackendRef: b.BackendRef, Filters: grpcFilters(b.Filters)})
		}
		out.rules[i] = rr
	}
	return out
}

// unsupportedRuleFields says which rule fields Kong 3.9 cannot do: retry
// (a service's retries cover connection errors and timeouts before a
// response only, with no status codes or backoff) and sessionPersistence
// (not built).
func unsupportedRuleFields(retry, sessionPersistence bool) string {
	switch {
	case retry:
		return "retry is not supported by Kong (it retries connection errors only, without status codes or backoff)"
	case sessionPersistence:
		return "sessionPersistence is not supported by konglet"
	}
	return ""
}

// fromStreamRoute takes a TLSRoute, TCPRoute or UDPRoute: rules of
// backendRefs only (TLSRoute hostnames are server names).
func fromStreamRoute(kind gwv1.Kind, meta *metav1.ObjectMeta, spec gwv1.CommonRouteSpec, hostnames []gwv1.Hostname, rules [][]gwv1.BackendRef, names []*gwv1.SectionName) route {
	out := route{kind: kind, meta: meta, parentRefs: spec.ParentRefs, hostnames: hostnames, rules: make([]routeRule, len(rules))}
	for i, refs := range rules {
		rr := routeRule{name: names[i], matches: []gwv1.HTTPRouteMatch{{}}}
		for _, b := range refs {
			rr.backendRefs = append(rr.backendRefs, gwv1.HTTPBackendRef{BackendRef: b})
		}
		out.rules[i] = rr
	}
	return out
}

func fromTLSRoute(r *gwv1.TLSRoute) route {
	refs, names := make([][]gwv1.BackendRef, len(r.Spec.Rules)), make([]*gwv1.SectionName, len(r.Spec.Rules))
	for i, rule := range r.Spec.Rules {
		refs[i], names[i] = rule.BackendRefs, rule.Name
	}
	return fromStreamRoute(kindTLSRoute, &r.ObjectMeta, r.Spec.CommonRouteSpec, r.Spec.Hostnames, refs, names)
}

func fromTCPRoute(r *gwv1.TCPRoute) route {
	refs, names := make([][]gwv1.BackendRef, len(r.Spec.Rules)), make([]*gwv1.SectionName, len(r.Spec.Rules))
	for i, rule := range r.Spec.Rules {
		refs[i], names[i] = rule.BackendRefs, rule.Name
	}
	return fromStreamRoute(kindTCPRoute, &r.ObjectMeta, r.Spec.CommonRouteSpec, nil, refs, names)
}

func fromUDPRoute(r *gwv1.UDPRoute) route {
	refs, names := make([][]gwv1.BackendRef, len(r.Spec.Rules)), make([]*gwv1.SectionName, len(r.Spec.Rules))
	for i, rule := range r.Spec.Rules {
		refs[i], names[i] = rule.BackendRefs, rule.Name
	}
	return fromStreamRoute(kindUDPRoute, &r.ObjectMeta, r.Spec.CommonRouteSpec, nil, refs, names)
}

// grpcMatch turns a gRPC method match into a path match: an exact service
// and method is an exact path, a service alone a prefix, anything else a
// regular expression on both segments.
func grpcMatch(m gwv1.GRPCRouteMatch) gwv1.HTTPRouteMatch {
	out := gwv1.HTTPRouteMatch{}
	for _, h := range m.Headers {
		typ := gwv1.HeaderMatchExact
		if h.Type != nil && *h.Type == gwv1.GRPCHeaderMatchRegularExpression {
			typ = gwv1.HeaderMatchRegularExpression
		}
		out.Headers = append(out.Headers, gwv1.HTTPHeaderMatch{Type: &typ, Name: gwv1.HTTPHeaderName(h.Name), Value: h.Value})
	}
	if m.Method == nil {
		return out
	}
	service, method := "", ""
	if m.Method.Service != nil {
		service = *m.Method.Service
	}
	if m.Method.Method != nil {
		method = *m.Method.Method
	}
	regex := m.Method.Type != nil && *m.Method.Type == gwv1.GRPCMethodMatchRegularExpression
	switch {
	case !regex && service != "" && method != "":
		out.Path = &gwv1.HTTPPathMatch{Type: ptr(gwv1.PathMatchExact), Value: ptr("/" + service + "/" + method)}
	case !regex && service != "":
		out.Path = &gwv1.HTTPPathMatch{Type: ptr(gwv1.PathMatchPathPrefix), Value: ptr("/" + service)}
	case !regex && method != "":
		out.Path = &gwv1.HTTPPathMatch{Type: ptr(gwv1.PathMatchRegularExpression), Value: ptr("/[^/]+/" + regexp.QuoteMeta(method))}
	case regex:
		segment := func(re string) string {
			if re == "" {
				return "[^/]+"
			}
			return "(?:" + re + ")"
		}
		out.Path = &gwv1.HTTPPathMatch{Type: ptr(gwv1.PathMatchRegularExpression), Value: ptr("/" + segment(service) + "/" + segment(method))}
	}
	return out
}

// grpcFilters keeps the filter types both kinds share; the others keep
// their type so that they are reported as unsupported by name.
func grpcFilters(filters []gwv1.GRPCRouteFilter) []gwv1.HTTPRouteFilter {
	out := make([]gwv1.HTTPRouteFilter, 0, len(filters))
	for _, f := range filters {
		out = append(out, gwv1.HTTPRouteFilter{
			Type:                   gwv1.HTTPRouteFilterType(f.Type),
			RequestHeaderModifier:  f.RequestHeaderModifier,
			ResponseHeaderModifier: f.ResponseHeaderModifier,
			RequestMirror:          f.RequestMirror,
			ExtensionRef:           f.ExtensionRef,
		})
	}
	return out
}

// kongProtocol is the Kong route protocol for a listener's Kong protocol
// (http, https, tcp, udp, tls or tls_passthrough).
func (r route) kongProtocol(listenerProtocol string) string {
	if !r.grpc() {
		return listenerProtocol
	}
	if listenerProtocol == "https" {
		return "grpcs"
	}
	return "grpc"
}

func ruleLabel(i int, name *gwv1.SectionName) string {
	if name != nil {
		return fmt.Sprintf("%d (%s)", i, *name)
	}
	return strconv.Itoa(i)
}

// serviceProtocol is the protocol Kong speaks to the backends ("" for
// Kong's default, http). A terminated TLSRoute forwards plain TCP.
func (r route) serviceProtocol() string {
	switch r.kind {
	case kindGRPCRoute:
		return "grpc" // cleartext HTTP/2, per the Gateway API
	case kindTLSRoute, kindTCPRoute:
		return "tcp"
	case kindUDPRoute:
		return "udp"
	}
	return ""
}
