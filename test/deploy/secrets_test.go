package deploy

import (
	"context"
	"fmt"
	"strings"
	"testing"
	"time"

	authenticationv1 "k8s.io/api/authentication/v1"
	corev1 "k8s.io/api/core/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"
	gwv1 "sigs.k8s.io/gateway-api/apis/v1"

	"github.com/konglet/konglet/test/harness"
)

// TestSecretsOutsideTheGatewayNamespace: with deploy/rbac as it is, the
// ServiceAccount can read Secrets in the Gateway's namespace only (list and
// watch; not even get there), never another namespace's nor across the
// cluster. konglet running as that account with an HTTPS listener whose
// Secret is in another namespace (granted by a ReferenceGrant, but without a
// Role there) says on that listener that a Role is needed, while the HTTPS
// listener beside it keeps serving; once the Role of docs/install.md is
// added, the listener is served too.
func TestSecretsOutsideTheGatewayNamespace(t *testing.T) {
	manifests, err := loadRBAC()
	if err != nil {
		t.Fatal(err)
	}
	lay, err := layoutOf(manifests)
	if err != nil {
		t.Fatal(err)
	}
	id := fmt.Sprintf("sec%d", time.Now().UnixNano()%100000)
	ns := map[string]string{}
	for _, n := range manifests.namespaces() {
		ns[n] = id + "-" + n
	}
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	w := newWorld(ctx, scenarioSpec{id: id, rbac: manifests.relocated(ns, "-"+id), layout: lay.relocated(ns)})
	defer w.cleanUp()
	if err := w.setUp(); err != nil {
		t.Fatal(err)
	}

	// What the account may do, asked as the account itself.
	sa := w.spec.layout.ServiceAccount
	tr, err := env.Kube.CoreV1().ServiceAccounts(sa.Namespace).CreateToken(ctx, sa.Name,
		&authenticationv1.TokenRequest{Spec: authenticationv1.TokenRequestSpec{ExpirationSeconds: ptr(int64(600))}}, metav1.CreateOptions{})
	if err != nil {
		t.Fatal(err)
	}
	asSA := rest.AnonymousClientConfig(env.Config)
	asSA.BearerToken = tr.Status.Token
	kube, err := kubernetes.NewForConfig(asSA)
	if err != nil {
		t.Fatal(err)
	}
	byName := metav1.ListOptions{FieldSelector: "metadata.name=secure-cert,type=kubernetes.io/tls"}
	if list, err := kube.CoreV1().Secrets(w.gwNS).List(ctx, byName); err != nil || len(list.Items) != 1 {
		t.Errorf("the account cannot list its listener's Secret in the Gateway's namespace: %v", err)
	}
	refused := map[string]error{}
	_, refused["get in the Gateway's namespace"] = kube.CoreV1().Secrets(w.gwNS).Get(ctx, "secure-cert", metav1.GetOptions{})
	_, refused["list in another namespace"] = kube.CoreV1().Secrets(w.otherNS).List(ctx, metav1.ListOptions{})
	_, refused["list by name in another namespace"] = kube.CoreV1().Secrets(w.otherNS).List(ctx,
		metav1.ListOptions{FieldSelector: "metadata.name=elsewhere-cert"})
	_, refused["get in another namespace"] = kube.CoreV1().Secrets(w.otherNS).Get(ctx, "elsewhere-cert", metav1.GetOptions{})
	_, refused["list across the cluster"] = kube.CoreV1().Secrets("").List(ctx, metav1.ListOptions{})
	_, refused["watch across the cluster"] = kube.CoreV1().Secrets("").Watch(ctx, metav1.ListOptions{})
	for what, err := range refused {
		if !apierrors.IsForbidden(err) {
			t.Errorf("%s: want Forbidden, got %v", what, err)
		}
	}

	// A second HTTPS listener with a Secret in another namespace, granted to
	// the Gateway but without a Role for konglet there.
	certPEM, keyPEM, err := harness.SelfSigned("elsewhere.example.com", 2)
	if err != nil {
		t.Fatal(err)
	}
	if err := w.create(&corev1.Secret{ObjectMeta: metav1.ObjectMeta{Name: "elsewhere-cert", Namespace: w.otherNS},
		Type: corev1.SecretTypeTLS, Data: map[string][]byte{corev1.TLSCertKey: certPEM, corev1.TLSPrivateKeyKey: keyPEM}}); err != nil {
		t.Fatal(err)
	}
	if err := w.create(&gwv1.ReferenceGrant{ObjectMeta: metav1.ObjectMeta{Name: "gateway-certs", Namespace: w.otherNS},
		Spec: gwv1.ReferenceGrantSpec{
			From: []gwv1.ReferenceGrantFrom{{Group: gwv1.GroupName, Kind: "Gateway", Namespace: gwv1.Namespace(w.gwNS)}},
			To:   []gwv1.ReferenceGrantTo{{Kind: "Secret"}},
		}}); err != nil {
		t.Fatal(err)
	}
	g, err := env.GW.GatewayV1().Gateways(w.gwNS).Get(ctx, w.gatewayName, metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	g.Spec.Listeners = append(g.Spec.Listeners, gwv1.Listener{Name: "elsewhere", Protocol: gwv1.HTTPSProtocolType, Port: 443,
		Hostname: ptr(gwv1.Hostname("elsewhere.example.com")),
		TLS: &gwv1.ListenerTLSConfig{CertificateRefs: []gwv1.SecretObjectReference{{Name: "elsewhere-cert",
			Namespace: ptr(gwv1.Namespace(w.otherNS))}}}})
	if _, err := env.GW.GatewayV1().Gateways(w.gwNS).Update(ctx, g, metav1.UpdateOptions{}); err != nil {
		t.Fatal(err)
	}

	p, _, err := w.startKonglet()
	if err != nil {
		t.Fatal(err)
	}
	defer p.Stop()
	checks := w.checks()
	resolvedRefs := func(listener string, want metav1.ConditionStatus, reason string, inMessage ...string) error {
		g, err := env.GW.GatewayV1().Gateways(w.gwNS).Get(ctx, w.gatewayName, metav1.GetOptions{})
		if err != nil {
			return err
		}
		for _, l := range g.Status.Listeners {
			if string(l.Name) != listener {
				continue
			}
			if err := expectCond(l.Conditions, "ResolvedRefs", want, reason); err != nil {
				return err
			}
			for _, c := range l.Conditions {
				for _, part := range inMessage {
					if c.Type == "ResolvedRefs" && !strings.Contains(c.Message, part) {
						return fmt.Errorf("ResolvedRefs message %q does not say %q", c.Message, part)
					}
				}
			}
			return nil
		}
		return fmt.Errorf("no status for listener %s", listener)
	}
	eventually(t, 30*time.Second, "the listener with a Secret konglet may not read says why, the good one serves", func() error {
		if err := resolvedRefs("elsewhere", metav1.ConditionFalse, "RefNotPermitted",
			w.otherNS+"/elsewhere-cert", "namespace "+w.otherNS, "Role", "docs/install.md"); err != nil {
			return err
		}
		return checks["https-listener"]()
	})
	if p.Exited() {
		t.Fatalf("konglet exited:\n%s", tail(p.Logs(), 40))
	}

	// The Role and RoleBinding that docs/install.md gives for this case.
	role := &rbacv1.Role{ObjectMeta: metav1.ObjectMeta{Name: "konglet-certificates", Namespace: w.otherNS},
		Rules: []rbacv1.PolicyRule{{APIGroups: []string{""}, Resources: []string{"secrets"}, Verbs: []string{"list", "watch"}}}}
	binding := &rbacv1.RoleBinding{ObjectMeta: metav1.ObjectMeta{Name: "konglet-certificates", Namespace: w.otherNS},
		RoleRef:  rbacv1.RoleRef{APIGroup: rbacv1.GroupName, Kind: "Role", Name: role.Name},
		Subjects: []rbacv1.Subject{{Kind: "ServiceAccount", Name: sa.Name, Namespace: sa.Namespace}}}
	if _, err := env.Kube.RbacV1().Roles(w.otherNS).Create(ctx, role, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	if _, err := env.Kube.RbacV1().RoleBindings(w.otherNS).Create(ctx, binding, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	// client-go retries a refused watch with a backoff of up to 30 s.
	eventually(t, 60*time.Second, "with the Role, the listener is resolved", func() error {
		return resolvedRefs("elsewhere", metav1.ConditionTrue, "ResolvedRefs")
	})
}
