package translate

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
