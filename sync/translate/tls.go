package translate

import (
	"cmp"
	"crypto/tls"
	"crypto/x509"
	"fmt"
	"maps"
	"slices"
	"strings"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	gwv1 "sigs.k8s.io/gateway-api/apis/v1"

	"github.com/konglet/konglet/proxy/declarative"
	"github.com/konglet/konglet/sync/snapshot"
)

// listenerCertificates resolves an HTTPS listener's certificateRefs into
// the Secrets Kong will serve, or explains on ResolvedRefs why it cannot.
func (t *translator) listenerCertificates(l *listener) ([]*corev1.Secret, *metav1.Condition) {
	gen, spec, owner := l.generation, l.spec, gwv1.Kind(kindGateway)
	if l.set != nil {
		owner = kindListenerSet
	}
	invalid := func(reason gwv1.ListenerConditionReason, format string, args ...any) ([]*corev1.Secret, *metav1.Condition) {
		c := condition(string(gwv1.ListenerConditionResolvedRefs), false, string(reason), fmt.Sprintf(format, args...), gen)
		return nil, &c
	}
	if spec.TLS == nil || len(spec.TLS.CertificateRefs) == 0 {
		return invalid(gwv1.ListenerReasonInvalidCertificateRef, "an HTTPS listener needs tls.certificateRefs")
	}
	// Every reference is checked before any Secret is looked up, so that
	// SecretRefs learns all the Secrets a listener needs at once.
	keys := make([]types.NamespacedName, 0, len(spec.TLS.CertificateRefs))
	for _, ref := range spec.TLS.CertificateRefs {
		group, kind := "", "Secret"
		if ref.Group != nil {
			group = string(*ref.Group)
		}
		if ref.Kind != nil {
			kind = string(*ref.Kind)
		}
		if group != "" || kind != "Secret" {
			return invalid(gwv1.ListenerReasonInvalidCertificateRef, "certificateRef %s/%s %q: only core Secrets are supported", group, kind, ref.Name)
		}
		ns := l.namespace
		if ref.Namespace != nil {
			ns = string(*ref.Namespace)
		}
		if ns != l.namespace && !t.grantedTo(l.namespace, owner, ns, "Secret", string(ref.Name)) {
			return invalid(gwv1.ListenerReasonRefNotPermitted, "certificateRef to Secret %s/%s is not permitted: no ReferenceGrant in namespace %s allows it", ns, ref.Name, ns)
		}
		keys = append(keys, types.NamespacedName{Namespace: ns, Name: string(ref.Name)})
	}
	for _, key := range keys {
		if t.secretRefs != nil {
			t.secretRefs[key] = true
		}
	}
	secrets := make([]*corev1.Secret, 0, 2)
	algorithms := map[x509.PublicKeyAlgorithm]bool{}
	var unserved []string
	for _, key := range keys {
		if p, ok := t.snap.SecretProblems[key]; ok {
			reason, message := secretProblem(key, p)
			return invalid(reason, "%s", message)
		}
		secret := t.snap.Secrets[key]
		if secret == nil || secret.Type != corev1.SecretTypeTLS {
			return invalid(gwv1.ListenerReasonInvalidCertificateRef, "Secret %s of type kubernetes.io/tls not found", key)
		}
		// The key material itself never appears in a message.
		pair, err := tls.X509KeyPair(secret.Data[corev1.TLSCertKey], secret.Data[corev1.TLSPrivateKeyKey])
		if err != nil {
			return invalid(gwv1.ListenerReasonInvalidCertificateRef, "Secret %s does not hold a valid certificate and matching key: %v", key, err)
		}
		// Kong serves a certificate and an alternative of another key type
		// (cert_alt) per server name: the first of each type is served.
		if algorithms[pair.Leaf.PublicKeyAlgorithm] {
			unserved = append(unserved, key.String())
			continue
		}
		algorithms[pair.Leaf.PublicKeyAlgorithm] = true
		if len(secrets) == 2 {
			unserved = append(unserved, key.String())
			continue
		}
		secrets = append(secrets, secret)
	}
	if len(unserved) > 0 {
		l.resolvedRefs.Message = fmt.Sprintf("Secrets %s are not served: Kong serves one certificate per key type (RSA, ECDSA) and server name, the first of each certificateRefs names", strings.Join(unserved, ", "))
	}
	return secrets, nil
}

// secretRBACDoc is where users learn to let konglet read a namespace's Secrets.
const secretRBACDoc = "https://github.com/konglet/konglet/blob/main/docs/install.md#certificates-outside-the-gateways-namespace"

// secretProblem explains why a Secret that a listener may use is not usable.
func secretProblem(key types.NamespacedName, p snapshot.ReadProblem) (gwv1.ListenerConditionReason, string) {
	switch {
	case p.Forbidden:
		return gwv1.ListenerReasonRefNotPermitted, fmt.Sprintf(
			"konglet may not read Secret %s: its ServiceAccount needs a Role granting list and watch on secrets in namespace %s, and a RoleBinding (see %s)",
			key, key.Namespace, secretRBACDoc)
	case p.Size > p.Limit:
		return gwv1.ListenerReasonInvalidCertificateRef, fmt.Sprintf(
			"Secret %s holds %d bytes of data, more than konglet's limit of %d (--max-secret-bytes), so konglet does not keep it", key, p.Size, p.Limit)
	case p.Unwatched > 0:
		return gwv1.ListenerReasonInvalidCertificateRef, fmt.Sprintf(
			"Secret %s is not read: listeners use more Secrets than konglet watches at once (%d, --max-secret-watches; Secrets in the Gateway's namespace come first)", key, p.Unwatched)
	case p.Err != "":
		return gwv1.ListenerReasonInvalidCertificateRef, fmt.Sprintf("Secret %s could not be read: %s", key, p.Err)
	}
	return gwv1.ListenerReasonInvalidCertificateRef, fmt.Sprintf("Secret %s has not been read yet", key)
}

// SecretRefs are the Secrets that listeners of the bound Gateways and of
// the ListenerSets attached to them may use: certificateRefs in the
// listener's namespace or granted by a ReferenceGrant. konglet reads no
// other Secret (DESIGN decision 8). Listeners do not depend on routes, so
// they are left out of this translation.
func SecretRefs(s *snapshot.Snapshot) []types.NamespacedName {
	listenersOnly := *s
	listenersOnly.HTTPRoutes, listenersOnly.GRPCRoutes, listenersOnly.TLSRoutes, listenersOnly.TCPRoutes, listenersOnly.UDPRoutes = nil, nil, nil, nil, nil
	t := newTranslator(&listenersOnly, nil)
	t.secretRefs = map[types.NamespacedName]bool{}
	t.buildGateways()
	return slices.SortedFunc(maps.Keys(t.secretRefs), func(a, b types.NamespacedName) int {
		return cmp.Or(cmp.Compare(a.Namespace, b.Namespace), cmp.Compare(a.Name, b.Name))
	})
}

// certificates builds Kong's certificates with the server names of the
// listeners that use them. An HTTPS listener without a hostname serves
// every name ("*"). Kong picks a certificate by server name alone, for all
// its listens: a name is served by the first listener that claims it, and
// a later listener that wants other certificates for it is told so.
func certificates(gws []*gateway) []*declarative.Certificate {
	byPair := map[string]*declarative.Certificate{}
	claimed := map[string]*listener{}
	claimedPair := map[string]string{}
	for _, g := range gws {
		for _, l := range g.all() {
			if !l.usable() || len(l.secrets) == 0 {
				continue
			}
			sni := hostnameOf(l.spec.Hostname)
			if sni == "" {
				sni = "*"
			}
			pair := secretKey(l.secrets[0]).String()
			if len(l.secrets) > 1 {
				pair += "+" + secretKey(l.secrets[1]).String()
			}
			if first := claimed[sni]; first != nil {
				if claimedPair[sni] != pair {
					l.certConflict = fmt.Sprintf("Kong picks the certificate of a server name for all its listens, and listener %s (port %d) already serves %s with other certificates",
						first.spec.Name, first.spec.Port, sni)
				}
				continue
			}
			claimed[sni], claimedPair[sni] = l, pair
			c := byPair[pair]
			if c == nil {
				primary := l.secrets[0]
				c = &declarative.Certificate{
					ID:   declarative.ID("certificate", "", "secret/"+pair),
					Cert: string(primary.Data[corev1.TLSCertKey]),
					Key:  string(primary.Data[corev1.TLSPrivateKeyKey]),
					Tags: objectTags("Secret", primary.Namespace, primary.Name),
				}
				if len(l.secrets) > 1 {
					c.CertAlt, c.KeyAlt = string(l.secrets[1].Data[corev1.TLSCertKey]), string(l.secrets[1].Data[corev1.TLSPrivateKeyKey])
				}
				byPair[pair] = c
			}
			c.SNIs = append(c.SNIs, &declarative.SNI{ID: declarative.ID("sni", "", sni), Name: sni, Tags: c.Tags})
		}
	}
	out := make([]*declarative.Certificate, 0, len(byPair))
	for _, c := range byPair {
		slices.SortFunc(c.SNIs, func(a, b *declarative.SNI) int { return cmp.Compare(a.Name, b.Name) })
		out = append(out, c)
	}
	slices.SortFunc(out, func(a, b *declarative.Certificate) int { return cmp.Compare(a.ID, b.ID) })
	return out
}

func secretKey(s *corev1.Secret) types.NamespacedName {
	return types.NamespacedName{Namespace: s.Namespace, Name: s.Name}
}
