package translate

import (
	"slices"

	gwv1 "sigs.k8s.io/gateway-api/apis/v1"
	"sigs.k8s.io/gateway-api/pkg/features"

	"github.com/konglet/konglet/sync/snapshot"
)

// supportedFeatures are the Gateway API features konglet implements in
// full on Kong's router flavor, as the upstream conformance suite checks
// them; docs/features.md says why each other one is missing. Redirects,
// CORS and per-backend request headers in full need Kong to run konglet's
// Lua (redirect.go, cors.go, backendlua.go): Kong's redirect plugin has a
// fixed location, its cors plugin answers preflights differently from the
// Gateway API, and Kong applies plugins per route, not per target.
// GatewayHTTPListenerIsolation needs the Host normalizer (hostplugin.go):
// without it a Host header can name another listener's port or slip past an
// exclusion. The expressions router excludes the hostnames of more specific
// listeners; the traditional one has no negation, so konglet answers their
// requests with 404 routes ranked between the listeners' (traditional.go).
// TLSRouteModeMixed: on one ssl stream listen Kong routes on the SNI first
// and hands the connection to its TLS terminator ("tls" routes) or passes
// it through ("tls_passthrough"), so Terminate and Passthrough listeners
// can share a port.
func supportedFeatures(kong snapshot.Kong) []gwv1.SupportedFeature {
	names := []features.FeatureName{
		features.SupportGateway, features.SupportReferenceGrant,
		features.SupportHTTPRoute, features.SupportGRPCRoute,
		features.SupportTLSRoute, features.SupportTLSRouteModeTerminate, features.SupportTLSRouteModeMixed, features.SupportTCPRoute, features.SupportUDPRoute,
		features.SupportHTTPRouteMethodMatching, features.SupportHTTPRouteResponseHeaderModification,
		features.SupportHTTPRouteHostRewrite, features.SupportHTTPRouteBackendTimeout,
		features.SupportHTTPRouteParentRefPort, features.SupportHTTPRouteNamedRouteRule, features.SupportGRPCRouteNamedRouteRule,
		features.SupportHTTPRoutePathRewrite,
		// A listener's port is any port of the publish Service: 8080 too.
		features.SupportGatewayPort8080,
		// Kong passes an Upgrade on: appProtocol kubernetes.io/ws works.
		features.SupportHTTPRouteBackendProtocolWebSocket,
		// A ListenerSet's listeners join its Gateway's (listenerset.go).
		features.SupportListenerSet,
	}
	if kong.LuaAllowed() {
		names = append(names, features.SupportGatewayHTTPListenerIsolation, features.SupportHTTPRouteSchemeRedirect, features.SupportHTTPRoutePortRedirect,
			features.SupportHTTPRoutePathRedirect, features.SupportHTTPRoute303RedirectStatusCode,
			features.SupportHTTPRoute307RedirectStatusCode, features.SupportHTTPRoute308RedirectStatusCode,
			features.SupportHTTPRouteCORS)
		if kong.PluginEnabled("post-function") {
			names = append(names, features.SupportHTTPRouteBackendRequestHeaderModification)
		}
	}
	if kong.RouterFlavor == snapshot.RouterExpressions {
		names = append(names, features.SupportHTTPRouteQueryParamMatching)
		// net.dst.port (a parentRef's port) and tls.sni (misdirected.go),
		// both read from the connection once the Host normalizer runs.
		if kong.LuaAllowed() {
			names = append(names, features.SupportHTTPRouteDestinationPortMatching, features.SupportGatewayHTTPSListenerDetectMisdirectedRequests)
		}
	}
	// BackendTLSPolicy and GatewayBackendClientCertificate are built
	// (backendtls.go) but not claimed: Kong sends one name as Host and SNI,
	// and BackendTLSPolicyConflictResolution wants two (docs/features.md).
	slices.Sort(names)
	out := make([]gwv1.SupportedFeature, len(names))
	for i, n := range names {
		out[i] = gwv1.SupportedFeature{Name: gwv1.FeatureName(n)}
	}
	return out
}
