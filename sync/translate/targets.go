package translate

import (
	"fmt"
	"net/netip"
	"slices"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/types"
	gwv1 "sigs.k8s.io/gateway-api/apis/v1"

	"github.com/konglet/konglet/sync/snapshot"
)

// Addresses a route author may not make Kong connect to, whatever object
// names them (an ExternalName, what its name resolves to, an EndpointSlice
// the author wrote by hand): Kong's admin API listens on loopback without
// authentication, and cloud metadata services answer on link-local and a
// few fixed addresses with the node's credentials.
var metadataAddresses = []netip.Addr{
	netip.MustParseAddr("fd00:ec2::254"),   // AWS instance metadata over IPv6
	netip.MustParseAddr("100.100.100.200"), // Alibaba Cloud metadata
}

var thisNetwork = netip.MustParsePrefix("0.0.0.0/8") // "this host" on Linux

// forbiddenTarget says why Kong must never connect to addr on behalf of a
// route in fromNamespace, or "" when it may.
func (t *translator) forbiddenTarget(addr netip.Addr, fromNamespace string, fromKind gwv1.Kind) string {
	addr = addr.Unmap()
	switch {
	case addr.Zone() != "":
		// fe80::1%eth0 names a link of this host; and a zone would make
		// any address miss the comparisons below.
		return "an address with an IPv6 zone"
	case addr.IsLoopback():
		return "a loopback address"
	case addr.IsUnspecified() || thisNetwork.Contains(addr):
		return "an unspecified address (this host)"
	case addr.IsLinkLocalUnicast() || addr.IsLinkLocalMulticast() || addr.IsInterfaceLocalMulticast():
		return "a link-local address (cloud metadata lives there)"
	case addr.IsMulticast():
		return "a multicast address"
	}
	for _, m := range metadataAddresses {
		if addr == m {
			return "a cloud metadata address"
		}
	}
	if t.kongPodAddress(addr) {
		return "the address of a Kong Pod"
	}
	if svc, ok := t.clusterIPIndex()[addr]; ok {
		switch {
		case svc == sharedClusterIP:
			return "a ClusterIP that several Services claim"
		case svc.Namespace != fromNamespace && !t.grantedTo(fromNamespace, fromKind, svc.Namespace, kindService, svc.Name):
			return fmt.Sprintf("the ClusterIP of Service %s/%s, which no ReferenceGrant in namespace %s lets this route use", svc.Namespace, svc.Name, svc.Namespace)
		}
	}
	return ""
}

// kongPodAddress tells whether addr belongs to this Kong Pod or a peer:
// their status and metrics ports listen on the Pod IP.
func (t *translator) kongPodAddress(addr netip.Addr) bool {
	t.kongPodsOnce.Do(func() {
		t.kongPods = map[netip.Addr]bool{}
		for _, ip := range kongPodIPs(t.snap) {
			if a, err := netip.ParseAddr(ip); err == nil {
				t.kongPods[a.Unmap()] = true
			}
		}
	})
	return t.kongPods[addr]
}

// kongPodIPs lists the IPs of this Pod and its peers, sorted.
func kongPodIPs(s *snapshot.Snapshot) []string {
	var out []string
	for _, p := range s.Pods {
		for _, ip := range p.Status.PodIPs {
			out = append(out, ip.IP)
		}
	}
	if s.Pod != nil && !slices.Contains(s.Pods, s.Pod) {
		for _, ip := range s.Pod.Status.PodIPs {
			out = append(out, ip.IP)
		}
	}
	slices.Sort(out)
	return out
}

// sharedClusterIP stands in clusterIPIndex for the Service of a cluster IP
// that several claim: the API server allocates each to one, but caches may
// hold, for a moment, a deleted Service beside the one that took its IP
// (or an IPv4 address beside the same written as IPv6). Whichever was read
// last would decide, and differently from one translation to the next.
var sharedClusterIP = types.NamespacedName{}

// clusterIPIndex names the Service that owns each ClusterIP. The API
// server allocates ClusterIPs, so unlike an EndpointSlice's addresses they
// cannot be claimed by another namespace. It is built on first use (or
// taken from the Memo).
func (t *translator) clusterIPIndex() map[netip.Addr]types.NamespacedName {
	t.clusterIPsOnce.Do(func() {
		t.clusterIPs = map[netip.Addr]types.NamespacedName{}
		for key, svc := range t.snap.Services {
			for _, ip := range svc.ClusterIPs {
				if ip == "" || ip == corev1.ClusterIPNone {
					continue // no address (and no parse error to allocate)
				}
				if a, err := netip.ParseAddr(ip); err == nil {
					owner := key
					if other, seen := t.clusterIPs[a.Unmap()]; seen && other != key {
						owner = sharedClusterIP
					}
					t.clusterIPs[a.Unmap()] = owner
				}
			}
		}
	})
	return t.clusterIPs
}

// ExternalNames lists the names of the ExternalName Services that routes'
// backendRefs name (IP literals need no lookup), sorted: the names konglet
// resolves for the translation (snapshot.ExternalNames).
func ExternalNames(s *snapshot.Snapshot) []string {
	var names []string
	for key := range BackendServices(s) {
		svc := s.Services[key]
		if svc == nil || svc.Type != corev1.ServiceTypeExternalName {
			continue
		}
		if _, err := netip.ParseAddr(svc.ExternalName); err != nil {
			names = append(names, svc.ExternalName)
		}
	}
	slices.Sort(names)
	return slices.Compact(names)
}

// BackendServices are the core Services that the backendRefs of routes of
// every kind name (granted or not, existing or not): only changes to these,
// and to their EndpointSlices, can change what routes translate to.
func BackendServices(s *snapshot.Snapshot) map[types.NamespacedName]bool {
	// The routes' backendRefs are read where they are, not converted to
	// route values: this runs on every snapshot, and a route value per
	// route was most of its time.
	out := make(map[types.NamespacedName]bool, len(s.HTTPRoutes)+len(s.GRPCRoutes)+len(s.TLSRoutes)+len(s.TCPRoutes)+len(s.UDPRoutes))
	add := func(routeNamespace string, ref gwv1.BackendObjectReference) {
		if (ref.Group != nil && *ref.Group != "") || (ref.Kind != nil && *ref.Kind != kindService) {
			return
		}
		ns := routeNamespace
		if ref.Namespace != nil {
			ns = string(*ref.Namespace)
		}
		out[types.NamespacedName{Namespace: ns, Name: string(ref.Name)}] = true
	}
	for _, r := range s.HTTPRoutes {
		for _, rule := range r.Spec.Rules {
			for _, b := range rule.BackendRefs {
				add(r.Namespace, b.BackendObjectReference)
			}
		}
	}
	for _, r := range s.GRPCRoutes {
		for _, rule := range r.Spec.Rules {
			for _, b := range rule.BackendRefs {
				add(r.Namespace, b.BackendObjectReference)
			}
		}
	}
	for _, r := range s.TLSRoutes {
		for _, rule := range r.Spec.Rules {
			for _, b := range rule.BackendRefs {
				add(r.Namespace, b.BackendObjectReference)
			}
		}
	}
	for _, r := range s.TCPRoutes {
		for _, rule := range r.Spec.Rules {
			for _, b := range rule.BackendRefs {
				add(r.Namespace, b.BackendObjectReference)
			}
		}
	}
	for _, r := range s.UDPRoutes {
		for _, rule := range r.Spec.Rules {
			for _, b := range rule.BackendRefs {
				add(r.Namespace, b.BackendObjectReference)
			}
		}
	}
	return out
}
