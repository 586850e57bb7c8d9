package translate

import (
	"slices"
	"strconv"
	"strings"

	"github.com/konglet/konglet/proxy/declarative"
)

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
				if len(rule.backends) == 0 && !rule.filters.redirects() && !r.stream() {
					kr.route.Plugins = append(kr.route.Plugins, noBackendPlugin(name, tags))
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
