package translate

import (
	"fmt"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	gwv1 "sigs.k8s.io/gateway-api/apis/v1"

	"github.com/konglet/konglet/sync/snapshot"
)

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
		attachedSets := listenerSetStatuses(g, attached, sets)
		if g.obj.Spec.AllowedListeners != nil {
			st.AttachedListenerSets = ptr(int32(attachedSets))
		}
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
		if unsupported, missing := checkAddresses(g.obj.Spec.Addresses, st.Addresses); unsupported != "" {
			accepted = condition(string(gwv1.GatewayConditionAccepted), false, string(gwv1.GatewayReasonUnsupportedAddress), unsupported, gen)
			programmed = condition(string(gwv1.GatewayConditionProgrammed), false, string(gwv1.GatewayReasonInvalid), unsupported, gen)
		} else if missing != "" && valid > 0 {
			programmed = condition(string(gwv1.GatewayConditionProgrammed), false, string(gwv1.GatewayReasonAddressNotAssigned), missing, gen)
		}
		st.Conditions = []metav1.Condition{accepted, programmed}
		if g.clientCertSet {
			st.Conditions = append(st.Conditions, g.clientCertCond)
		}
		gateways[g.key] = st
	}
	return gateways, sets
}

// status is the listener's status (a ListenerStatus; a ListenerSet entry
// has the same fields) with the number of routes attached to it.
func (l *listener) status(attachedRoutes int) gwv1.ListenerStatus {
	programmed := condition(string(gwv1.ListenerConditionProgrammed), true, string(gwv1.ListenerReasonProgrammed), "", l.generation)
	switch {
	case l.conflicted.Status == metav1.ConditionTrue:
		programmed = condition(string(gwv1.ListenerConditionProgrammed), false, l.conflicted.Reason, l.conflicted.Message, l.generation)
	case !l.usable():
		programmed = condition(string(gwv1.ListenerConditionProgrammed), false, string(gwv1.ListenerReasonInvalid),
			"the listener is not accepted, conflicts with another, or has unresolved references", l.generation)
	case l.certConflict != "":
		programmed = condition(string(gwv1.ListenerConditionProgrammed), false, string(gwv1.ListenerReasonInvalid), l.certConflict, l.generation)
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
	var notes []string
	if t.snap.Kong.RouterFlavor != snapshot.RouterExpressions {
		notes = append(notes, fmt.Sprintf("Kong's router_flavor is %s: query parameter matches are refused, routes of listeners without a hostname match on every port (its traditional fields can carry a port only with a hostname), and misdirected HTTPS requests (TLS server name of one listener, Host of another) are not answered 421; set router_flavor=expressions for full Gateway API semantics",
			t.snap.Kong.RouterFlavor))
	}
	if !t.hostsNormalized() && httpListeners(g) >= 2 {
		notes = append(notes, "listeners are not isolated from each other, nor misdirected HTTPS requests answered 421: Kong's router takes the port from the Host header and keeps a trailing dot, and konglet's pre-function plugin that removes both cannot run (pre-function is not enabled, or untrusted_lua is off); enable pre-function with untrusted_lua=sandbox")
	}
	return joinMessages(notes)
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
	for _, in := range svc.LoadBalancer {
		switch {
		case in.IP != "":
			add(in.IP)
		case in.Hostname != "":
			add(in.Hostname)
		}
	}
	if len(out) == 0 {
		for _, ip := range svc.ExternalIPs {
			add(ip)
		}
	}
	if len(out) == 0 {
		for _, ip := range svc.ClusterIPs {
			if ip != corev1.ClusterIPNone {
				add(ip)
			}
		}
	}
	return out
}

// listenerSetStatuses writes the statuses of g's ListenerSets into out,
// once routes are attached, and counts those accepted (attached to g, in
// the spec's words: at least one valid listener).
func listenerSetStatuses(g *gateway, attached []int, out map[types.NamespacedName]gwv1.ListenerSetStatus) int {
	attachedSets := 0
	for _, obj := range g.notAllowed {
		out[types.NamespacedName{Namespace: obj.Namespace, Name: obj.Name}] = gwv1.ListenerSetStatus{Conditions: []metav1.Condition{
			condition(string(gwv1.ListenerSetConditionAccepted), false, string(gwv1.ListenerSetReasonNotAllowed),
				fmt.Sprintf("Gateway %s does not allow ListenerSets from namespace %s (spec.allowedListeners)", g.key, obj.Namespace), obj.Generation),
			condition(string(gwv1.ListenerSetConditionProgrammed), false, string(gwv1.ListenerSetReasonNotAllowed), "not accepted", obj.Generation),
		}}
	}
	for _, set := range g.sets {
		gen := set.obj.Generation
		st := gwv1.ListenerSetStatus{}
		valid := 0
		for _, l := range set.listeners {
			if l.usable() {
				valid++
			}
			ls := l.status(attached[l.index])
			st.Listeners = append(st.Listeners, gwv1.ListenerEntryStatus{Name: ls.Name, SupportedKinds: ls.SupportedKinds,
				AttachedRoutes: ls.AttachedRoutes, Conditions: ls.Conditions})
		}
		accepted := condition(string(gwv1.ListenerSetConditionAccepted), true, string(gwv1.ListenerSetReasonAccepted), "", gen)
		programmed := condition(string(gwv1.ListenerSetConditionProgrammed), true, string(gwv1.ListenerSetReasonProgrammed), "", gen)
		if valid < len(set.listeners) {
			msg := fmt.Sprintf("%d of %d listeners are valid", valid, len(set.listeners))
			accepted = condition(string(gwv1.ListenerSetConditionAccepted), valid > 0, string(gwv1.ListenerSetReasonListenersNotValid), msg, gen)
			if valid == 0 {
				programmed = condition(string(gwv1.ListenerSetConditionProgrammed), false, string(gwv1.ListenerSetReasonListenersNotValid), msg, gen)
			}
		}
		if valid > 0 {
			attachedSets++
		}
		st.Conditions = []metav1.Condition{accepted, programmed}
		out[types.NamespacedName{Namespace: set.obj.Namespace, Name: set.obj.Name}] = st
	}
	return attachedSets
}

// checkAddresses compares the addresses a Gateway asks for with the publish
// Service's: konglet describes an existing Kong Service and assigns none.
func checkAddresses(wanted []gwv1.GatewaySpecAddress, have []gwv1.GatewayStatusAddress) (unsupported, missing string) {
	for _, a := range wanted {
		typ := gwv1.IPAddressType
		if a.Type != nil {
			typ = *a.Type
		}
		if typ != gwv1.IPAddressType && typ != gwv1.HostnameAddressType {
			return fmt.Sprintf("address type %s is not supported: konglet reports the addresses of the publish Service", typ), ""
		}
		found := false
		for _, h := range have {
			if (h.Type == nil && typ == gwv1.IPAddressType || h.Type != nil && *h.Type == typ) && (a.Value == "" || h.Value == a.Value) {
				found = true
			}
		}
		if !found && missing == "" {
			missing = fmt.Sprintf("address %s %q is not an address of the publish Service, and konglet assigns none (it serves an existing Kong Service)", typ, a.Value)
		}
	}
	return "", missing
}
