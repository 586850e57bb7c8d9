package deploy

import (
	"crypto/tls"
	"crypto/x509"
	"encoding/pem"
	"fmt"
	"io"
	"log"
	"net/http"
	"net/http/httptest"
	"net/http/httputil"
	"net/url"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"

	"k8s.io/client-go/tools/clientcmd"
	clientcmdapi "k8s.io/client-go/tools/clientcmd/api"
)

// apiProxy is a TLS reverse proxy in front of the API server that records
// every request konglet makes and the answer's status code. It passes the
// client's bearer token through and adds no credentials of its own, so the
// API server authenticates and authorizes konglet exactly as without it.
type apiProxy struct {
	srv  *httptest.Server
	mu   sync.Mutex
	reqs []apiRequest
}

// apiRequest is one request konglet sent, with what the API server said.
type apiRequest struct {
	Method, Path string
	Query        url.Values
	Status       int
}

func newAPIProxy() (*apiProxy, error) {
	target, err := url.Parse(env.Config.Host)
	if err != nil {
		return nil, err
	}
	roots := x509.NewCertPool()
	if !roots.AppendCertsFromPEM(env.Config.CAData) {
		return nil, fmt.Errorf("no CA data in the test cluster's config")
	}
	p := &apiProxy{}
	rp := &httputil.ReverseProxy{
		Rewrite: func(r *httputil.ProxyRequest) {
			r.SetURL(target)
			r.Out.Host = target.Host
		},
		Transport: &http.Transport{
			TLSClientConfig:   &tls.Config{RootCAs: roots, MinVersion: tls.VersionTLS12},
			ForceAttemptHTTP2: true,
		},
		FlushInterval: -1, // watches stream
		ModifyResponse: func(resp *http.Response) error {
			p.record(resp.Request, resp.StatusCode)
			return nil
		},
		ErrorHandler: func(w http.ResponseWriter, r *http.Request, err error) {
			p.record(r, http.StatusBadGateway)
			w.WriteHeader(http.StatusBadGateway)
		},
	}
	p.srv = httptest.NewUnstartedServer(rp)
	// A konglet stopped mid-handshake is no news.
	p.srv.Config.ErrorLog = log.New(io.Discard, "", 0)
	p.srv.EnableHTTP2 = true
	p.srv.StartTLS()
	return p, nil
}

func (p *apiProxy) record(r *http.Request, status int) {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.reqs = append(p.reqs, apiRequest{Method: r.Method, Path: r.URL.Path, Query: r.URL.Query(), Status: status})
}

func (p *apiProxy) requests() []apiRequest {
	p.mu.Lock()
	defer p.mu.Unlock()
	return slices.Clone(p.reqs)
}

func (p *apiProxy) Close() {
	p.srv.CloseClientConnections()
	p.srv.Close()
}

// kubeconfig writes a kubeconfig for the proxy with a bearer token, the way
// a Pod's konglet authenticates with its projected token.
func (p *apiProxy) kubeconfig(dir, token string) (string, error) {
	cfg := clientcmdapi.NewConfig()
	cfg.Clusters["test"] = &clientcmdapi.Cluster{
		Server:                   p.srv.URL,
		CertificateAuthorityData: pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: p.srv.Certificate().Raw}),
	}
	cfg.AuthInfos["konglet"] = &clientcmdapi.AuthInfo{Token: token}
	cfg.Contexts["test"] = &clientcmdapi.Context{Cluster: "test", AuthInfo: "konglet"}
	cfg.CurrentContext = "test"
	path := filepath.Join(dir, "kubeconfig")
	if err := clientcmd.WriteToFile(*cfg, path); err != nil {
		return "", err
	}
	return path, os.Chmod(path, 0o600)
}

// attributes are the RBAC attributes of a resource request.
type attributes struct {
	Verb, Group, Resource, Subresource, Namespace, Name string
}

func (a attributes) String() string {
	r := a.Resource
	if a.Subresource != "" {
		r += "/" + a.Subresource
	}
	if a.Group != "" {
		r = a.Group + " " + r
	}
	s := a.Verb + " " + r
	if a.Namespace != "" {
		s += " in " + a.Namespace
	}
	if a.Name != "" {
		s += " named " + a.Name
	}
	return s
}

// attributes decodes a request the way the API server's request-info
// resolver does; ok is false for non-resource requests (discovery, /version).
func (r apiRequest) attributes() (a attributes, ok bool) {
	parts := strings.Split(strings.Trim(r.Path, "/"), "/")
	var rest []string
	switch {
	case len(parts) >= 3 && parts[0] == "api":
		rest = parts[2:]
	case len(parts) >= 4 && parts[0] == "apis":
		a.Group, rest = parts[1], parts[3:]
	default:
		return a, false
	}
	if len(rest) >= 3 && rest[0] == "namespaces" {
		a.Namespace, rest = rest[1], rest[2:]
	}
	a.Resource = rest[0]
	if len(rest) > 1 {
		a.Name = rest[1]
	}
	if len(rest) > 2 {
		a.Subresource = rest[2]
	}
	if a.Resource == "namespaces" && a.Name != "" {
		a.Namespace = a.Name
	}
	switch r.Method {
	case http.MethodGet:
		switch {
		case a.Name != "":
			a.Verb = "get"
		case r.Query.Get("watch") == "true" || r.Query.Get("watch") == "1":
			a.Verb = "watch"
		default:
			a.Verb = "list"
		}
	case http.MethodPost:
		a.Verb = "create"
	case http.MethodPut:
		a.Verb = "update"
	case http.MethodPatch:
		a.Verb = "patch"
	case http.MethodDelete:
		a.Verb = "delete"
	default:
		a.Verb = strings.ToLower(r.Method)
	}
	return a, true
}

// forbidden lists the requests the API server answered 403, deduplicated.
func forbidden(reqs []apiRequest) []string {
	var out []string
	for _, r := range reqs {
		if r.Status != http.StatusForbidden {
			continue
		}
		a, ok := r.attributes()
		s := r.Method + " " + r.Path
		if ok {
			s = a.String()
		}
		if !slices.Contains(out, s) {
			out = append(out, s)
		}
	}
	slices.Sort(out)
	return out
}
