package kongdouble_test

import (
	"bytes"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/rsa"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/json"
	"encoding/pem"
	"io"
	"math/big"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/google/uuid"

	"github.com/konglet/konglet/test/kongdouble"
)

type M = map[string]any
type L = []any

func newDouble(t *testing.T, opts kongdouble.Options) *kongdouble.Double {
	t.Helper()
	d := kongdouble.New(opts)
	t.Cleanup(d.Close)
	return d
}

type response struct {
	status int
	header http.Header
	raw    []byte
	body   M
}

func do(t *testing.T, method, url, contentType string, body []byte) response {
	t.Helper()
	req, err := http.NewRequest(method, url, bytes.NewReader(body))
	if err != nil {
		t.Fatal(err)
	}
	if contentType != "" {
		req.Header.Set("Content-Type", contentType)
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatalf("%s %s: %v", method, url, err)
	}
	defer resp.Body.Close()
	raw, err := io.ReadAll(resp.Body)
	if err != nil {
		t.Fatal(err)
	}
	r := response{status: resp.StatusCode, header: resp.Header, raw: raw}
	if len(raw) > 0 && strings.HasPrefix(resp.Header.Get("Content-Type"), "application/json") {
		if err := json.Unmarshal(raw, &r.body); err != nil {
			t.Fatalf("bad JSON answer %q: %v", raw, err)
		}
	}
	return r
}

func mustJSON(t *testing.T, v any) []byte {
	t.Helper()
	b, err := json.Marshal(v)
	if err != nil {
		t.Fatal(err)
	}
	return b
}

// postConfig sends the config as the top-level object (form 1).
func postConfig(t *testing.T, d *kongdouble.Double, query string, cfg M) response {
	t.Helper()
	return do(t, http.MethodPost, d.URL()+"/config"+query, "application/json", mustJSON(t, cfg))
}

// postConfigString sends {"config": "<json>"} (form 2), as go-kong does.
func postConfigString(t *testing.T, d *kongdouble.Double, query, text string) response {
	t.Helper()
	return do(t, http.MethodPost, d.URL()+"/config"+query, "application/json", mustJSON(t, M{"config": text}))
}

func get(t *testing.T, d *kongdouble.Double, path string) response {
	t.Helper()
	return do(t, http.MethodGet, d.URL()+path, "", nil)
}

// flatError is one (entity, error) pair of a flattened_errors answer.
type flatError struct {
	entityType, entityName, kind, field, message string
}

func flatErrors(t *testing.T, r response) []flatError {
	t.Helper()
	list, ok := r.body["flattened_errors"].([]any)
	if !ok {
		return nil
	}
	var out []flatError
	for _, e := range list {
		entry := e.(M)
		name, _ := entry["entity_name"].(string)
		for _, er := range entry["errors"].([]any) {
			em := er.(M)
			field, _ := em["field"].(string)
			out = append(out, flatError{entry["entity_type"].(string), name, em["type"].(string), field, em["message"].(string)})
		}
	}
	return out
}

// lookup follows a path of object keys and (0-based) array indexes.
func lookup(v any, path ...any) any {
	for _, p := range path {
		switch k := p.(type) {
		case string:
			m, ok := v.(M)
			if !ok {
				return nil
			}
			v = m[k]
		case int:
			a, ok := v.([]any)
			if !ok || k >= len(a) {
				return nil
			}
			v = a[k]
		}
	}
	return v
}

// certPair makes a self-signed ECDSA certificate and its key in PEM.
func certPair(t *testing.T, cn string) (string, string) {
	t.Helper()
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	tmpl := &x509.Certificate{
		SerialNumber: big.NewInt(1),
		Subject:      pkix.Name{CommonName: cn},
		DNSNames:     []string{cn},
		NotBefore:    time.Now().Add(-time.Hour),
		NotAfter:     time.Now().Add(time.Hour),
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, tmpl, &key.PublicKey, key)
	if err != nil {
		t.Fatal(err)
	}
	kder, err := x509.MarshalECPrivateKey(key)
	if err != nil {
		t.Fatal(err)
	}
	return string(pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: der})),
		string(pem.EncodeToMemory(&pem.Block{Type: "EC PRIVATE KEY", Bytes: kder}))
}

// rsaCertPair makes a self-signed RSA certificate and its key in PEM.
func rsaCertPair(t *testing.T, cn string) (string, string) {
	t.Helper()
	key, err := rsa.GenerateKey(rand.Reader, 2048)
	if err != nil {
		t.Fatal(err)
	}
	tmpl := &x509.Certificate{
		SerialNumber: big.NewInt(1),
		Subject:      pkix.Name{CommonName: cn},
		DNSNames:     []string{cn},
		NotBefore:    time.Now().Add(-time.Hour),
		NotAfter:     time.Now().Add(time.Hour),
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, tmpl, &key.PublicKey, key)
	if err != nil {
		t.Fatal(err)
	}
	return string(pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: der})),
		string(pem.EncodeToMemory(&pem.Block{Type: "RSA PRIVATE KEY", Bytes: x509.MarshalPKCS1PrivateKey(key)}))
}

// config wraps entity collections into a 3.0 declarative config.
func config(collections M) M {
	c := M{"_format_version": "3.0"}
	for k, v := range collections {
		c[k] = v
	}
	return c
}

// svc is a service with nested routes.
func svc(name, host string, routes ...any) M {
	s := M{"name": name, "host": host, "port": 80}
	if len(routes) > 0 {
		s["routes"] = L(routes)
	}
	return s
}

// Kong derives missing ids with UUIDv5 (declarative_config.lua); these
// recompute them with an independent implementation.
var nsEntities = uuid.MustParse("fd02801f-0957-4a15-a55a-c8d9606f30b5")

func kongID(entity, key string) string {
	return uuid.NewSHA1(uuid.NewSHA1(nsEntities, []byte(entity)), []byte(key)).String()
}

func routeID(name string) string   { return kongID("routes", name) }
func serviceID(name string) string { return kongID("services", name) }

func targetID(upstream, target string) string {
	return kongID("targets", "targets:*:"+kongID("upstreams", upstream)+":"+target)
}

func pluginID(name, routeID string) string {
	return kongID("plugins", "plugins:*:"+name+":"+routeID+"::")
}
