package translate_test

import (
	"crypto"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/rsa"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/base64"
	"encoding/pem"
	"fmt"
	"math/big"
	"net/http"
	"strings"
	"testing"
	"time"

	"k8s.io/apimachinery/pkg/types"
	gwv1 "sigs.k8s.io/gateway-api/apis/v1"

	"github.com/konglet/konglet/sync/snapshot"
	"github.com/konglet/konglet/sync/translate"
	"github.com/konglet/konglet/test/kongdouble"
)

// tlsSecret is a kubernetes.io/tls Secret in ns with a fresh self-signed
// certificate of the key's type.
func tlsSecret(t *testing.T, name string, key crypto.Signer) string {
	t.Helper()
	tmpl := &x509.Certificate{SerialNumber: big.NewInt(1), Subject: pkix.Name{CommonName: name}, DNSNames: []string{"secure.example.com"},
		NotBefore: time.Now().Add(-time.Hour), NotAfter: time.Now().Add(time.Hour)}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, tmpl, key.Public(), key)
	if err != nil {
		t.Fatal(err)
	}
	kder, err := x509.MarshalPKCS8PrivateKey(key)
	if err != nil {
		t.Fatal(err)
	}
	enc := func(typ string, b []byte) string {
		return base64.StdEncoding.EncodeToString(pem.EncodeToMemory(&pem.Block{Type: typ, Bytes: b}))
	}
	return fmt.Sprintf("---\napiVersion: v1\nkind: Secret\nmetadata: {name: %s, namespace: ns}\ntype: kubernetes.io/tls\ndata: {tls.crt: %s, tls.key: %s}\n",
		name, enc("CERTIFICATE", der), enc("PRIVATE KEY", kder))
}

// TestCertificatesPerKeyTypeAndName: a listener's first certificate of each
// key type is served (Kong's cert and cert_alt), a further one is said
// unserved, and a listener that wants other certificates for a server
// name another listener already serves is not Programmed (Kong picks
// certificates by server name, for all its listens).
func TestCertificatesPerKeyTypeAndName(t *testing.T) {
	ec := func() crypto.Signer {
		k, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
		if err != nil {
			t.Fatal(err)
		}
		return k
	}
	rsaKey, err := rsa.GenerateKey(rand.Reader, 2048)
	if err != nil {
		t.Fatal(err)
	}
	objects := classYAML + `
apiVersion: gateway.networking.k8s.io/v1
kind: Gateway
metadata: {name: gw, namespace: ns}
spec:
  gatewayClassName: konglet
  listeners:
  - {name: first, protocol: HTTPS, port: 443, hostname: secure.example.com, tls: {certificateRefs: [{name: ec}, {name: rsa}, {name: ec2}]}}
  - {name: second, protocol: HTTPS, port: 8443, hostname: secure.example.com, tls: {certificateRefs: [{name: other}]}}
` + tlsSecret(t, "ec", ec()) + tlsSecret(t, "rsa", rsaKey) + tlsSecret(t, "ec2", ec()) + tlsSecret(t, "other", ec())
	for _, flavor := range []string{snapshot.RouterExpressions, snapshot.RouterTraditionalCompat} {
		res := translate.Translate(buildSnapshot(t, objects, types.NamespacedName{}, snapshot.DefaultKong(flavor)), nil)
		if len(res.Config.Certificates) != 1 || res.Config.Certificates[0].CertAlt == "" || len(res.Config.Certificates[0].SNIs) != 1 {
			t.Fatalf("%s: certificates %+v, want one with an alternative", flavor, res.Config.Certificates)
		}
		doc, err := declarativeJSON(res)
		if err != nil {
			t.Fatal(err)
		}
		kong := kongdouble.New(kongdouble.Options{RouterFlavor: flavor})
		if status, body := load(kong, doc); status != http.StatusCreated {
			t.Fatalf("%s: Kong refused: %d %s", flavor, status, body)
		}
		kong.Close()
		conds := map[string]string{}
		for _, l := range res.Status.Gateways[types.NamespacedName{Namespace: "ns", Name: "gw"}].Listeners {
			for _, c := range l.Conditions {
				conds[string(l.Name)+"/"+c.Type] = string(c.Status) + " " + c.Message
			}
		}
		if got := conds["first/"+string(gwv1.ListenerConditionResolvedRefs)]; !strings.HasPrefix(got, "True Secrets ns/ec2 are not served") {
			t.Errorf("%s: first listener ResolvedRefs %q", flavor, got)
		}
		if got := conds["first/"+string(gwv1.ListenerConditionProgrammed)]; !strings.HasPrefix(got, "True") {
			t.Errorf("%s: first listener Programmed %q", flavor, got)
		}
		if got := conds["second/"+string(gwv1.ListenerConditionProgrammed)]; !strings.Contains(got, "False Kong picks the certificate of a server name for all its listens") {
			t.Errorf("%s: second listener Programmed %q", flavor, got)
		}
	}
}
