package main

import (
	"context"
	"fmt"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// TestClientsAskForCompressionOnlyWhenTold: neither client asks the API
// server to gzip (lists and, since Kubernetes 1.37, watch streams) unless
// --kube-api-compression says so.
func TestClientsAskForCompressionOnlyWhenTold(t *testing.T) {
	var mu sync.Mutex
	var asked []string
	// TLS, as in a cluster: client-go hands a plain-HTTP client Go's default
	// transport, whatever the config says.
	api := httptest.NewTLSServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		mu.Lock()
		asked = append(asked, r.URL.Path+" Accept-Encoding="+r.Header.Get("Accept-Encoding"))
		mu.Unlock()
		list := `{"kind":"ServiceList","apiVersion":"v1","metadata":{},"items":[]}`
		if strings.HasPrefix(r.URL.Path, "/apis/gateway.networking.k8s.io/") {
			list = `{"kind":"HTTPRouteList","apiVersion":"gateway.networking.k8s.io/v1","metadata":{},"items":[]}`
		}
		w.Header().Set("Content-Type", "application/json")
		fmt.Fprint(w, list)
	}))
	defer api.Close()
	kubeconfig := filepath.Join(t.TempDir(), "kubeconfig")
	if err := os.WriteFile(kubeconfig, []byte(fmt.Sprintf(`apiVersion: v1
kind: Config
clusters: [{name: c, cluster: {server: %q, insecure-skip-tls-verify: true}}]
contexts: [{name: c, context: {cluster: c, user: u}}]
users: [{name: u, user: {token: t}}]
current-context: c
`, api.URL)), 0o600); err != nil {
		t.Fatal(err)
	}
	for _, compression := range []bool{false, true} {
		asked = nil
		kube, gw, err := config{kubeconfig: kubeconfig, kubeQPS: 100, kubeBurst: 100, kubeCompression: compression}.clients()
		if err != nil {
			t.Fatal(err)
		}
		ctx := context.Background()
		if _, err := kube.CoreV1().Services("").List(ctx, metav1.ListOptions{}); err != nil {
			t.Fatal(err)
		}
		if _, err := gw.GatewayV1().HTTPRoutes("").List(ctx, metav1.ListOptions{}); err != nil {
			t.Fatal(err)
		}
		want := ""
		if compression {
			want = "gzip"
		}
		mu.Lock()
		if len(asked) != 2 {
			t.Fatalf("compression %v: requests %q, want 2", compression, asked)
		}
		for _, a := range asked {
			if !strings.HasSuffix(a, "Accept-Encoding="+want) {
				t.Errorf("compression %v: %s", compression, a)
			}
		}
		mu.Unlock()
	}
}
