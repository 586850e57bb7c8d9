package translate

import (
	"cmp"
	"fmt"
	"slices"
	"strconv"
	"strings"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	gwv1 "sigs.k8s.io/gateway-api/apis/v1"

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

// gatewayClassStatuses accepts every GatewayClass of our controller.
func (t *translator) gatewayClassStatuses() map[string]gwv1.GatewayClassStatus {
	out := map[string]gwv1.GatewayClassStatus{}
	for name, class := range t.snap.GatewayClasses {
		if string(class.Spec.ControllerName) != t.snap.ControllerName {
			continue
		}
		out[name] = gwv1.GatewayClassStatus{
			Conditions: []metav1.Condition{condition(string(gwv1.GatewayClassConditionStatusAccepted), true,
				string(gwv1.GatewayClassReasonAccepted), "Handled by konglet", class.Generation)},
			SupportedFeatures: supportedFeatures(t.snap.Kong),
		}
	}
	return out
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

// listenerPorts is what a Kong route needs to know of the listeners beside
// its own.
type listenerPorts struct {
	// hosts are the hostnames of the usable listeners of each port.
	hosts map[gwv1.PortNumber][]string
	// ofProtocol are the ports of the usable listeners of each Kong
	// protocol (http, https, tcp...).
	ofProtocol map[string]map[gwv1.PortNumber]bool
}

func listenerPortsOf(gws []*gateway) listenerPorts {
	ports := listenerPorts{hosts: map[gwv1.PortNumber][]string{}, ofProtocol: map[string]map[gwv1.PortNumber]bool{}}
	for _, l := range allListeners(gws) {
		port := l.spec.Port
		if l.usable() {
			ports.hosts[port] = append(ports.hosts[port], hostnameOf(l.spec.Hostname))
		}
		// A port that asks client certificates still counts among the
		// protocol's ports, so that the other listeners' routes match
		// their own ports, not connections to it.
		if l.usable() || l.asksClientCerts {
			if ports.ofProtocol[l.kongProtocol] == nil {
				ports.ofProtocol[l.kongProtocol] = map[gwv1.PortNumber]bool{}
			}
			ports.ofProtocol[l.kongProtocol][port] = true
		}
	}
	return ports
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
	l.listen, l.dstPort = listen, int(spec.Port)
	if stream {
		l.dstPort = t.streamDstPort(listen.Port, wantSSL)
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

// kongListen follows a listener port (a port of the publish Service) to the
// Kong listen that serves it (DESIGN decision 2): a proxy listen for HTTP,
// a stream listen for TCP, UDP and TLS.
func (t *translator) kongListen(port gwv1.PortNumber, stream, udp bool) (snapshot.Listen, error) {
	protocol := corev1.ProtocolTCP
	if udp {
		protocol = corev1.ProtocolUDP
	}
	listens, kind := t.snap.Kong.ProxyListens, "proxy"
	if stream {
		listens, kind = t.snap.Kong.StreamListens, "stream"
	}
	kongPort, err := t.targetPort(port, protocol)
	if err != nil {
		return snapshot.Listen{}, err
	}
	for _, listen := range listens {
		if listen.Port == kongPort {
			return listen, nil
		}
	}
	ports := make([]string, 0, len(listens))
	for _, listen := range listens {
		ports = append(ports, strconv.Itoa(listen.Port))
	}
	return snapshot.Listen{}, fmt.Errorf("port %d leads to port %d, where Kong has no %s listen (Kong %s listens: %s)",
		port, kongPort, kind, kind, strings.Join(ports, ", "))
}

// streamDstPort is what Kong's net.dst.port is for a stream connection on
// a listen: the host port port_maps maps it from, else the listen port.
// Kong routes a TLS connection twice, on its ssl listen (mapped port) and
// again after terminating or passing it (the listen port): when the two
// differ no port can match both, and 0 says "do not match on the port".
func (t *translator) streamDstPort(listenPort int, tls bool) int {
	for host, container := range t.snap.Kong.PortMaps {
		if container == listenPort {
			if tls && host != listenPort {
				return 0
			}
			return host
		}
	}
	return listenPort
}

func (t *translator) targetPort(port gwv1.PortNumber, protocol corev1.Protocol) (int, error) {
	svc := t.snap.PublishService
	if svc == nil {
		if mapped, ok := t.snap.Kong.PortMaps[int(port)]; ok {
			return mapped, nil
		}
		return int(port), nil
	}
	for _, sp := range svc.Spec.Ports {
		if sp.Port != int32(port) || (sp.Protocol != protocol && (sp.Protocol != "" || protocol != corev1.ProtocolTCP)) {
			continue
		}
		if sp.TargetPort.IntValue() > 0 {
			return sp.TargetPort.IntValue(), nil
		}
		if sp.TargetPort.String() == "" || sp.TargetPort.String() == "0" {
			return int(sp.Port), nil
		}
		if p, ok := t.namedContainerPort(sp.TargetPort.String()); ok {
			return p, nil
		}
		return 0, fmt.Errorf("Service %s/%s port %d targets the named port %q, which this Pod does not declare",
			svc.Namespace, svc.Name, port, sp.TargetPort.String())
	}
	return 0, fmt.Errorf("Service %s/%s has no %s port %d", svc.Namespace, svc.Name, protocol, port)
}

func (t *translator) namedContainerPort(name string) (int, bool) {
	if t.snap.Pod == nil {
		return 0, false
	}
	for _, c := range t.snap.Pod.Spec.Containers {
		for _, p := range c.Ports {
			if p.Name == name {
				return int(p.ContainerPort), true
			}
		}
	}
	return 0, false
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
// listener never takes its port from a listener that comes before it (a
// Gateway's own, or an older ListenerSet's), which keeps it.
func markConflicts(ls []*listener) {
	for i, a := range ls {
		for j, b := range ls {
			if i == j || (a.set == nil && b.set != nil) || (a.set != nil && b.set != nil && j > i) {
				continue
			}
			gen := a.generation
			switch {
			case (a.spec.Protocol == gwv1.UDPProtocolType) != (b.spec.Protocol == gwv1.UDPProtocolType):
				continue // UDP and TCP ports are distinct
			case a.spec.Protocol != b.spec.Protocol:
				a.conflicted = condition(string(gwv1.ListenerConditionConflicted), true, string(gwv1.ListenerReasonProtocolConflict),
					fmt.Sprintf("port %d is also used by %s with protocol %s", a.spec.Port, b.describe(), b.spec.Protocol), gen)
			case hostnameOf(a.spec.Hostname) == hostnameOf(b.spec.Hostname):
				a.conflicted = condition(string(gwv1.ListenerConditionConflicted), true, string(gwv1.ListenerReasonHostnameConflict),
					fmt.Sprintf("%s serves the same port and hostname %q", b.describe(), hostnameOf(b.spec.Hostname)), gen)
			default:
				continue
			}
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

func hostnameOf(h *gwv1.Hostname) string {
	if h == nil {
		return ""
	}
	return string(*h)
}

func ptr[T any](v T) *T { return &v }

// allListeners lists every listener of the Gateways, in a fixed order.
func allListeners(gws []*gateway) []*listener {
	var out []*listener
	for _, g := range gws {
		out = append(out, g.all()...)
	}
	return out
}

// finishGateways writes the statuses of the Gateways and of their
// ListenerSets once routes are attached; attached counts the routes of each
// listener (by index).
func (t *translator) finishGateways(gws []*gateway, attached []int) (map[types.NamespacedName]gwv1.GatewayStatus, map[types.NamespacedName]gwv1.ListenerSetStatus) {
	gateways := make(map[types.NamespacedName]gwv1.GatewayStatus, len(gws))
	sets := map[types.NamespacedName]gwv1.ListenerSetStatus{}
	for _, g := range gws {
		gen := g.obj.Generation
		st := gwv1.GatewayStatus{Addresses: t.gatewayAddresses()}
		valid := 0
		for _, l := range g.listeners {
			if l.usable() {
				valid++
			}
			st.Listeners = append(st.Listeners, l.status(attached[l.index]))
		}
		if g.obj.Spec.AllowedListeners != nil {
			st.AttachedListenerSets = ptr(int32(len(g.sets)))
		}
		listenerSetStatuses(g, attached, sets)
		accepted := condition(string(gwv1.GatewayConditionAccepted), true, string(gwv1.GatewayReasonAccepted), t.routerNote(g), gen)
		programmed := condition(string(gwv1.GatewayConditionProgrammed), true, string(gwv1.GatewayReasonProgrammed), "", gen)
		switch {
		case valid == 0:
			accepted = condition(string(gwv1.GatewayConditionAccepted), false, string(gwv1.GatewayReasonListenersNotValid), "no listener is valid", gen)
			programmed = condition(string(gwv1.GatewayConditionProgrammed), false, string(gwv1.GatewayReasonInvalid), "no listener is valid", gen)
		case valid < len(g.listeners):
			accepted = condition(string(gwv1.GatewayConditionAccepted), true, string(gwv1.GatewayReasonListenersNotValid),
				fmt.Sprintf("%d of %d listeners are valid", valid, len(g.listeners)), gen)
		}
		if valid > 0 && len(st.Addresses) == 0 {
			programmed = condition(string(gwv1.GatewayConditionProgrammed), false, string(gwv1.GatewayReasonAddressNotAssigned),
				"the publish Service has no address yet", gen)
		}
		st.Conditions = []metav1.Condition{accepted, programmed}
		gateways[g.key] = st
	}
	return gateways, sets
}

// status is the listener's status (a ListenerStatus; a ListenerSet entry
// has the same fields) with the number of routes attached to it.
func (l *listener) status(attachedRoutes int) gwv1.ListenerStatus {
	programmed := condition(string(gwv1.ListenerConditionProgrammed), true, string(gwv1.ListenerReasonProgrammed), "", l.generation)
	if !l.usable() {
		programmed = condition(string(gwv1.ListenerConditionProgrammed), false, string(gwv1.ListenerReasonInvalid),
			"the listener is not accepted, conflicts with another, or has unresolved references", l.generation)
	}
	return gwv1.ListenerStatus{
		Name:           l.spec.Name,
		SupportedKinds: l.kinds,
		AttachedRoutes: int32(attachedRoutes),
		Conditions:     []metav1.Condition{l.accepted, l.conflicted, l.resolvedRefs, programmed},
	}
}

// routerNote says, on the Gateway, what Kong's router flavor cannot do, and
// where listeners could be isolated, whether Kong lets konglet do it.
func (t *translator) routerNote(g *gateway) string {
	if t.snap.Kong.RouterFlavor != snapshot.RouterExpressions {
		return fmt.Sprintf("Kong's router_flavor is %s: listeners are not isolated from each other, precedence between routes is approximate and query parameter matches are refused; set router_flavor=expressions for full Gateway API semantics",
			t.snap.Kong.RouterFlavor)
	}
	if t.hostsNormalized() || httpListeners(g) < 2 {
		return ""
	}
	return "listeners are not isolated from each other: Kong's router takes the port from the Host header and keeps a trailing dot, and konglet's pre-function plugin that removes both cannot run (pre-function is not enabled, or untrusted_lua is off); enable pre-function with untrusted_lua=sandbox"
}

// httpListeners counts the Gateway's usable HTTP and HTTPS listeners.
func httpListeners(g *gateway) int {
	n := 0
	for _, l := range g.all() {
		if l.usable() && (l.kongProtocol == "http" || l.kongProtocol == "https") {
			n++
		}
	}
	return n
}

// addresses are the publish Service's (DESIGN decision 5).
func (t *translator) gatewayAddresses() []gwv1.GatewayStatusAddress {
	svc := t.snap.PublishService
	if svc == nil {
		return nil
	}
	var out []gwv1.GatewayStatusAddress
	add := func(v string) {
		typ := gwv1.IPAddressType
		if !isIP(v) {
			typ = gwv1.HostnameAddressType
		}
		out = append(out, gwv1.GatewayStatusAddress{Type: ptr(typ), Value: v})
	}
	for _, in := range svc.Status.LoadBalancer.Ingress {
		switch {
		case in.IP != "":
			add(in.IP)
		case in.Hostname != "":
			add(in.Hostname)
		}
	}
	if len(out) == 0 {
		for _, ip := range svc.Spec.ExternalIPs {
			add(ip)
		}
	}
	if len(out) == 0 {
		ips := svc.Spec.ClusterIPs
		if len(ips) == 0 && svc.Spec.ClusterIP != "" {
			ips = []string{svc.Spec.ClusterIP}
		}
		for _, ip := range ips {
			if ip != corev1.ClusterIPNone {
				add(ip)
			}
		}
	}
	return out
}
