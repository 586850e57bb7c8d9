package translate

import (
	"fmt"
	"slices"
	"strings"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
	gwv1 "sigs.k8s.io/gateway-api/apis/v1"

	"github.com/konglet/konglet/sync/snapshot"
)

// attachment is where one route is served: each hostname ("" for any) on
// each listener port once, with the most specific listener that serves it
// there. A list: a route has a few, and a map of maps per route was a
// tenth of a first translation's allocations.
type attachment []servedAt

type servedAt struct {
	host string
	port gwv1.PortNumber
	servedBy
}

// serve records that l serves host on its port, unless a more specific
// listener already does there.
func (a *attachment) serve(host string, port gwv1.PortNumber, by servedBy) {
	for i := range *a {
		if at := &(*a)[i]; at.host == host && at.port == port {
			if hostSpecificity(by.listenerHost) > hostSpecificity(at.listenerHost) {
				at.servedBy = by
			}
			return
		}
	}
	*a = append(*a, servedAt{host, port, by})
}

// servedBy is the listener through which a route serves a hostname on a port.
type servedBy struct {
	protocol     string // Kong's route protocol
	listenerHost string // the listener's hostname, "" for any
	dstPort      int    // what Kong's net.dst.port says for this listener
	listener     *listener
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
	// A Gateway and a ListenerSet may share a name: the kind tells them apart.
	kind := func(p gwv1.ParentReference) string {
		group, kind := gwv1.GroupName, kindGateway
		if p.Group != nil {
			group = string(*p.Group)
		}
		if p.Kind != nil {
			kind = string(*p.Kind)
		}
		return group + "/" + kind
	}
	return a.Name == b.Name && kind(a) == kind(b) && ns(a.Namespace) == ns(b.Namespace) && str(a.SectionName) == str(b.SectionName) && port(a.Port) == port(b.Port)
}

// attach finds the listeners that accept the route through ref and records
// where they serve it. It returns attachedTo with their indexes added, each
// once (a route that names a listener through two parentRefs counts once
// in its attachedRoutes), and the reason when none accepts it.
// attachedBefore counts the routes of lower rank on each listener.
func (t *translator) attach(r route, listeners []*listener, ref gwv1.ParentReference, where *attachment, attachedTo, attachedBefore []int, lostOn map[int]string) (_ []int, reason, message string) {
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
		return attachedTo, string(gwv1.RouteReasonNoMatchingParent), "the parent has no listener that matches the parentRef's sectionName and port"
	}
	reason, message = string(gwv1.RouteReasonNoMatchingParent), "no matching listener is valid"
	attached := false
	var hostsBuf [4]string // a listener's hostnames for the route, on the stack for the usual few
	for _, l := range candidates {
		if !l.attachable() {
			continue
		}
		if !kindAllowed(l, r.kind) || !t.namespaceAllowed(l, r.meta.Namespace) {
			if !attached && reason != string(gwv1.RouteReasonNoMatchingListenerHostname) {
				reason, message = string(gwv1.RouteReasonNotAllowedByListeners), fmt.Sprintf("listener %q does not allow this route", l.spec.Name)
				if r.grpc() && l.kongProtocol == "http" && !l.listen.HTTP2 {
					message = fmt.Sprintf("listener %q takes no GRPCRoute: gRPC without TLS needs HTTP/2 on Kong's listen %d (add http2 to that proxy_listen)", l.spec.Name, l.listen.Port)
				}
			}
			continue
		}
		hosts, ok := intersectHostnames(hostsBuf[:0], l.spec.Hostname, r.hostnames)
		if !ok {
			reason, message = string(gwv1.RouteReasonNoMatchingListenerHostname), fmt.Sprintf("no hostname of the route matches listener %q", l.spec.Name)
			continue
		}
		if winner, lost := lostOn[l.index]; lost {
			reason, message = string(gwv1.RouteReasonNotAllowedByListeners),
				fmt.Sprintf("listener %q serves %s, older, for a hostname of this route: of an HTTPRoute and a GRPCRoute with a common hostname, Gateway API accepts the oldest", l.spec.Name, winner)
			continue
		}
		attached = true
		if !slices.Contains(attachedTo, l.index) {
			attachedTo = append(attachedTo, l.index)
		}
		if !l.usable() {
			continue // attached, but Kong cannot serve the listener
		}
		if (r.kind == kindTCPRoute || r.kind == kindUDPRoute) && attachedBefore[l.index] > 0 {
			// Attached and counted, as the Gateway API asks, but a TCP or
			// UDP listener forwards to one route, the oldest: Kong cannot
			// tell their connections apart.
			continue
		}
		lh := hostnameOf(l.spec.Hostname)
		for _, h := range hosts {
			// Through two listeners on one port, the more specific one counts.
			where.serve(h, l.spec.Port, servedBy{r.kongProtocol(l.kongProtocol), lh, l.dstPort, l})
		}
	}
	if attached {
		return attachedTo, "", ""
	}
	return attachedTo, reason, message
}

// unmatchedPort says why a parentRef's port cannot be honoured: it asks
// for the requests of one port (HTTPRouteDestinationPortMatching), and the
// traditional router carries a port in hostnames only, so a route without
// hostnames on a listener without one would answer every port of the
// protocol. Refused rather than served on ports it did not ask for.
func (t *translator) unmatchedPort(r route, listeners []*listener, ref gwv1.ParentReference, ports listenerPorts) string {
	if ref.Port == nil || len(r.hostnames) > 0 || t.snap.Kong.RouterFlavor == snapshot.RouterExpressions {
		return ""
	}
	for _, l := range listeners {
		if l.spec.Port != *ref.Port || (ref.SectionName != nil && l.spec.Name != *ref.SectionName) || l.spec.Hostname != nil ||
			(l.kongProtocol != "http" && l.kongProtocol != "https") || len(ports.ofProtocol[l.kongProtocol]) < 2 ||
			!l.usable() || !kindAllowed(l, r.kind) || !t.namespaceAllowed(l, r.meta.Namespace) {
			continue
		}
		return fmt.Sprintf("parentRef port %d: listener %q has no hostname, nor has the route, and Kong's %s router matches a request's port only together with a hostname: the route would answer on every %s port of Kong; give the route hostnames or set router_flavor=expressions",
			*ref.Port, l.spec.Name, t.snap.Kong.RouterFlavor, strings.ToUpper(l.kongProtocol))
	}
	return ""
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

// kindConflicts finds, for each HTTPRoute and GRPCRoute (routes are ranked
// oldest first), the listeners where an older accepted route of the other
// kind shares a hostname with it, each with that route's name: Gateway API
// accepts only the oldest of the two there.
func kindConflicts(routes []*route, gws []*gateway, allowed func(*listener, string) bool) map[*metav1.ObjectMeta]map[int]string {
	type claim struct {
		hosts []string
		route *route // named only when it wins somewhere
	}
	// Without routes of both kinds nothing conflicts: most clusters have
	// HTTPRoutes and few or no GRPCRoutes.
	var https, grpcs bool
	for _, r := range routes {
		https = https || r.kind == kindHTTPRoute
		grpcs = grpcs || r.kind == kindGRPCRoute
	}
	if !https || !grpcs {
		return nil
	}
	// By listener and kind: a route is checked against the other kind's
	// claims only, which are few where one kind dominates (often none).
	claims := map[int]map[gwv1.Kind][]claim{}
	var out map[*metav1.ObjectMeta]map[int]string
	for _, r := range routes {
		if r.kind != kindHTTPRoute && r.kind != kindGRPCRoute {
			continue
		}
		for _, ref := range r.parentRefs {
			listeners, _ := parentListeners(gws, r.meta.Namespace, ref)
			for _, l := range listeners {
				if ref.SectionName != nil && l.spec.Name != *ref.SectionName || ref.Port != nil && l.spec.Port != *ref.Port ||
					!l.attachable() || !kindAllowed(l, r.kind) || !allowed(l, r.meta.Namespace) {
					continue
				}
				hosts, ok := intersectHostnames(nil, l.spec.Hostname, r.hostnames)
				if !ok {
					continue
				}
				if claims[l.index] == nil {
					claims[l.index] = map[gwv1.Kind][]claim{}
				}
				other := claims[l.index][otherHTTPKind(r.kind)]
				winner := slices.IndexFunc(other, func(c claim) bool { return hostsShared(c.hosts, hosts) })
				if winner < 0 {
					claims[l.index][r.kind] = append(claims[l.index][r.kind], claim{hosts, r})
					continue
				}
				if out == nil {
					out = map[*metav1.ObjectMeta]map[int]string{}
				}
				if out[r.meta] == nil {
					out[r.meta] = map[int]string{}
				}
				w := other[winner].route
				out[r.meta][l.index] = string(w.kind) + " " + w.meta.Namespace + "/" + w.meta.Name
			}
		}
	}
	return out
}

// otherHTTPKind is GRPCRoute for an HTTPRoute and HTTPRoute for a GRPCRoute.
func otherHTTPKind(k gwv1.Kind) gwv1.Kind {
	if k == kindHTTPRoute {
		return kindGRPCRoute
	}
	return kindHTTPRoute
}

// hostsShared tells whether two lists of hostnames ("" for any) have a
// hostname in common.
func hostsShared(a, b []string) bool {
	return slices.ContainsFunc(a, func(x string) bool {
		return slices.ContainsFunc(b, func(y string) bool { return covers(x, y) || covers(y, x) })
	})
}
