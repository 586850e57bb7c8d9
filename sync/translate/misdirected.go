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
	"github.com/konglet/konglet/sync/snapshot"
)

// HTTPS listeners that share a port share Kong's listen, and an HTTP/2
// client may reuse a connection made for one listener's name for another's
// (connection coalescing). Gateway API (GatewayHTTPSListenerDetectMisdirectedRequests)
// asks for 421 when the listener the TLS server name selected is not the one
// the Host selects. Kong 3.9's expressions router reads the server name of
// the proxy listen's handshake as tls.sni (kong/router/fields.lua:
// ngx.ssl.server_name, absent without SNI) for HTTP routes too, so one route
// per listener hostname answers 421 when the Host selects that listener and
// the server name selects another on the port. A request without SNI, or
// whose SNI selects no listener, is routed by its Host alone. Host names are
// matched as the Host normalizer leaves them (hostplugin.go): without it a
// trailing dot would slip past, so these routes are made only where it runs.
// The traditional router has no negation, which "selected by SNI" (covered,
// and not by a more specific listener) needs: no such routes there.

// misdirectedClass ranks the 421 routes above every route: precedenceClass
// counts at most 30 headers, so it never reaches it.
const misdirectedClass = 1<<29 - 1

// misdirectedService answers 421 for the misdirected requests of every
// HTTPS port with listeners of different hostnames.
func (t *translator) misdirectedService(gws []*gateway) (*declarative.Service, []*kongRoute) {
	if t.snap.Kong.RouterFlavor != snapshot.RouterExpressions || !t.hostsNormalized() {
		return nil, nil
	}
	// By the port Kong's router sees: listeners it cannot tell apart by
	// port are one port to it.
	hostsByPort := map[int][]string{}
	for _, l := range allListeners(gws) {
		if !l.usable() || l.kongProtocol != "https" {
			continue
		}
		if h := hostnameOf(l.spec.Hostname); !slices.Contains(hostsByPort[l.dstPort], h) {
			hostsByPort[l.dstPort] = append(hostsByPort[l.dstPort], h)
		}
	}
	svc := &declarative.Service{Name: "misdirected-requests.konglet", Host: noBackendHost}
	var kongRoutes []*kongRoute
	prefix := gwv1.HTTPPathMatch{Type: ptr(gwv1.PathMatchPathPrefix), Value: ptr("/")}
	for _, port := range slices.Sorted(maps.Keys(hostsByPort)) {
		hosts := hostsByPort[port]
		if len(hosts) < 2 {
			continue // one listener name: every request that reaches it is its own
		}
		slices.Sort(hosts)
		for _, host := range hosts {
			name := "misdirected." + strconv.Itoa(port) + "." + strings.ReplaceAll(cmp.Or(host, "any"), "*", "wildcard")
			r := &declarative.Route{Name: name, Protocols: []string{"https"}, Expression: misdirectedExpression(port, host, hosts),
				StripPath: &no, PreserveHost: &yes,
				Plugins: []*declarative.Plugin{{ID: declarative.ID("plugin", name, "request-termination"), Name: "request-termination",
					Config: map[string]any{"status_code": 421, "message": "Misdirected Request"}}}}
			svc.Routes = append(svc.Routes, r)
			kongRoutes = append(kongRoutes, &kongRoute{route: r, class: misdirectedClass,
				order: routeOrder{route: math.MaxInt, rule: len(kongRoutes)}, path: prefix})
		}
	}
	return svc, kongRoutes
}

// misdirectedExpression matches the requests on dstPort whose Host selects
// the listener of host while their server name selects another of hosts.
func misdirectedExpression(dstPort int, host string, hosts []string) string {
	clauses := []string{"(net.dst.port == " + strconv.Itoa(dstPort) + ")"}
	if host != "" {
		clauses = append(clauses, "("+hostPredicate(host)+")")
	}
	specific := moreSpecific(host, hosts)
	for _, o := range specific {
		clauses = append(clauses, "!("+hostPredicate(o)+")")
	}
	// The server name is one another listener covers...
	var others []string
	for _, o := range hosts {
		if o == host {
			continue
		}
		if o == "" {
			others = []string{sniPredicate(o)} // it covers every name
			break
		}
		others = append(others, sniPredicate(o))
	}
	clauses = append(clauses, "("+strings.Join(others, " || ")+")")
	if host == "" {
		return strings.Join(clauses, " && ") // a name another covers is not its
	}
	// ...and this listener does not select: it does not cover it, or a
	// more specific listener does.
	selects := []string{sniPredicate(host)}
	for _, o := range specific {
		selects = append(selects, "!("+sniPredicate(o)+")")
	}
	return strings.Join(append(clauses, "!("+strings.Join(selects, " && ")+")"), " && ")
}

// moreSpecific lists the hostnames of hosts that take some of host's names
// (listener isolation: the most specific listener owns a name).
func moreSpecific(host string, hosts []string) []string {
	var out []string
	for _, o := range hosts {
		if o != host && hostSpecificity(o) > hostSpecificity(host) && covers(host, o) {
			out = append(out, o)
		}
	}
	return out
}

// sniPredicate matches the server names a listener hostname covers ("" any
// present one: tls.sni is absent without SNI, and a missing field fails
// every predicate). Clients may send it in any letter case.
func sniPredicate(host string) string {
	switch {
	case host == "":
		return `tls.sni != ""`
	case isWildcard(host):
		return "lower(tls.sni) =^ " + quote(host[1:])
	}
	return "lower(tls.sni) == " + quote(host)
}
