package admin_test

import (
	"context"
	"errors"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/konglet/konglet/proxy/admin"
	"github.com/konglet/konglet/proxy/declarative"
	"github.com/konglet/konglet/test/kongdouble"
)

func client(t *testing.T, kong *kongdouble.Double) *admin.Client {
	t.Helper()
	c, err := admin.New(kong.URL(), 5*time.Second, 0)
	if err != nil {
		t.Fatal(err)
	}
	return c
}

func TestInfoReadsListenersFlavorAndPortMaps(t *testing.T) {
	kong := kongdouble.New(kongdouble.Options{RouterFlavor: "expressions", PortMaps: []string{"80:8000", "443:8443"}, UntrustedLua: "off"})
	defer kong.Close()
	info, err := client(t, kong).Info(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	if info.RouterFlavor != "expressions" || info.PortMaps[80] != 8000 || info.PortMaps[443] != 8443 || info.NodeID == "" {
		t.Fatalf("info = %+v", info)
	}
	if len(info.ProxyListeners) != 2 || info.ProxyListeners[0].Port != 8000 || info.ProxyListeners[0].SSL || !info.ProxyListeners[1].SSL {
		t.Fatalf("proxy listeners = %+v", info.ProxyListeners)
	}
	if !info.EnabledPlugins["request-transformer"] {
		t.Fatalf("enabled plugins = %v", info.EnabledPlugins)
	}
	if info.UntrustedLua != "off" {
		t.Fatalf("untrusted_lua = %q", info.UntrustedLua)
	}
}

// TestLoadHashMatchesKong: Kong's configuration_hash after a load is the
// md5 konglet computes, so "unchanged" can be decided without a push.
func TestLoadHashMatchesKong(t *testing.T) {
	kong := kongdouble.New(kongdouble.Options{})
	defer kong.Close()
	c := client(t, kong)
	doc, err := declarative.Marshal(&declarative.Config{FormatVersion: declarative.FormatVersion,
		Upstreams: []*declarative.Upstream{{Name: "u.svc"}}})
	if err != nil {
		t.Fatal(err)
	}
	if err := c.Load(context.Background(), doc); err != nil {
		t.Fatal(err)
	}
	hash, err := c.ConfigHash(context.Background())
	if err != nil || hash != declarative.Hash(doc) {
		t.Fatalf("hash %q, %v; want %s", hash, err, declarative.Hash(doc))
	}
	if err := c.Load(context.Background(), doc); err != nil || kong.Loads() != 1 {
		t.Fatalf("second identical load: %v, loads = %d (check_hash should make it a no-op)", err, kong.Loads())
	}
	for name, want := range map[string]bool{"u.svc": true, "other.svc": false} {
		if got, err := c.HasUpstream(context.Background(), name); err != nil || got != want {
			t.Errorf("HasUpstream(%s) = %v, %v; want %v", name, got, err, want)
		}
	}
	kong.SetDown(true)
	if _, err := c.HasUpstream(context.Background(), "u.svc"); err == nil {
		t.Error("HasUpstream with Kong down: no error")
	}
}

func TestLoadErrors(t *testing.T) {
	kong := kongdouble.New(kongdouble.Options{})
	defer kong.Close()
	c := client(t, kong)
	bad := []byte(`{"_format_version":"3.0","services":[{"name":"s","host":"h","tags":["k8s-name:r","k8s-namespace:ns","k8s-kind:HTTPRoute"],"routes":[{"name":"r","protocols":["http"],"expression":"http.path ==","tags":["k8s-name:r","k8s-namespace:ns","k8s-kind:HTTPRoute"]}]}]}`)
	err := c.Load(context.Background(), bad)
	le, refused := admin.IsRefusal(err)
	if !refused || len(le.Entities) != 1 || le.Entities[0].Type != "route" || le.Entities[0].Name != "r" || le.Entities[0].Messages() == "" {
		t.Fatalf("refusal = %+v (%v)", le, err)
	}
	kong.FailNext(http.StatusTooManyRequests, 1)
	err = c.Load(context.Background(), []byte(`{"_format_version":"3.0"}`))
	if _, refused := admin.IsRefusal(err); refused || err == nil {
		t.Fatalf("429 must be an error that is not a refusal: %v", err)
	}
	var loadErr *admin.LoadError
	if !asLoadError(err, &loadErr) || loadErr.RetryAfter != time.Second {
		t.Fatalf("429: want Retry-After of 1s, got %+v", loadErr)
	}
	kong.SetDown(true)
	if err := c.Load(context.Background(), []byte(`{"_format_version":"3.0"}`)); err == nil {
		t.Fatal("a Kong that closes connections must give an error")
	}
}

func asLoadError(err error, target **admin.LoadError) bool {
	return errors.As(err, target)
}

func TestTooLargeSaysWhatToRaise(t *testing.T) {
	kong := kongdouble.New(kongdouble.Options{})
	defer kong.Close()
	kong.FailNext(http.StatusRequestEntityTooLarge, 1)
	err := client(t, kong).Load(context.Background(), []byte(`{"_format_version":"3.0"}`))
	if err == nil || !strings.Contains(err.Error(), "nginx_admin_client_max_body_size") {
		t.Fatalf("413: %v", err)
	}
}

func TestLoadKeepsToTheBodyLimit(t *testing.T) {
	kong := kongdouble.New(kongdouble.Options{})
	defer kong.Close()
	c, err := admin.New(kong.URL(), 5*time.Second, 64)
	if err != nil {
		t.Fatal(err)
	}
	err = c.Load(context.Background(), []byte(`{"_format_version":"3.0","upstreams":[{"name":"a-rather-long-upstream-name.svc"}]}`))
	var le *admin.LoadError
	if !errors.As(err, &le) || le.StatusCode != http.StatusRequestEntityTooLarge || kong.Posts() != 0 {
		t.Fatalf("a body above the limit: %v (posts %d), want a 413-like error and nothing sent", err, kong.Posts())
	}
}
