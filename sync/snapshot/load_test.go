package snapshot

import (
	"strings"
	"testing"
)

// Decode refuses the names the API server refuses: they would reach Kong's
// entity names, which the API server's names always fit.
func TestDecodeRefusesNamesTheAPIServerRefuses(t *testing.T) {
	route := func(namespace, name string) string {
		return "apiVersion: gateway.networking.k8s.io/v1\nkind: HTTPRoute\nmetadata:\n  namespace: " + namespace + "\n  name: " + name + "\n"
	}
	service := func(name string) string {
		return "apiVersion: v1\nkind: Service\nmetadata:\n  namespace: apps\n  name: " + name + "\n"
	}
	for _, tc := range []struct {
		doc, refused string // refused: what the error names ("" if accepted)
	}{
		{route("apps", "web.v1"), ""},
		{route("apps", "0!"), `metadata.name "0!"`},
		{route("apps", `""`), "metadata.name is missing"},
		{route("apps", "Web"), `metadata.name "Web"`},
		{route("a.b", "web"), `metadata.namespace "a.b"`},
		{service("web"), ""},
		{service("web.v1"), `metadata.name "web.v1"`}, // a DNS label: no dot
		{service("1web"), ""},                         // RFC 1123: a digit may come first (Kubernetes 1.36)
		{service("Web"), `metadata.name "Web"`},
		{"apiVersion: v1\nkind: Namespace\nmetadata:\n  name: a.b\n", `metadata.name "a.b"`},
	} {
		var objs Objects
		err := objs.Decode(strings.NewReader(tc.doc), "test")
		switch {
		case tc.refused == "" && err != nil:
			t.Errorf("%s: refused: %v", tc.doc, err)
		case tc.refused != "" && (err == nil || !strings.Contains(err.Error(), tc.refused)):
			t.Errorf("%s: want an error naming %s, got %v", tc.doc, tc.refused, err)
		}
	}
}
