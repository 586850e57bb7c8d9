package snapshot

import (
	"slices"
	"strings"

	corev1 "k8s.io/api/core/v1"
	discoveryv1 "k8s.io/api/discovery/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
)

// Service is what konglet reads of a Kubernetes Service. The informer
// caches hold every Service of the cluster, and in this form: a decoded
// corev1.Service costs about three times as much, most of it fields konglet
// never reads.
type Service struct {
	Namespace, Name string
	// UID names the Service in the Events konglet writes about it (Kong
	// refused what it made), which kubectl describe finds by UID.
	UID types.UID
	// ResourceVersion tells the caches' versions apart (see GetObjectMeta).
	ResourceVersion string
	Type            corev1.ServiceType
	// ClusterIPs are spec.clusterIPs, and spec.clusterIP where that is
	// not among them (older objects, hand-written input); "None" when
	// headless.
	ClusterIPs   []string
	ExternalName string
	ExternalIPs  []string
	Ports        []corev1.ServicePort
	// LoadBalancer is status.loadBalancer.ingress.
	LoadBalancer []corev1.LoadBalancerIngress
	// UpstreamMode is the konglet.dev/upstream annotation ("" when absent).
	UpstreamMode string
	// Selector is spec.selector, kept only where the publish Service is
	// looked for (see ServiceOf).
	Selector map[string]string
}

// ServiceOf keeps what konglet reads of s. The result shares s's slices
// and selector: s is given up (it was just decoded).
func ServiceOf(s *corev1.Service) *Service {
	ips := s.Spec.ClusterIPs
	if s.Spec.ClusterIP != "" && !slices.Contains(ips, s.Spec.ClusterIP) {
		ips = append([]string{s.Spec.ClusterIP}, ips...)
	}
	return &Service{Namespace: s.Namespace, Name: s.Name, UID: s.UID, ResourceVersion: s.ResourceVersion, Type: s.Spec.Type,
		ClusterIPs: ips, ExternalName: s.Spec.ExternalName, ExternalIPs: s.Spec.ExternalIPs, Ports: s.Spec.Ports,
		LoadBalancer: s.Status.LoadBalancer.Ingress, UpstreamMode: s.Annotations[UpstreamModeAnnotation], Selector: s.Spec.Selector}
}

// Key is the Service's namespace and name.
func (s *Service) Key() types.NamespacedName {
	return types.NamespacedName{Namespace: s.Namespace, Name: s.Name}
}

// GetObjectMeta lets client-go's caches key a Service by namespace and name
// and tell its versions apart (meta.Accessor).
func (s *Service) GetObjectMeta() metav1.Object {
	return &metav1.ObjectMeta{Namespace: s.Namespace, Name: s.Name, UID: s.UID, ResourceVersion: s.ResourceVersion}
}

// EndpointSlice is what konglet reads of a Kubernetes EndpointSlice, the
// way Service is of a Service.
type EndpointSlice struct {
	Namespace, Name string
	// ServiceName is the kubernetes.io/service-name label: the Service the
	// slice belongs to.
	ServiceName     string
	ResourceVersion string
	AddressType     discoveryv1.AddressType
	Endpoints       []Endpoint
	Ports           []discoveryv1.EndpointPort
}

// Endpoint is one endpoint of an EndpointSlice.
type Endpoint struct {
	Addresses []string
	// Ready is conditions.ready, where unknown (nil) counts as ready, as
	// the API asks of consumers; Serving is conditions.serving.
	Ready, Serving bool
	// TargetRef is the Pod behind the endpoint, kept only where replicas
	// of konglet's Pod are counted (see EndpointSliceOf).
	TargetRef *corev1.ObjectReference
}

// EndpointSliceOf keeps what konglet reads of es, with the targetRefs of
// its endpoints when refs is true. The result shares es's addresses and
// ports: es is given up, as in ServiceOf.
func EndpointSliceOf(es *discoveryv1.EndpointSlice, refs bool) *EndpointSlice {
	out := &EndpointSlice{Namespace: es.Namespace, Name: es.Name, ServiceName: es.Labels[ServiceNameLabel],
		ResourceVersion: es.ResourceVersion, AddressType: es.AddressType, Endpoints: make([]Endpoint, len(es.Endpoints)), Ports: es.Ports}
	for i, ep := range es.Endpoints {
		c := ep.Conditions
		out.Endpoints[i] = Endpoint{Addresses: ep.Addresses, Ready: c.Ready == nil || *c.Ready, Serving: c.Serving != nil && *c.Serving}
		if refs && ep.TargetRef != nil {
			out.Endpoints[i].TargetRef = &corev1.ObjectReference{Kind: ep.TargetRef.Kind, Namespace: ep.TargetRef.Namespace, Name: ep.TargetRef.Name}
		}
	}
	return out
}

// ServiceKey names the Service the slice belongs to.
func (es *EndpointSlice) ServiceKey() types.NamespacedName {
	return types.NamespacedName{Namespace: es.Namespace, Name: es.ServiceName}
}

// WithEndpointSlice returns list, in name order, with es in place of the
// slice of its name or added. list is not modified: a Snapshot may hold it.
func WithEndpointSlice(list []*EndpointSlice, es *EndpointSlice) []*EndpointSlice {
	i, found := slices.BinarySearchFunc(list, es.Name, byEndpointSliceName)
	out := make([]*EndpointSlice, 0, len(list)+1)
	out = append(append(out, list[:i]...), es)
	if found {
		i++
	}
	return append(out, list[i:]...)
}

// WithoutEndpointSlice returns list without the slice of that name (nil
// when none is left). list is not modified, as in WithEndpointSlice.
func WithoutEndpointSlice(list []*EndpointSlice, name string) []*EndpointSlice {
	i, found := slices.BinarySearchFunc(list, name, byEndpointSliceName)
	if !found {
		return list
	}
	if len(list) == 1 {
		return nil
	}
	return slices.Delete(slices.Clone(list), i, i+1)
}

func byEndpointSliceName(es *EndpointSlice, name string) int { return strings.Compare(es.Name, name) }

// GetObjectMeta is as Service's.
func (es *EndpointSlice) GetObjectMeta() metav1.Object {
	return &metav1.ObjectMeta{Namespace: es.Namespace, Name: es.Name, ResourceVersion: es.ResourceVersion}
}
