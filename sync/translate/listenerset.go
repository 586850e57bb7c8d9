package translate

import (
	"cmp"
	"fmt"
	"slices"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/types"
	gwv1 "sigs.k8s.io/gateway-api/apis/v1"
)

// listenerSet is a ListenerSet attached to a bound Gateway: its listeners
// work like the Gateway's own, for the routes that name the ListenerSet.
type listenerSet struct {
	obj       *gwv1.ListenerSet
	listeners []*listener
}

// listenerSets takes the ListenerSets that point at g, oldest first (the
// Gateway API's order), and checks that g allows them.
func (t *translator) listenerSets(g *gateway) {
	sets := slices.Clone(t.snap.ListenerSets)
	slices.SortFunc(sets, func(a, b *gwv1.ListenerSet) int {
		return cmp.Or(a.CreationTimestamp.Compare(b.CreationTimestamp.Time), cmp.Compare(a.Namespace, b.Namespace), cmp.Compare(a.Name, b.Name))
	})
	for _, obj := range sets {
		ref := obj.Spec.ParentRef
		ns := obj.Namespace
		if ref.Namespace != nil {
			ns = string(*ref.Namespace)
		}
		if (ref.Group != nil && *ref.Group != gwv1.GroupName) || (ref.Kind != nil && *ref.Kind != kindGateway) ||
			ns != g.key.Namespace || string(ref.Name) != g.key.Name {
			continue
		}
		if !t.listenerSetAllowed(g, obj.Namespace) {
			g.notAllowed = append(g.notAllowed, obj)
			continue
		}
		set := &listenerSet{obj: obj}
		for _, e := range obj.Spec.Listeners {
			spec := gwv1.Listener{Name: e.Name, Hostname: e.Hostname, Port: e.Port, Protocol: e.Protocol, TLS: e.TLS, AllowedRoutes: e.AllowedRoutes}
			set.listeners = append(set.listeners, t.checkListener(g, set, spec))
		}
		g.sets = append(g.sets, set)
	}
}

func (t *translator) listenerSetAllowed(g *gateway, ns string) bool {
	allowed := g.obj.Spec.AllowedListeners
	if allowed == nil || allowed.Namespaces == nil || allowed.Namespaces.From == nil {
		return false // the Gateway API default: no ListenerSets
	}
	switch *allowed.Namespaces.From {
	case gwv1.NamespacesFromAll:
		return true
	case gwv1.NamespacesFromSame:
		return ns == g.key.Namespace
	case gwv1.NamespacesFromSelector:
		namespace := t.snap.Namespaces[ns]
		if allowed.Namespaces.Selector == nil || namespace == nil {
			return false
		}
		sel, err := metav1.LabelSelectorAsSelector(allowed.Namespaces.Selector)
		return err == nil && sel.Matches(labels.Set(namespace.Labels))
	}
	return false
}

// listenerSetStatuses writes the statuses of g's ListenerSets into out,
// once routes are attached.
func listenerSetStatuses(g *gateway, attached []int, out map[types.NamespacedName]gwv1.ListenerSetStatus) {
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
				programmed = condition(string(gwv1.ListenerSetConditionProgrammed), false, string(gwv1.ListenerSetReasonInvalid), msg, gen)
			}
		}
		st.Conditions = []metav1.Condition{accepted, programmed}
		out[types.NamespacedName{Namespace: set.obj.Namespace, Name: set.obj.Name}] = st
	}
}
