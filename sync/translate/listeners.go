package translate

import (
	"cmp"
	"fmt"
	"slices"
	"strings"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	gwv1 "sigs.k8s.io/gateway-api/apis/v1"

	"github.com/konglet/konglet/proxy/declarative"
	"github.com/konglet/konglet/sync/snapshot"
)

type gateway struct {
	obj       *gwv1.Gateway
	key       types.NamespacedName
	listeners []*listener
	sets      []*listenerSet
	// notAllowed are the ListenerSets that point at the Gateway from a
	// namespace it does not allow.
	notAllowed []*gwv1.ListenerSet
	// clientCert is what its routes' https services present to backends
	// (spec.tls.backend), clientCertCond its ResolvedRefs condition, both
	// only when clientCertSet.
	clientCert     *declarative.Certificate
	clientCertCond metav1.Condition
	clientCertSet  bool
}

// all lists the Gateway's own listeners and those of its ListenerSets.
func (g *gateway) all() []*listener {
	out := slices.Clone(g.listeners)
	for _, s := range g.sets {
		out = append(out, s.listeners...)
	}
	return out
}

type listener struct {
	spec gwv1.Listener
	gw   *gateway
	// set is the ListenerSet that declares the listener (nil: the Gateway);
	// namespace and generation are its owner's.
	set        *listenerSet
	namespace  string
	generation int64
	// kongProtocol is the Kong route protocol that serves this listener.
	kongProtocol string
	kinds        []gwv1.RouteGroupKind
	// secrets are the TLS Secrets an HTTPS listener serves.
	secrets      []*corev1.Secret
	accepted     metav1.Condition
	resolvedRefs metav1.Condition
	conflicted   metav1.Condition
	// listen is the Kong listen the listener reaches, and dstPort what
	// Kong's net.dst.port says for connections through it.
	listen  snapshot.Listen
	dstPort int
	// index is the listener's place among all listeners of the bound
	// Gateways: routes name the listeners they attach to by it, which holds
	// from one translation to the next while the Gateways are the same.
	index int
	// asksClientCerts marks an HTTPS listener refused because the Gateway
	// asks client certificates on its port.
	asksClientCerts bool
	// certConflict says why Kong serves another listener's certificates
	// for this listener's hostname (set by certificates).
	certConflict string
}

// attachable tells whether routes attach to the listener (and count in its
// attachedRoutes): it is accepted and conflicts with no other.
func (l *listener) attachable() bool {
	return l.accepted.Status == metav1.ConditionTrue && l.conflicted.Status == metav1.ConditionFalse
}

// usable tells whether Kong serves the listener: attachable, and its
// references resolve (an HTTPS listener without a usable certificate has
// routes attached, but serves none of them).
func (l *listener) usable() bool {
	return l.attachable() &&
		(l.resolvedRefs.Status == metav1.ConditionTrue || l.resolvedRefs.Reason == string(gwv1.ListenerReasonInvalidRouteKinds))
}

func (t *translator) ours(className gwv1.ObjectName) bool {
	class := t.snap.GatewayClasses[string(className)]
	return class != nil && string(class.Spec.ControllerName) == t.snap.ControllerName
}

// buildGateways checks the listeners of every bound Gateway of our class
// and of its ListenerSets, and marks those that conflict. Their statuses
// wait until routes are counted (finishGateways).
func (t *translator) buildGateways() []*gateway {
	var gws []*gateway
	byPort := map[gwv1.PortNumber][]*listener{}
	for _, obj := range t.snap.Gateways {
		if !t.ours(obj.Spec.GatewayClassName) {
			continue
		}
		g := &gateway{obj: obj, key: types.NamespacedName{Namespace: obj.Namespace, Name: obj.Name}}
		for _, spec := range obj.Spec.Listeners {
			g.listeners = append(g.listeners, t.checkListener(g, nil, spec))
		}
		t.listenerSets(g)
		for _, l := range g.all() {
			byPort[l.spec.Port] = append(byPort[l.spec.Port], l)
		}
		g.clientCert, g.clientCertCond, g.clientCertSet = t.backendClientCert(g)
		gws = append(gws, g)
	}
	for _, ls := range byPort {
		markConflicts(ls)
	}
	for i, l := range allListeners(gws) {
		l.index = i
	}
	return gws
}

func (t *translator) checkListener(g *gateway, set *listenerSet, spec gwv1.Listener) *listener {
	gen, ns := g.obj.Generation, g.key.Namespace
	if set != nil {
		gen, ns = set.obj.Generation, set.obj.Namespace
	}
	l := &listener{
		spec:         spec,
		gw:           g,
		set:          set,
		namespace:    ns,
		generation:   gen,
		accepted:     condition(string(gwv1.ListenerConditionAccepted), true, string(gwv1.ListenerReasonAccepted), "", gen),
		resolvedRefs: condition(string(gwv1.ListenerConditionResolvedRefs), true, string(gwv1.ListenerReasonResolvedRefs), "", gen),
		conflicted:   condition(string(gwv1.ListenerConditionConflicted), false, string(gwv1.ListenerReasonNoConflicts), "", gen),
	}
	reject := func(reason gwv1.ListenerConditionReason, format string, args ...any) *listener {
		l.accepted = condition(string(gwv1.ListenerConditionAccepted), false, string(reason), fmt.Sprintf(format, args...), gen)
		return l
	}
	l.kinds, l.resolvedRefs = supportedKinds(spec, gen)
	if h := hostnameOf(spec.Hostname); h != "" && !validHostname(h) {
		return reject(gwv1.ListenerReasonUnsupportedValue, "hostname %q is not a valid hostname", h)
	}
	wantSSL, stream, udp := false, false, false
	switch spec.Protocol {
	case gwv1.HTTPProtocolType:
		l.kongProtocol = "http"
	case gwv1.HTTPSProtocolType:
		l.kongProtocol, wantSSL = "https", true
		if spec.TLS != nil && spec.TLS.Mode != nil && *spec.TLS.Mode != gwv1.TLSModeTerminate {
			return reject(gwv1.ListenerReasonUnsupportedValue, "an HTTPS listener terminates TLS; mode %s needs a TLS listener", *spec.TLS.Mode)
		}
		if v := frontendValidation(g.obj, spec.Port); v != nil {
			// Served, the listener would take any client: less than asked.
			l.asksClientCerts = true
			return reject(gwv1.ListenerReasonUnsupportedValue,
				"spec.tls.frontend asks port %d to validate client certificates (mode %s), which Kong's open-source edition cannot do (its mtls-auth plugin is Enterprise only): the listener is not served rather than served to clients without a certificate",
				spec.Port, cmp.Or(v.Mode, gwv1.AllowValidOnly))
		}
		var problem *metav1.Condition
		if l.secrets, problem = t.listenerCertificates(l); problem != nil {
			l.resolvedRefs = *problem
		}
	case gwv1.TCPProtocolType:
		l.kongProtocol, stream = "tcp", true
	case gwv1.UDPProtocolType:
		l.kongProtocol, stream, udp = "udp", true, true
	case gwv1.TLSProtocolType:
		// Kong reads the server name only on an ssl stream listen, then
		// terminates or passes the connection through.
		stream, wantSSL = true, true
		if spec.TLS != nil && spec.TLS.Mode != nil && *spec.TLS.Mode == gwv1.TLSModePassthrough {
			l.kongProtocol = "tls_passthrough"
			break
		}
		l.kongProtocol = "tls"
		var problem *metav1.Condition
		if l.secrets, problem = t.listenerCertificates(l); problem != nil {
			l.resolvedRefs = *problem
		}
	default:
		return reject(gwv1.ListenerReasonUnsupportedProtocol, "protocol %s is not supported by konglet yet", spec.Protocol)
	}
	listen, err := t.kongListen(spec.Port, stream, udp)
	if err != nil {
		return reject(gwv1.ListenerReasonPortUnavailable, "%s", err)
	}
	l.listen = listen
	if stream {
		l.dstPort = t.streamDstPort(listen.Port, wantSSL)
	} else {
		// Kong's net.dst.port for a request (the Host normalizer drops a
		// port the client wrote): the host port port_maps maps the listen
		// from, else the listen port.
		mapped, ok := t.hostPort(listen.Port)
		l.dstPort = mapped
		if !ok {
			l.accepted.Message = fmt.Sprintf("Kong's listen %d has no port_maps entry, so Kong's router sees port %d, not %d: routes of this listener match port %d, and a Host header that names port %d does not reach them",
				listen.Port, listen.Port, spec.Port, listen.Port, spec.Port)
		}
		if spec.Protocol == gwv1.HTTPProtocolType && !listen.HTTP2 {
			l.withoutGRPC()
		}
	}
	if listen.UDP != udp {
		return reject(gwv1.ListenerReasonUnsupportedProtocol, "port %d reaches Kong's stream listen %d, which has udp=%t; a %s listener needs udp=%t",
			spec.Port, listen.Port, listen.UDP, spec.Protocol, udp)
	}
	if listen.SSL != wantSSL {
		return reject(gwv1.ListenerReasonUnsupportedProtocol,
			"port %d reaches Kong's listen %d, which has ssl=%t; a %s listener needs ssl=%t",
			spec.Port, listen.Port, listen.SSL, spec.Protocol, wantSSL)
	}
	return l
}

// frontendValidation is the client certificate validation the Gateway asks
// of its HTTPS listeners on port: a perPort entry's, else the default's
// (a perPort entry without validation turns it off for its port).
func frontendValidation(gw *gwv1.Gateway, port gwv1.PortNumber) *gwv1.FrontendTLSValidation {
	if gw.Spec.TLS == nil || gw.Spec.TLS.Frontend == nil {
		return nil
	}
	for _, pp := range gw.Spec.TLS.Frontend.PerPort {
		if pp.Port == port {
			return pp.TLS.Validation
		}
	}
	return gw.Spec.TLS.Frontend.Default.Validation
}

// supportedKinds intersects the listener's allowed kinds with what konglet
// serves on its protocol.
func supportedKinds(spec gwv1.Listener, gen int64) ([]gwv1.RouteGroupKind, metav1.Condition) {
	ok := condition(string(gwv1.ListenerConditionResolvedRefs), true, string(gwv1.ListenerReasonResolvedRefs), "", gen)
	served := []gwv1.RouteGroupKind{}
	kind := func(k gwv1.Kind) gwv1.RouteGroupKind {
		return gwv1.RouteGroupKind{Group: ptr(gwv1.Group(gwv1.GroupName)), Kind: k}
	}
	switch spec.Protocol {
	case gwv1.HTTPProtocolType, gwv1.HTTPSProtocolType:
		served = append(served, kind(kindHTTPRoute), kind(kindGRPCRoute))
	case gwv1.TLSProtocolType:
		served = append(served, kind(kindTLSRoute))
	case gwv1.TCPProtocolType:
		served = append(served, kind(kindTCPRoute))
	case gwv1.UDPProtocolType:
		served = append(served, kind(kindUDPRoute))
	}
	if spec.AllowedRoutes == nil || len(spec.AllowedRoutes.Kinds) == 0 {
		return served, ok
	}
	var kinds []gwv1.RouteGroupKind
	var invalid []string
	for _, k := range spec.AllowedRoutes.Kinds {
		group := gwv1.GroupName
		if k.Group != nil {
			group = string(*k.Group)
		}
		if slices.ContainsFunc(served, func(s gwv1.RouteGroupKind) bool { return string(*s.Group) == group && s.Kind == k.Kind }) {
			kinds = append(kinds, gwv1.RouteGroupKind{Group: ptr(gwv1.Group(group)), Kind: k.Kind})
		} else {
			invalid = append(invalid, group+"/"+string(k.Kind))
		}
	}
	if len(invalid) > 0 {
		ok = condition(string(gwv1.ListenerConditionResolvedRefs), false, string(gwv1.ListenerReasonInvalidRouteKinds),
			fmt.Sprintf("route kinds not supported on a %s listener: %s", spec.Protocol, strings.Join(invalid, ", ")), gen)
	}
	if kinds == nil {
		kinds = []gwv1.RouteGroupKind{}
	}
	return kinds, ok
}

// markConflicts flags listeners on one port that Kong could not tell apart:
// different protocols, or the same hostname (across all bound Gateways,
// since they share one Kong). ls is in precedence order: a ListenerSet's
// listener never takes its port from a listener that comes before it and
// keeps it: a Gateway's own, or a ListenerSet listener (of an older set, or
// before it in its own) that did not lose a conflict itself. A conflicted
// listener is not accepted either, for the conflict's reason: the spec
// accepts none of the indistinct listeners, and the conflict, read from
// the specs alone, says more than what Kong's listens then lack (a TCP
// listener on an HTTP port has no stream listen).
func markConflicts(ls []*listener) {
	for i, a := range ls {
		for j, b := range ls {
			if i == j || (a.set == nil && b.set != nil) || (a.set != nil && b.set != nil && (j > i || b.conflicted.Status == metav1.ConditionTrue)) {
				continue
			}
			var reason gwv1.ListenerConditionReason
			var msg string
			switch {
			case (a.spec.Protocol == gwv1.UDPProtocolType) != (b.spec.Protocol == gwv1.UDPProtocolType):
				continue // UDP and TCP ports are distinct
			case a.spec.Protocol != b.spec.Protocol:
				reason, msg = gwv1.ListenerReasonProtocolConflict, fmt.Sprintf("port %d is also used by %s with protocol %s", a.spec.Port, b.describe(), b.spec.Protocol)
			case hostnameOf(a.spec.Hostname) == hostnameOf(b.spec.Hostname):
				reason, msg = gwv1.ListenerReasonHostnameConflict, fmt.Sprintf("%s serves the same port and hostname %q", b.describe(), hostnameOf(b.spec.Hostname))
			default:
				continue
			}
			a.conflicted = condition(string(gwv1.ListenerConditionConflicted), true, string(reason), msg, a.generation)
			a.accepted = condition(string(gwv1.ListenerConditionAccepted), false, string(reason), msg, a.generation)
			break
		}
	}
}

// describe names a listener in messages.
func (l *listener) describe() string {
	if l.set != nil {
		return fmt.Sprintf("listener %q of ListenerSet %s/%s", l.spec.Name, l.set.obj.Namespace, l.set.obj.Name)
	}
	return fmt.Sprintf("listener %q of Gateway %s", l.spec.Name, l.gw.key)
}

// allListeners lists every listener of the Gateways, in a fixed order.
func allListeners(gws []*gateway) []*listener {
	var out []*listener
	for _, g := range gws {
		out = append(out, g.all()...)
	}
	return out
}

// withoutGRPC takes GRPCRoute from the kinds of a cleartext HTTP listener
// whose Kong listen has no http2: gRPC without TLS is HTTP/2 from the
// first byte (h2c), which such a listen cannot read.
func (l *listener) withoutGRPC() {
	grpc := func(k gwv1.RouteGroupKind) bool { return k.Kind == kindGRPCRoute }
	if !slices.ContainsFunc(l.kinds, grpc) {
		return
	}
	l.kinds = slices.DeleteFunc(slices.Clone(l.kinds), grpc)
	if l.spec.AllowedRoutes != nil && slices.ContainsFunc(l.spec.AllowedRoutes.Kinds, grpc) && l.resolvedRefs.Status == metav1.ConditionTrue {
		l.resolvedRefs = condition(string(gwv1.ListenerConditionResolvedRefs), false, string(gwv1.ListenerReasonInvalidRouteKinds),
			fmt.Sprintf("GRPCRoute needs HTTP/2 on Kong's listen %d (gRPC without TLS): add http2 to that proxy_listen", l.listen.Port), l.generation)
	}
}
