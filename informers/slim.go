package informers

import (
	corev1 "k8s.io/api/core/v1"
	discoveryv1 "k8s.io/api/discovery/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	gwv1 "sigs.k8s.io/gateway-api/apis/v1"

	"github.com/konglet/konglet/sync/snapshot"
)

// transform is the informers' transform: trim, then, for the kinds that
// make up most of a cluster, a copy with only the fields konglet reads
// (the rest of the decoded object becomes garbage at once), and the values
// that recur across HTTPRoutes and GRPCRoutes shared (interner). Services and
// EndpointSlices are cached cluster-wide (a ClusterIP check reads every
// Service), and routes that name no bound Gateway are kept as stubs: all
// of them arrive through here, so what is kept is decided for each version
// of an object from that version alone, and a route that starts to name a
// Gateway arrives whole.
func (c *Cache) transform(obj any) (any, error) {
	obj, err := trim(obj)
	if err != nil {
		return obj, err
	}
	switch o := obj.(type) {
	case *corev1.Service:
		return c.slimService(o), nil
	case *discoveryv1.EndpointSlice:
		return c.slimEndpointSlice(o), nil
	case *corev1.Pod:
		return slimPod(o), nil
	case *gwv1.HTTPRoute:
		c.intern.httpRoute(o)
		if !c.namesBound(o.Namespace, o.Spec.CommonRouteSpec) {
			return &gwv1.HTTPRoute{ObjectMeta: o.ObjectMeta, Spec: gwv1.HTTPRouteSpec{CommonRouteSpec: o.Spec.CommonRouteSpec},
				Status: gwv1.HTTPRouteStatus{RouteStatus: c.ownStatus(o.Status.RouteStatus)}}, nil
		}
	case *gwv1.GRPCRoute:
		c.intern.grpcRoute(o)
		if !c.namesBound(o.Namespace, o.Spec.CommonRouteSpec) {
			return &gwv1.GRPCRoute{ObjectMeta: o.ObjectMeta, Spec: gwv1.GRPCRouteSpec{CommonRouteSpec: o.Spec.CommonRouteSpec},
				Status: gwv1.GRPCRouteStatus{RouteStatus: c.ownStatus(o.Status.RouteStatus)}}, nil
		}
	case *gwv1.TLSRoute:
		if !c.namesBound(o.Namespace, o.Spec.CommonRouteSpec) {
			return &gwv1.TLSRoute{ObjectMeta: o.ObjectMeta, Spec: gwv1.TLSRouteSpec{CommonRouteSpec: o.Spec.CommonRouteSpec},
				Status: gwv1.TLSRouteStatus{RouteStatus: c.ownStatus(o.Status.RouteStatus)}}, nil
		}
	case *gwv1.TCPRoute:
		if !c.namesBound(o.Namespace, o.Spec.CommonRouteSpec) {
			return &gwv1.TCPRoute{ObjectMeta: o.ObjectMeta, Spec: gwv1.TCPRouteSpec{CommonRouteSpec: o.Spec.CommonRouteSpec},
				Status: gwv1.TCPRouteStatus{RouteStatus: c.ownStatus(o.Status.RouteStatus)}}, nil
		}
	case *gwv1.UDPRoute:
		if !c.namesBound(o.Namespace, o.Spec.CommonRouteSpec) {
			return &gwv1.UDPRoute{ObjectMeta: o.ObjectMeta, Spec: gwv1.UDPRouteSpec{CommonRouteSpec: o.Spec.CommonRouteSpec},
				Status: gwv1.UDPRouteStatus{RouteStatus: c.ownStatus(o.Status.RouteStatus)}}, nil
		}
	}
	return obj, nil
}

// namesBound tells whether parentRefs of a route in namespace ns can name a
// bound Gateway: directly, or through a ListenerSet (which one's parent is
// not known from the route alone, so every ListenerSet counts).
func (c *Cache) namesBound(ns string, spec gwv1.CommonRouteSpec) bool {
	if spec.UseDefaultGateways != "" {
		return true // not implemented by konglet: kept whole all the same
	}
	for _, ref := range spec.ParentRefs {
		if ref.Group != nil && *ref.Group != gwv1.GroupName {
			continue
		}
		kind := gwv1.Kind("Gateway")
		if ref.Kind != nil {
			kind = *ref.Kind
		}
		switch kind {
		case "ListenerSet":
			return true
		case "Gateway":
			key := types.NamespacedName{Namespace: ns, Name: string(ref.Name)}
			if ref.Namespace != nil {
				key.Namespace = string(*ref.Namespace)
			}
			if c.bound[key] {
				return true
			}
		}
	}
	return false
}

// routeMatters tells whether a version of a route can change what konglet
// writes (see mayMatter).
func (c *Cache) routeMatters(ns string, spec gwv1.CommonRouteSpec, st gwv1.RouteStatus) bool {
	return c.namesBound(ns, spec) || len(c.ownStatus(st).Parents) > 0
}

// ownStatus keeps a stub route's status only when konglet wrote a part of
// it, which the status writer removes once the route no longer names the
// Gateway: the parents other controllers report are never read.
func (c *Cache) ownStatus(st gwv1.RouteStatus) gwv1.RouteStatus {
	for _, p := range st.Parents {
		if string(p.ControllerName) == c.scope.ControllerName {
			return st
		}
	}
	return gwv1.RouteStatus{}
}

// slimService keeps what the translation reads (snapshot.Service): ports,
// type, addresses (backends, ClusterIP ownership, the publish Service's
// addresses), the upstream mode annotation, and the selector where the
// publish Service is looked for.
func (c *Cache) slimService(s *corev1.Service) *snapshot.Service {
	svc := snapshot.ServiceOf(s)
	if svc.Namespace != c.scope.PodNamespace {
		svc.Selector = nil
	}
	svc.Namespace, svc.Type = c.intern.str(svc.Namespace), corev1.ServiceType(c.intern.str(string(svc.Type)))
	for i := range svc.Ports {
		p := &svc.Ports[i]
		p.Name, p.Protocol, p.AppProtocol = c.intern.str(p.Name), corev1.Protocol(c.intern.str(string(p.Protocol))), internPtr(c.intern, p.AppProtocol)
	}
	return svc
}

// slimEndpointSlice keeps addresses, ports and readiness
// (snapshot.EndpointSlice), and the Pods behind the endpoints only where
// the replicas of konglet's own Pod are counted (the publish Service's
// slices).
func (c *Cache) slimEndpointSlice(es *discoveryv1.EndpointSlice) *snapshot.EndpointSlice {
	refs := es.Namespace == c.scope.PodNamespace || es.Namespace == c.scope.PublishService.Namespace
	slim := snapshot.EndpointSliceOf(es, refs)
	slim.Namespace, slim.AddressType = c.intern.str(slim.Namespace), discoveryv1.AddressType(c.intern.str(string(slim.AddressType)))
	for i := range slim.Ports {
		p := &slim.Ports[i]
		p.Name, p.Protocol, p.Port, p.AppProtocol = internPtr(c.intern, p.Name), internPtr(c.intern, p.Protocol), internPtr(c.intern, p.Port), internPtr(c.intern, p.AppProtocol)
	}
	return slim
}

// slimPod keeps what konglet reads of the Pods of its namespace: their IPs
// (never a route's backend), their conditions (a peer's load, for
// Programmed), labels (which Service selects konglet's own Pod) and
// container ports (Kong's listens). A Kong Pod carries much more
// (environment, volumes, probes, container statuses), and every replica
// caches every Pod of its namespace. It slims the decoded object in place:
// a copy would allocate the large struct again.
func slimPod(p *corev1.Pod) *corev1.Pod {
	m := p.ObjectMeta
	p.ObjectMeta = metav1.ObjectMeta{Name: m.Name, Namespace: m.Namespace, UID: m.UID, ResourceVersion: m.ResourceVersion,
		Generation: m.Generation, Labels: m.Labels, CreationTimestamp: m.CreationTimestamp, DeletionTimestamp: m.DeletionTimestamp}
	containers := make([]corev1.Container, len(p.Spec.Containers))
	for i, ctr := range p.Spec.Containers {
		containers[i] = corev1.Container{Name: ctr.Name, Ports: ctr.Ports}
	}
	p.Spec = corev1.PodSpec{Containers: containers}
	p.Status = corev1.PodStatus{PodIPs: p.Status.PodIPs, Conditions: p.Status.Conditions}
	return p
}
