package translate

import (
	"cmp"
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"math"
	"net"
	"net/netip"
	"slices"
	"strconv"
	"strings"

	corev1 "k8s.io/api/core/v1"
	discoveryv1 "k8s.io/api/discovery/v1"
	"k8s.io/apimachinery/pkg/types"
	gwv1 "sigs.k8s.io/gateway-api/apis/v1"

	"github.com/konglet/konglet/proxy/declarative"
	"github.com/konglet/konglet/sync/snapshot"
)

// backend is one usable backendRef: a Service port and its weight.
type backend struct {
	service *snapshot.Service
	port    corev1.ServicePort
	weight  int32
	// addrs are the host:port targets Kong connects to (checked).
	addrs []string
	// headers is the backendRef's RequestHeaderModifier, where a rule with
	// several backends filters per backend (backendLua).
	headers *gwv1.HTTPHeaderFilter
	// tls is what a BackendTLSPolicy asks of connections to it (nil: none).
	tls *backendTLS
}

// backendService names the Service a backendRef points at, if the route
// may use it: a core Service, in its namespace or granted.
func (t *translator) backendService(fromNamespace string, fromKind gwv1.Kind, ref gwv1.BackendRef) (types.NamespacedName, *refProblem) {
	group, kind := "", kindService
	if ref.Group != nil {
		group = string(*ref.Group)
	}
	if ref.Kind != nil {
		kind = string(*ref.Kind)
	}
	if group != "" || kind != kindService {
		return types.NamespacedName{}, &refProblem{gwv1.RouteReasonInvalidKind, fmt.Sprintf("backendRef %s/%s %q: only core Services are supported", group, kind, ref.Name)}
	}
	ns := fromNamespace
	if ref.Namespace != nil {
		ns = string(*ref.Namespace)
	}
	if ns != fromNamespace && !t.grantedTo(fromNamespace, fromKind, ns, kindService, string(ref.Name)) {
		return types.NamespacedName{}, &refProblem{gwv1.RouteReasonRefNotPermitted,
			fmt.Sprintf("backendRef to Service %s/%s is not permitted: no ReferenceGrant in namespace %s allows it", ns, ref.Name, ns)}
	}
	return types.NamespacedName{Namespace: ns, Name: string(ref.Name)}, nil
}

// resolveBackend checks the rest of a backendRef to the Service looked up
// the way the Gateway API asks: existence, port, and addresses Kong may use.
func (t *translator) resolveBackend(in backendInput, ref gwv1.BackendRef, fromNamespace string, fromKind gwv1.Kind) (backend, *refProblem) {
	ns := in.key.Namespace
	svc := in.service
	if svc == nil {
		return backend{}, &refProblem{gwv1.RouteReasonBackendNotFound, fmt.Sprintf("Service %s/%s not found", ns, ref.Name)}
	}
	if refusal, ok := t.refused[ObjectRef{"", kindService, ns, string(ref.Name)}]; ok {
		return backend{}, &refProblem{gwv1.RouteReasonBackendNotFound, fmt.Sprintf("Kong refused Service %s/%s: %s", ns, ref.Name, refusal)}
	}
	if ref.Port == nil {
		return backend{}, &refProblem{gwv1.RouteReasonUnsupportedValue, fmt.Sprintf("backendRef to Service %s/%s needs a port", ns, ref.Name)}
	}
	b := backend{service: svc, port: corev1.ServicePort{Port: int32(*ref.Port)}, weight: 1}
	if ref.Weight != nil {
		b.weight = *ref.Weight
	}
	if svc.Type != corev1.ServiceTypeExternalName {
		i := slices.IndexFunc(svc.Ports, func(p corev1.ServicePort) bool { return p.Port == int32(*ref.Port) })
		if i < 0 {
			return backend{}, &refProblem{gwv1.RouteReasonBackendNotFound, fmt.Sprintf("Service %s/%s has no port %d", ns, ref.Name, *ref.Port)}
		}
		b.port = svc.Ports[i]
		if msg := httpAppProtocol(fromKind, b.port.AppProtocol); msg != "" {
			return backend{}, &refProblem{gwv1.RouteReasonUnsupportedProtocol, fmt.Sprintf("Service %s/%s port %d: %s", ns, ref.Name, *ref.Port, msg)}
		}
	}
	addrs, problem := t.backendAddresses(b, in.slices, fromNamespace, fromKind)
	if problem != nil {
		return backend{}, problem
	}
	b.addrs = addrs
	if b.tls, problem = t.backendTLSOf(b, fromKind); problem != nil {
		return backend{}, problem
	}
	return b, nil
}

// httpAppProtocol refuses the backend protocols an HTTPRoute cannot reach
// through Kong: HTTP/2 without TLS (an http Kong service speaks HTTP/1.1
// to its upstream; only grpc services speak h2c) and WebSocket over TLS
// (that needs backend TLS, which konglet does not configure). WebSocket
// (kubernetes.io/ws) is proxied: Kong passes an Upgrade on to the upstream.
func httpAppProtocol(fromKind gwv1.Kind, appProtocol *string) string {
	if fromKind != kindHTTPRoute || appProtocol == nil {
		return ""
	}
	switch *appProtocol {
	case "kubernetes.io/h2c":
		return "appProtocol kubernetes.io/h2c is not supported (Kong speaks HTTP/1.1 to an HTTP upstream)"
	case "kubernetes.io/wss":
		return "appProtocol kubernetes.io/wss is not supported (it needs TLS to the backend, which konglet does not configure)"
	}
	return ""
}

// grantedTo tells whether a ReferenceGrant in toNamespace lets objects of
// fromKind in fromNamespace refer to the core object toKind/name.
func (t *translator) grantedTo(fromNamespace string, fromKind gwv1.Kind, toNamespace string, toKind gwv1.Kind, name string) bool {
	for _, g := range t.snap.ReferenceGrants {
		if g.Namespace != toNamespace {
			continue
		}
		from := slices.ContainsFunc(g.Spec.From, func(f gwv1.ReferenceGrantFrom) bool {
			return f.Group == gwv1.GroupName && f.Kind == fromKind && string(f.Namespace) == fromNamespace
		})
		to := slices.ContainsFunc(g.Spec.To, func(to gwv1.ReferenceGrantTo) bool {
			return to.Group == "" && to.Kind == toKind && (to.Name == nil || string(*to.Name) == name)
		})
		if from && to {
			return true
		}
	}
	return false
}

// noBackendHost is the host of a rule's Kong service when the rule has no
// usable backend: its routes answer 500 before Kong connects anywhere.
const noBackendHost = "no-backend.konglet.invalid"

// upstream is the Kong upstream that balances over the backends.
func (t *translator) upstream(name string, backends []backend) *declarative.Upstream {
	// Kong's errors about an upstream or a target are traced back through
	// these tags: a target to its Service, an upstream to its first one.
	return &declarative.Upstream{Name: name, Tags: objectTags(kindService, backends[0].service.Namespace, backends[0].service.Name),
		Targets: t.targets(name, backends)}
}

// upstreamName is a hostname: readable for one backend, a digest of the
// backends and weights for several.
func upstreamName(backends []backend) string {
	if len(backends) == 1 {
		b := backends[0]
		return b.service.Name + "." + b.service.Namespace + "." + strconv.Itoa(int(b.port.Port)) + ".svc"
	}
	keys := make([]string, len(backends))
	for i, b := range backends {
		keys[i] = fmt.Sprintf("%s/%s:%d=%d", b.service.Namespace, b.service.Name, b.port.Port, b.weight)
	}
	slices.Sort(keys)
	sum := sha256.Sum256([]byte(strings.Join(keys, ",")))
	return "weighted-" + hex.EncodeToString(sum[:8]) + ".konglet"
}

// maxTargetWeight keeps per-target weights precise yet inside Kong's range.
const maxTargetWeight = 10000

// targets spreads each backend's weight over its endpoints so that the
// Gateway API weights hold whatever the number of endpoints per Service.
func (t *translator) targets(upstream string, backends []backend) []*declarative.Target {
	type share struct {
		addrs  []string
		weight float64
	}
	shares := make([]share, 0, len(backends))
	most := 0.0
	for _, b := range backends {
		if len(b.addrs) == 0 {
			continue
		}
		w := float64(b.weight) / float64(len(b.addrs))
		most = max(most, w)
		shares = append(shares, share{b.addrs, w})
	}
	// Targets carry no tags (they are the most numerous entity): Kong's
	// errors about one are traced through their upstream (Result.Owner).
	if len(shares) == 1 {
		// The common case: one backend, sorted distinct addresses. Its
		// targets, and their ids, are allocated together.
		addrs := shares[0].addrs
		var ids strings.Builder
		ids.Grow(len(addrs) * declarative.IDLen)
		for _, a := range addrs {
			var id [declarative.IDLen]byte
			ids.Write(declarative.AppendID(id[:0], "target", upstream, a))
		}
		all := ids.String()
		out := make([]*declarative.Target, len(addrs))
		targets := make([]declarative.Target, len(addrs))
		for i, a := range addrs {
			id := all[i*declarative.IDLen : (i+1)*declarative.IDLen]
			targets[i] = declarative.Target{ID: id, Target: a, Weight: 100}
			out[i] = &targets[i]
		}
		return out
	}
	weights := map[string]int{}
	for _, s := range shares {
		w := max(1, int(math.Round(s.weight/most*maxTargetWeight)))
		for _, a := range s.addrs {
			// One Pod behind two Services is one target: Kong refuses duplicates.
			weights[a] = min(weights[a]+w, math.MaxUint16)
		}
	}
	out := make([]*declarative.Target, 0, len(weights))
	for a, w := range weights {
		out = append(out, &declarative.Target{ID: declarative.ID("target", upstream, a), Target: a, Weight: w})
	}
	slices.SortFunc(out, func(a, b *declarative.Target) int { return cmp.Compare(a.Target, b.Target) })
	return out
}

// backendAddresses lists host:port targets of a backend: ready Pod
// endpoints, the Service's DNS name in Service mode (for a mesh), or the
// checked addresses of an ExternalName. Every address a route author could
// have chosen is checked (forbiddenTarget): one that is forbidden refuses
// the whole backend, so the author sees why in the route's status.
// endpoints are the Service's EndpointSlices.
func (t *translator) backendAddresses(b backend, endpoints []*snapshot.EndpointSlice, fromNamespace string, fromKind gwv1.Kind) ([]string, *refProblem) {
	svc := b.service
	if svc.Type == corev1.ServiceTypeExternalName {
		return t.externalNameAddresses(b, fromNamespace, fromKind)
	}
	refuse := func(addr, why string) ([]string, *refProblem) {
		return nil, &refProblem{gwv1.RouteReasonRefNotPermitted,
			fmt.Sprintf("Service %s/%s has the endpoint address %s, %s: Kong never connects there", svc.Namespace, svc.Name, addr, why)}
	}
	serviceMode := t.serviceMode(svc)
	// The targets are written end to end, the i-th ending at ends[i], and
	// cut from one string: a first translation makes hundreds of thousands.
	var joinedBuf [256]byte
	var endsBuf [16]int
	joined, ends := joinedBuf[:0], endsBuf[:0]
	// In Service mode Kong reaches the endpoints through the Service's
	// DNS name (a headless Service's name resolves to them): they are
	// checked in both modes.
	for _, slice := range endpoints {
		if slice.AddressType == discoveryv1.AddressTypeFQDN {
			continue // never targeted, and not published in DNS
		}
		port, portOK := slicePort(slice, b.port)
		for _, ep := range slice.Endpoints {
			for _, addr := range ep.Addresses {
				ip, err := netip.ParseAddr(addr)
				if err != nil {
					return refuse(addr, "which is not an IP address")
				}
				if why := t.forbiddenTarget(ip, fromNamespace, fromKind); why != "" {
					return refuse(addr, why)
				}
				if portOK && ep.Ready && !serviceMode {
					joined = appendHostPort(joined, addr, port)
					ends = append(ends, len(joined))
				}
			}
		}
	}
	if serviceMode {
		return []string{net.JoinHostPort(fmt.Sprintf("%s.%s.svc", svc.Name, svc.Namespace), strconv.Itoa(int(b.port.Port)))}, nil
	}
	return cutTargets(string(joined), ends), nil
}

// externalNameAddresses are the addresses of an ExternalName Service's
// name, as konglet resolved them: Kong gets checked IP addresses, so a
// name that resolves differently later (DNS rebinding) changes nothing
// until konglet resolves and checks it again.
func (t *translator) externalNameAddresses(b backend, fromNamespace string, fromKind gwv1.Kind) ([]string, *refProblem) {
	svc, name := b.service, b.service.ExternalName
	if !t.snap.AllowExternalName {
		return nil, &refProblem{gwv1.RouteReasonRefNotPermitted, fmt.Sprintf(
			"Service %s/%s is of type ExternalName, which this gateway does not allow (konglet --allow-external-name)", svc.Namespace, svc.Name)}
	}
	var addrs []netip.Addr
	if ip, err := netip.ParseAddr(name); err == nil {
		addrs = []netip.Addr{ip}
	} else {
		res, ok := t.snap.ExternalNames[name]
		switch {
		case !ok:
			return nil, &refProblem{gwv1.RouteReasonBackendNotFound, fmt.Sprintf("Service %s/%s: the name %q is not resolved yet", svc.Namespace, svc.Name, name)}
		case res.Err != "" || len(res.Addrs) == 0:
			return nil, &refProblem{gwv1.RouteReasonBackendNotFound, fmt.Sprintf("Service %s/%s: the name %q does not resolve: %s", svc.Namespace, svc.Name, name, cmp.Or(res.Err, "no address"))}
		}
		addrs = res.Addrs
	}
	var joinedBuf [256]byte
	var endsBuf [16]int
	joined, ends := joinedBuf[:0], endsBuf[:0] // as in backendAddresses
	for _, ip := range addrs {
		if why := t.forbiddenTarget(ip, fromNamespace, fromKind); why != "" {
			return nil, &refProblem{gwv1.RouteReasonRefNotPermitted, fmt.Sprintf(
				"Service %s/%s: the ExternalName %q is at %s, %s: Kong never connects there", svc.Namespace, svc.Name, name, ip, why)}
		}
		joined = appendHostPort(joined, ip.Unmap().String(), b.port.Port)
		ends = append(ends, len(joined))
	}
	return cutTargets(string(joined), ends), nil
}

// appendHostPort appends net.JoinHostPort of an endpoint address.
func appendHostPort(b []byte, addr string, port int32) []byte {
	if strings.Contains(addr, ":") {
		b = append(append(append(b, '['), addr...), ']')
	} else {
		b = append(b, addr...)
	}
	b = append(b, ':')
	return strconv.AppendInt(b, int64(port), 10)
}

// cutTargets cuts the targets written end to end in joined, the i-th
// ending at ends[i]: sorted, each once.
func cutTargets(joined string, ends []int) []string {
	if len(ends) == 0 {
		return nil
	}
	out := make([]string, len(ends))
	start := 0
	for i, end := range ends {
		out[i], start = joined[start:end], end
	}
	slices.Sort(out)
	return slices.Compact(out)
}

func (t *translator) serviceMode(svc *snapshot.Service) bool {
	switch svc.UpstreamMode {
	case snapshot.UpstreamModeService:
		return true
	case snapshot.UpstreamModeEndpoints:
		return false
	}
	return t.snap.ServiceUpstream
}

// slicePort finds the endpoint port that serves a Service port: the one of
// the same name (EndpointSlice ports carry the Service port's name).
func slicePort(slice *snapshot.EndpointSlice, sp corev1.ServicePort) (int32, bool) {
	if slice.AddressType == discoveryv1.AddressTypeFQDN {
		return 0, false
	}
	for _, p := range slice.Ports {
		name := ""
		if p.Name != nil {
			name = *p.Name
		}
		if name == sp.Name && p.Port != nil {
			return *p.Port, true
		}
	}
	return 0, false
}
