package translate_test

import (
	"net/http"
	"os"
	"strings"
	"testing"

	"k8s.io/apimachinery/pkg/types"

	"github.com/konglet/konglet/sync/snapshot"
	"github.com/konglet/konglet/sync/translate"
	"github.com/konglet/konglet/test/kongdouble"
)

const httpsOnlyObjects = classYAML + `
apiVersion: v1
kind: Service
metadata: {name: kong-proxy, namespace: kong}
spec:
  ports: [{name: http, port: 80, targetPort: 8000}, {name: https, port: 443, targetPort: 8443}]
---
apiVersion: gateway.networking.k8s.io/v1
kind: Gateway
metadata: {name: gw, namespace: kong}
spec:
  gatewayClassName: konglet
  listeners:
  - {name: http, protocol: HTTP, port: 80}
  - {name: secure, protocol: HTTPS, port: 443, hostname: secure.example.com, tls: {certificateRefs: [{name: secure}]}}
---
apiVersion: v1
kind: Service
metadata: {name: app, namespace: kong}
spec: {ports: [{port: 80}]}
---
apiVersion: gateway.networking.k8s.io/v1
kind: HTTPRoute
metadata: {name: secure-only, namespace: kong}
spec:
  parentRefs: [{name: gw, sectionName: secure}]
  rules: [{matches: [{path: {value: /s}}], backendRefs: [{name: app, port: 80}]}]
---
apiVersion: gateway.networking.k8s.io/v1
kind: HTTPRoute
metadata: {name: plain, namespace: kong}
spec:
  parentRefs: [{name: gw, sectionName: http}]
  rules: [{backendRefs: [{name: app, port: 80}]}]
`

// TestHTTPSOnlyRoutesStayOffPlainHTTP: Kong matches an https-only route on
// a plain HTTP request too and answers 426; konglet keeps such a route on
// its listeners' port, so the HTTP listener's routes serve the request.
func TestHTTPSOnlyRoutesStayOffPlainHTTP(t *testing.T) {
	secret := secureSecret(t)
	for _, flavor := range []string{snapshot.RouterExpressions, snapshot.RouterTraditionalCompat} {
		t.Run(flavor, func(t *testing.T) {
			res := translate.Translate(buildSnapshot(t, httpsOnlyObjects+"---\n"+secret, types.NamespacedName{Namespace: "kong", Name: "kong-proxy"}, snapshot.DefaultKong(flavor)), nil)
			doc, err := declarativeJSON(res)
			if err != nil {
				t.Fatal(err)
			}
			d := kongdouble.New(kongdouble.Options{RouterFlavor: flavor})
			defer d.Close()
			if status, body := load(d, doc); status != http.StatusCreated {
				t.Fatalf("Kong refused: %d %s", status, body)
			}
			dec, ok := d.Route(kongdouble.Request{ListenPort: 8000, Host: "secure.example.com", Path: "/s"})
			if !ok || dec.RedirectStatus != 0 || ruleOf(dec.RouteName) != "kong/plain/0/0" {
				t.Errorf("plain HTTP: served by %q (%v, redirect %d), want kong/plain", dec.RouteName, ok, dec.RedirectStatus)
			}
			dec, ok = d.Route(kongdouble.Request{ListenPort: 8443, TLS: true, SNI: "secure.example.com", Host: "secure.example.com", Path: "/s"})
			if !ok || ruleOf(dec.RouteName) != "kong/secure-only/0/0" {
				t.Errorf("HTTPS: served by %q (%v), want kong/secure-only", dec.RouteName, ok)
			}
		})
	}
}

// secureSecret is the test certificate of the https golden scenario.
func secureSecret(t *testing.T) string {
	t.Helper()
	raw, err := os.ReadFile("testdata/golden/https/input.yaml")
	if err != nil {
		t.Fatal(err)
	}
	for _, doc := range strings.Split(string(raw), "\n---\n") {
		if strings.Contains(doc, "metadata: {name: secure, namespace: kong}") {
			return doc + "\n"
		}
	}
	t.Fatal("no Secret kong/secure in the https scenario")
	return ""
}
