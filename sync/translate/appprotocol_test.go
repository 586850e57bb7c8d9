package translate_test

import (
	"strings"
	"testing"

	"k8s.io/apimachinery/pkg/types"

	"github.com/konglet/konglet/sync/snapshot"
	"github.com/konglet/konglet/sync/translate"
)

// TestBackendAppProtocol: an HTTPRoute reaches kubernetes.io/ws backends
// (Kong passes an Upgrade on), and refuses h2c and wss ones rather than
// speak HTTP/1.1 or cleartext to them.
func TestBackendAppProtocol(t *testing.T) {
	for protocol, want := range map[string]string{"kubernetes.io/ws": "", "kubernetes.io/h2c": "UnsupportedProtocol", "kubernetes.io/wss": "UnsupportedProtocol", "http": ""} {
		var objs snapshot.Objects
		in := classYAML + `
apiVersion: gateway.networking.k8s.io/v1
kind: Gateway
metadata: {name: gw, namespace: ns}
spec: {gatewayClassName: konglet, listeners: [{name: http, protocol: HTTP, port: 80}]}
---
apiVersion: v1
kind: Service
metadata: {name: app, namespace: ns}
spec: {ports: [{port: 8082, appProtocol: "` + protocol + `"}]}
---
apiVersion: gateway.networking.k8s.io/v1
kind: HTTPRoute
metadata: {name: r, namespace: ns}
spec: {parentRefs: [{name: gw}], rules: [{backendRefs: [{name: app, port: 8082}]}]}
`
		if err := objs.Decode(strings.NewReader(in), "in"); err != nil {
			t.Fatal(err)
		}
		res := translate.Translate(objs.Build(snapshot.DefaultControllerName, nil, types.NamespacedName{}, snapshot.DefaultKong(snapshot.RouterExpressions)), nil)
		got := ""
		for _, parents := range res.Status.Routes {
			for _, c := range parents[0].Conditions {
				if c.Type == "ResolvedRefs" && c.Status == "False" {
					got = c.Reason
				}
			}
		}
		if got != want {
			t.Errorf("appProtocol %s: ResolvedRefs reason %q, want %q", protocol, got, want)
		}
	}
}

// TestRetryAndSessionPersistenceRefused: rule fields Kong cannot do are
// reported on the rule, never served without.
func TestRetryAndSessionPersistenceRefused(t *testing.T) {
	for field, want := range map[string]string{
		`retry: {codes: [500], attempts: 2}`:                 "retry is not supported",
		`sessionPersistence: {sessionName: s, type: Cookie}`: "sessionPersistence is not supported",
	} {
		var objs snapshot.Objects
		in := classYAML + `
apiVersion: gateway.networking.k8s.io/v1
kind: Gateway
metadata: {name: gw, namespace: ns}
spec: {gatewayClassName: konglet, listeners: [{name: http, protocol: HTTP, port: 80}]}
---
apiVersion: gateway.networking.k8s.io/v1
kind: HTTPRoute
metadata: {name: r, namespace: ns}
spec: {parentRefs: [{name: gw}], rules: [{` + field + `}]}
`
		if err := objs.Decode(strings.NewReader(in), "in"); err != nil {
			t.Fatal(err)
		}
		res := translate.Translate(objs.Build(snapshot.DefaultControllerName, nil, types.NamespacedName{}, snapshot.DefaultKong(snapshot.RouterExpressions)), nil)
		got := ""
		for _, parents := range res.Status.Routes {
			got = parents[0].Conditions[0].Message
		}
		if !strings.Contains(got, want) || len(res.Config.Services) != 0 {
			t.Errorf("%s: Accepted message %q, %d services", field, got, len(res.Config.Services))
		}
	}
}
