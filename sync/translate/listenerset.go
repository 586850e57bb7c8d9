package translate

import (
	"cmp"
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

// listenerSetParent is the Gateway a ListenerSet points at (false: its
// parentRef is of another kind).
func listenerSetParent(obj *gwv1.ListenerSet) (types.NamespacedName, bool) {
	ref := obj.Spec.ParentRef
	if (ref.Group != nil && *ref.Group != gwv1.GroupName) || (ref.Kind != nil && *ref.Kind != kindGateway) {
		return types.NamespacedName{}, false
	}
	parent := types.NamespacedName{Namespace: obj.Namespace, Name: string(ref.Name)}
	if ref.Namespace != nil {
		parent.Namespace = string(*ref.Namespace)
	}
	return parent, true
}

// listenerSets takes the ListenerSets that point at g, oldest first (the
// Gateway API's order), and checks that g allows them.
func (t *translator) listenerSets(g *gateway) {
	sets := slices.Clone(t.snap.ListenerSets)
	slices.SortFunc(sets, func(a, b *gwv1.ListenerSet) int {
		return cmp.Or(a.CreationTimestamp.Compare(b.CreationTimestamp.Time), cmp.Compare(a.Namespace, b.Namespace), cmp.Compare(a.Name, b.Name))
	})
	for _, obj := range sets {
		if parent, ok := listenerSetParent(obj); !ok || parent != g.key {
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
