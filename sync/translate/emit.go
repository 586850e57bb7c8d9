package translate

import (
	"slices"
	"strconv"
	"strings"

	"github.com/konglet/konglet/proxy/declarative"
)

// emit builds, into out, the Kong service of every servable rule, with a
// Kong route per match and placement, and the upstreams they balance over.
func (t *translator) emit(out *routeOutput, r route, rules []ruleResult, places []placement, clientCert *declarative.Certificate) {
	tags := objectTags(string(r.kind), r.meta.Namespace, r.meta.Name)
	services, upstreams := out.serviceBuf[:0], out.upstreamBuf[:0]
	// The route's Kong routes are allocated together: a first translation
	// makes tens of thousands.
	n := 0
	for _, rule := range rules {
		if rule.dropped == "" {
			n += len(rule.matches) * len(places)
		}
	}
	routes, krs := make([]declarative.Route, n), make([]kongRoute, n)
	next := 0
	for _, rule := range rules {
		if rule.dropped != "" {
			continue
		}
		names := newRuleNames(r, rule.index, len(rule.matches), len(places))
		// Protocol and port are Kong's defaults (http, 80); the port only
		// matters for a host that is not an upstream.
		svc := &declarative.Service{Name: names.serviceName(), Tags: tags, Protocol: r.serviceProtocol(), Host: noBackendHost}
		if len(rule.backends) > 0 && rule.backends[0].tls != nil {
			// checkRuleTLS made every backend of the rule ask the same.
			svc.Protocol, svc.Port = "https", 443
			svc.TLSVerify, svc.TLSVerifyDepth, svc.CACertificates = &yes, backendVerifyDepth, rule.backends[0].tls.caIDs
			if clientCert != nil {
				svc.ClientCertificate = &declarative.EntityID{ID: clientCert.ID}
			}
		}
		// Rules with the same backends share one upstream; backends that
		// filter their requests each have their own (backendChunk).
		groups := [][]backend{rule.backends}
		if rule.filters.perBackend {
			groups = nil
			for _, b := range rule.backends {
				groups = append(groups, []backend{b})
			}
		}
		for i, g := range groups {
			if len(g) == 0 {
				continue
			}
			name := upstreamName(g)
			if i == 0 {
				svc.Host = name
			}
			if !slices.ContainsFunc(upstreams, func(u *declarative.Upstream) bool { return u.Name == name }) {
				upstreams = append(upstreams, t.upstream(name, g))
			}
		}
		rule.filters.serviceTimeouts(svc)
		svc.Routes = make([]*declarative.Route, 0, len(rule.matches)*len(places))
		for mi, m := range rule.matches {
			for pi, place := range places {
				name := names.route(mi, pi)
				plugins := rule.filters.plugins(name, place.host, place.ports, m, tags)
				if rule.filters.perBackend && len(rule.backends) > 0 {
					plugins = append(plugins, &declarative.Plugin{ID: declarative.ID("plugin", name, "post-function"), Name: "post-function",
						Config: map[string]any{"access": []string{backendChunk(rule.backends)}}, Tags: tags})
				}
				kr := &krs[next]
				*kr = t.kongRoute(&routes[next], name, place, m, rule.filters, r.stream())
				next++
				kr.order = routeOrder{rule: rule.index, match: mi}
				kr.route.Plugins = plugins
				if len(rule.backends) == 0 && !rule.filters.redirects() && !r.stream() {
					kr.route.Plugins = append(kr.route.Plugins, noBackendPlugin(name, tags))
				}
				svc.Routes = append(svc.Routes, kr.route)
			}
		}
		services = append(services, svc)
	}
	out.services, out.kongRoutes, out.upstreams = slices.Clip(services), krs, slices.Clip(upstreams)
}

// ruleNames are the names of a rule's Kong service (kind.namespace.name.
// rule) and of its Kong routes (service.match.placement), written one
// after another into one string: a first translation makes tens of
// thousands. The service's name is where the first route's begins.
type ruleNames struct {
	all     string
	service int // the length of the service's name
	next    int // where the next route's name begins
}

func newRuleNames(r route, rule, matches, places int) ruleNames {
	var b strings.Builder
	b.Grow(max(matches*places, 1) * (len(entityKinds[r.kind]) + len(r.meta.Namespace) + len(r.meta.Name) + 12))
	service := 0
	for k := range max(matches*places, 1) {
		b.WriteString(entityKinds[r.kind])
		b.WriteByte('.')
		b.WriteString(r.meta.Namespace)
		b.WriteByte('.')
		b.WriteString(r.meta.Name)
		b.WriteByte('.')
		b.WriteString(strconv.Itoa(rule))
		if service == 0 {
			service = b.Len()
		}
		if matches*places > 0 {
			b.WriteByte('.')
			b.WriteString(strconv.Itoa(k / places))
			b.WriteByte('.')
			b.WriteString(strconv.Itoa(k % places))
		}
	}
	return ruleNames{all: b.String(), service: service}
}

func (n *ruleNames) serviceName() string { return n.all[:n.service] }

// route is the next route's name: the names are taken in order.
func (n *ruleNames) route(match, place int) string {
	start := n.next
	n.next += n.service + 2 + len(strconv.Itoa(match)) + len(strconv.Itoa(place))
	return n.all[start:n.next]
}

// noBackendPlugin answers 500 where a rule has no usable backend, as the
// Gateway API requires.
func noBackendPlugin(routeName string, tags []string) *declarative.Plugin {
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
