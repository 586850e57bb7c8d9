package translate

import (
	"net"
	"slices"
	"strings"

	gwv1 "sigs.k8s.io/gateway-api/apis/v1"
)

// intersectHostnames appends to hosts the hostnames a route serves on a
// listener, per the Gateway API rules: "" stands for any hostname. ok is
// false when the route and the listener have no hostname in common.
func intersectHostnames(hosts []string, listener *gwv1.Hostname, route []gwv1.Hostname) (_ []string, ok bool) {
	lh := hostnameOf(listener)
	if len(route) == 0 {
		return append(hosts, lh), true
	}
	n := len(hosts)
	for _, r := range route {
		// The API allows a route 16 hostnames: no map to tell repeats.
		h, match := intersectHostname(lh, strings.ToLower(string(r)))
		if match && !slices.Contains(hosts[n:], h) {
			hosts = append(hosts, h)
		}
	}
	return hosts, len(hosts) > n
}

func intersectHostname(listener, route string) (string, bool) {
	switch {
	case listener == "":
		return route, true
	case listener == route:
		return route, true
	case isWildcard(route) && wildcardMatches(route, listener):
		return listener, true
	case isWildcard(listener) && wildcardMatches(listener, route):
		return route, true
	}
	return "", false
}

func isWildcard(h string) bool { return strings.HasPrefix(h, "*.") }

// wildcardMatches reports whether host (exact or a narrower wildcard) falls
// under wildcard: "*.example.com" covers "a.example.com", "a.b.example.com"
// and "*.a.example.com", but not "example.com".
func wildcardMatches(wildcard, host string) bool {
	suffix := wildcard[1:] // ".example.com"
	return len(host) > len(suffix) && strings.HasSuffix(host, suffix) && host[:len(host)-len(suffix)] != "*"
}

func isIP(s string) bool { return net.ParseIP(s) != nil }

// validHostname tells whether h is a hostname as the Gateway API's CRDs
// allow one: labels of letters, digits and inner hyphens, at most 253
// bytes, behind an optional "*." (uppercase is lowered before use). The API
// server refuses others; objects read from files are not checked by it, and
// Kong would refuse the whole configuration for one of them.
func validHostname(h string) bool {
	h = strings.TrimPrefix(h, "*.")
	if h == "" || len(h) > 253 {
		return false
	}
	for label := range strings.SplitSeq(h, ".") {
		if label == "" || label[0] == '-' || label[len(label)-1] == '-' {
			return false
		}
		for i := range len(label) {
			if c := label[i] | 0x20; (c < 'a' || c > 'z') && (label[i] < '0' || label[i] > '9') && label[i] != '-' {
				return false
			}
		}
	}
	return true
}

// invalidHostname is the first of hostnames that validHostname refuses, and
// whether there is one.
func invalidHostname(hostnames []gwv1.Hostname) (string, bool) {
	for _, h := range hostnames {
		if !validHostname(string(h)) {
			return string(h), true
		}
	}
	return "", false
}

func hostnameOf(h *gwv1.Hostname) string {
	if h == nil {
		return ""
	}
	return string(*h)
}
