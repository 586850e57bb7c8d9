package translate

import (
	"crypto/tls"
	"fmt"
	"slices"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	gwv1 "sigs.k8s.io/gateway-api/apis/v1"

	"github.com/konglet/konglet/proxy/declarative"
)

// backendClientCert resolves a Gateway's spec.tls.backend.clientCertificateRef
// into the Kong certificate its https services present to backends (Kong's
// service client_certificate). set is false when the Gateway names none;
// otherwise cond is the Gateway's ResolvedRefs condition and cert is nil
// when the reference cannot be used (the backends then get no certificate,
// and the Gateway says why; the Gateway stays accepted, as the API asks).
func (t *translator) backendClientCert(g *gateway) (cert *declarative.Certificate, cond metav1.Condition, set bool) {
	spec := g.obj.Spec.TLS
	if spec == nil || spec.Backend == nil || spec.Backend.ClientCertificateRef == nil {
		return nil, metav1.Condition{}, false
	}
	gen := g.obj.Generation
	invalid := func(reason gwv1.GatewayConditionReason, format string, args ...any) (*declarative.Certificate, metav1.Condition, bool) {
		return nil, condition(string(gwv1.GatewayConditionResolvedRefs), false, string(reason), fmt.Sprintf(format, args...), gen), true
	}
	ref := spec.Backend.ClientCertificateRef
	group, kind := "", "Secret"
	if ref.Group != nil {
		group = string(*ref.Group)
	}
	if ref.Kind != nil {
		kind = string(*ref.Kind)
	}
	if group != "" || kind != "Secret" {
		return invalid(gwv1.GatewayReasonInvalidClientCertificateRef, "clientCertificateRef %s/%s %q: only core Secrets are supported", group, kind, ref.Name)
	}
	key := types.NamespacedName{Namespace: g.key.Namespace, Name: string(ref.Name)}
	if ref.Namespace != nil {
		key.Namespace = string(*ref.Namespace)
	}
	if key.Namespace != g.key.Namespace && !t.grantedTo(g.key.Namespace, kindGateway, key.Namespace, "Secret", key.Name) {
		return invalid(gwv1.GatewayReasonRefNotPermitted, "clientCertificateRef to Secret %s is not permitted: no ReferenceGrant in namespace %s allows it", key, key.Namespace)
	}
	if t.secretRefs != nil {
		t.secretRefs[key] = true
	}
	if p, ok := t.snap.SecretProblems[key]; ok {
		_, message := secretProblem(key, p)
		return invalid(gwv1.GatewayReasonInvalidClientCertificateRef, "%s", message)
	}
	secret := t.snap.Secrets[key]
	if secret == nil || secret.Type != corev1.SecretTypeTLS {
		return invalid(gwv1.GatewayReasonInvalidClientCertificateRef, "Secret %s of type kubernetes.io/tls not found", key)
	}
	// The key material itself never appears in a message.
	if _, err := tls.X509KeyPair(secret.Data[corev1.TLSCertKey], secret.Data[corev1.TLSPrivateKeyKey]); err != nil {
		return invalid(gwv1.GatewayReasonInvalidClientCertificateRef, "Secret %s does not hold a valid certificate and matching key: %v", key, err)
	}
	cert = &declarative.Certificate{ID: declarative.ID("certificate", "backend-client", key.String()),
		Cert: string(secret.Data[corev1.TLSCertKey]), Key: string(secret.Data[corev1.TLSPrivateKeyKey]), Tags: objectTags("Secret", secret.Namespace, secret.Name)}
	return cert, condition(string(gwv1.GatewayConditionResolvedRefs), true, string(gwv1.GatewayReasonResolvedRefs), "", gen), true
}

// routeClientCert is the client certificate of the Gateways a route is
// attached to, for its rules whose backends speak TLS; conflict is set
// when its Gateways present different ones, which one Kong service cannot.
func routeClientCert(r route, gws []*gateway) (cert *declarative.Certificate, conflict bool) {
	seen := false
	for _, ref := range r.parentRefs {
		listeners, ours := parentListeners(gws, r.meta.Namespace, ref)
		if !ours || len(listeners) == 0 {
			continue
		}
		c := listeners[0].gw.clientCert
		if seen && (c == nil) != (cert == nil) || c != nil && cert != nil && c.ID != cert.ID {
			return nil, true
		}
		cert, seen = c, true
	}
	return cert, false
}

// clientCertOf is the client certificate for the route's rules with TLS
// backends; such rules are dropped when the route's Gateways disagree.
func clientCertOf(r route, gws []*gateway, rules []ruleResult) *declarative.Certificate {
	cert, conflict := routeClientCert(r, gws)
	if !conflict {
		return cert
	}
	for i := range rules {
		if rules[i].dropped == "" && len(rules[i].backends) > 0 && rules[i].backends[0].tls != nil {
			rules[i].dropped = fmt.Sprintf("rule %d: the route's Gateways present different client certificates to backends (spec.tls.backend), and Kong presents one per service", rules[i].index)
		}
	}
	return nil
}

// clientCertificates are the Gateways' client certificates that services
// present, each once.
func clientCertificates(gws []*gateway, services []*declarative.Service) []*declarative.Certificate {
	var out []*declarative.Certificate
	for _, g := range gws {
		c := g.clientCert
		if c == nil || slices.ContainsFunc(out, func(o *declarative.Certificate) bool { return o.ID == c.ID }) {
			continue
		}
		if slices.ContainsFunc(services, func(s *declarative.Service) bool {
			return s.ClientCertificate != nil && s.ClientCertificate.ID == c.ID
		}) {
			out = append(out, c)
		}
	}
	return out
}
