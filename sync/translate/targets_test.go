package translate_test

import (
	"net/netip"
	"slices"
	"strings"
	"testing"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/konglet/konglet/sync/snapshot"
	"github.com/konglet/konglet/sync/translate"
)

const externalNameInput = classYAML + `
apiVersion: gateway.networking.k8s.io/v1
kind: Gateway
metadata: {name: gw, namespace: kong}
spec:
  gatewayClassName: konglet
  listeners: [{name: http, protocol: HTTP, port: 80, allowedRoutes: {namespaces: {from: All}}}]
---
apiVersion: v1
kind: Service
metadata: {name: kong-proxy, namespace: kong}
spec:
  ports: [{name: http, port: 80, targetPort: 8000}]
---
apiVersion: v1
kind: Service
metadata: {name: db, namespace: team-b}
spec: {clusterIP: 10.96.2.2, ports: [{port: 5432}]}
---
apiVersion: v1
kind: Service
metadata: {name: ext, namespace: team-a}
spec: {type: ExternalName, externalName: ext.example.net}
---
apiVersion: gateway.networking.k8s.io/v1
kind: HTTPRoute
metadata: {name: r, namespace: team-a}
spec:
  parentRefs: [{name: gw, namespace: kong}]
  rules: [{backendRefs: [{name: ext, port: 443}]}]
`

const grantDB = `
apiVersion: gateway.networking.k8s.io/v1
kind: ReferenceGrant
metadata: {name: db, namespace: team-b}
spec:
  from: [{group: gateway.networking.k8s.io, kind: HTTPRoute, namespace: team-a}]
  to: [{group: "", kind: Service, name: db}]
`

// TestExternalNameResolutions: the addresses konglet resolved for an
// ExternalName decide, not its name: each forbidden one refuses the
// backend with a reason, an allowed one becomes the only Kong target.
func TestExternalNameResolutions(t *testing.T) {
	kongPod := &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Name: "kong-1", Namespace: "kong"},
		Status: corev1.PodStatus{PodIPs: []corev1.PodIP{{IP: "10.244.0.7"}}}}
	for _, tc := range []struct {
		name    string
		allow   bool
		res     *snapshot.Resolution
		grant   bool
		reason  string
		message string
		target  string
	}{
		{name: "off by default", res: addrs("192.0.2.10"), reason: "RefNotPermitted", message: "--allow-external-name"},
		{name: "not resolved yet", allow: true, reason: "BackendNotFound", message: "not resolved yet"},
		{name: "no such name", allow: true, res: &snapshot.Resolution{Err: "lookup ext.example.net: no such host"}, reason: "BackendNotFound", message: "no such host"},
		{name: "loopback", allow: true, res: addrs("192.0.2.10", "127.0.0.1"), reason: "RefNotPermitted", message: "loopback"},
		{name: "mapped loopback", allow: true, res: addrs("::ffff:127.0.0.2"), reason: "RefNotPermitted", message: "loopback"},
		{name: "v6 loopback", allow: true, res: addrs("::1"), reason: "RefNotPermitted", message: "loopback"},
		{name: "metadata", allow: true, res: addrs("169.254.169.254"), reason: "RefNotPermitted", message: "link-local"},
		{name: "aws v6 metadata", allow: true, res: addrs("fd00:ec2::254"), reason: "RefNotPermitted", message: "metadata"},
		{name: "aws v6 metadata with a zone", allow: true, res: addrs("fd00:ec2::254%eth0"), reason: "RefNotPermitted", message: "zone"},
		{name: "this host", allow: true, res: addrs("0.0.0.0"), reason: "RefNotPermitted", message: "unspecified"},
		{name: "a Kong Pod", allow: true, res: addrs("10.244.0.7"), reason: "RefNotPermitted", message: "Kong Pod"},
		{name: "another namespace's Service", allow: true, res: addrs("10.96.2.2"), reason: "RefNotPermitted", message: "team-b/db"},
		{name: "another namespace's Service, granted", allow: true, res: addrs("10.96.2.2"), grant: true, target: "10.96.2.2:443"},
		{name: "public", allow: true, res: addrs("192.0.2.10"), target: "192.0.2.10:443"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			input := externalNameInput
			if tc.grant {
				input += "---" + grantDB
			}
			var objs snapshot.Objects
			if err := objs.Decode(strings.NewReader(input), tc.name); err != nil {
				t.Fatal(err)
			}
			snap := objs.Build(snapshot.DefaultControllerName, nil, publishService, snapshot.DefaultKong(snapshot.RouterExpressions))
			snap.Pods = []*corev1.Pod{kongPod}
			snap.AllowExternalName = tc.allow
			if tc.res != nil {
				snap.ExternalNames = map[string]snapshot.Resolution{"ext.example.net": *tc.res}
			}
			res := translate.Translate(snap, nil)
			parents := res.Status.Routes[translate.ObjectRef{Group: "gateway.networking.k8s.io", Kind: "HTTPRoute", Namespace: "team-a", Name: "r"}]
			if len(parents) != 1 {
				t.Fatalf("route status %+v", res.Status.Routes)
			}
			c := meta(parents[0].Conditions, "ResolvedRefs")
			var targets []string
			for _, u := range res.Config.Upstreams {
				for _, target := range u.Targets {
					targets = append(targets, target.Target)
				}
			}
			if tc.target != "" {
				if c.Status != metav1.ConditionTrue || len(targets) != 1 || targets[0] != tc.target {
					t.Fatalf("ResolvedRefs %+v, targets %v; want True and [%s]", c, targets, tc.target)
				}
				return
			}
			if c.Status != metav1.ConditionFalse || c.Reason != tc.reason || !strings.Contains(c.Message, tc.message) {
				t.Fatalf("ResolvedRefs %+v, want False/%s with %q", c, tc.reason, tc.message)
			}
			if len(targets) != 0 {
				t.Fatalf("a refused backend has targets %v", targets)
			}
		})
	}
}

func addrs(ips ...string) *snapshot.Resolution {
	r := &snapshot.Resolution{}
	for _, ip := range ips {
		r.Addrs = append(r.Addrs, netip.MustParseAddr(ip))
	}
	return r
}

func meta(conds []metav1.Condition, typ string) metav1.Condition {
	for _, c := range conds {
		if c.Type == typ {
			return c
		}
	}
	return metav1.Condition{}
}

// TestExternalNamesListsWhatRoutesUse: the names to resolve are those of
// the ExternalName Services routes of any kind name, not IP literals, not
// other Services, not ExternalNames no route uses.
func TestExternalNamesListsWhatRoutesUse(t *testing.T) {
	input := externalNameInput + `---
apiVersion: v1
kind: Service
metadata: {name: literal, namespace: team-a}
spec: {type: ExternalName, externalName: 192.0.2.1}
---
apiVersion: v1
kind: Service
metadata: {name: unused, namespace: team-a}
spec: {type: ExternalName, externalName: unused.example.net}
---
apiVersion: v1
kind: Service
metadata: {name: stream, namespace: team-b}
spec: {type: ExternalName, externalName: stream.example.net}
---
apiVersion: gateway.networking.k8s.io/v1
kind: TCPRoute
metadata: {name: t, namespace: team-a}
spec:
  parentRefs: [{name: gw, namespace: kong}]
  rules: [{backendRefs: [{name: stream, namespace: team-b, port: 5432}, {name: literal, port: 1}, {name: db, namespace: team-b, port: 5432}]}]
`
	snap := buildSnapshot(t, input, publishService, snapshot.DefaultKong(snapshot.RouterExpressions))
	if got, want := translate.ExternalNames(snap), []string{"ext.example.net", "stream.example.net"}; !slices.Equal(got, want) {
		t.Fatalf("ExternalNames = %v, want %v", got, want)
	}
}
