package translate

import (
	"strings"

	gwv1 "sigs.k8s.io/gateway-api/apis/v1"
)

// The kinds of the objects the translation reads, as Gateway API
// references, statuses and tags name them.
const (
	kindGatewayClass = "GatewayClass"
	kindGateway      = "Gateway"
	kindListenerSet  = "ListenerSet"
	kindHTTPRoute    = "HTTPRoute"
	kindGRPCRoute    = "GRPCRoute"
	kindTLSRoute     = "TLSRoute"
	kindTCPRoute     = "TCPRoute"
	kindUDPRoute     = "UDPRoute"
	kindService      = "Service"
)

// routeKinds are the kinds of routes, in the order Status.Objects lists them.
var routeKinds = []string{kindHTTPRoute, kindGRPCRoute, kindTLSRoute, kindTCPRoute, kindUDPRoute}

// entityKinds spell the route kinds the way Kong entity names start: in
// lower case, once rather than for every route.
var entityKinds = func() map[gwv1.Kind]string {
	m := make(map[gwv1.Kind]string, len(routeKinds))
	for _, k := range routeKinds {
		m[gwv1.Kind(k)] = strings.ToLower(k)
	}
	return m
}()
