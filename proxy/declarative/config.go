// Package declarative is the Kong DB-less configuration that konglet emits:
// a small typed model, deterministic ids and a hash that Kong reports back.
package declarative

import (
	"crypto/md5"
	"crypto/sha256"
	"encoding/hex"
)

// FormatVersion is the declarative format konglet writes (Kong 3.x).
const FormatVersion = "3.0"

// Config is one whole Kong declarative configuration. Children are nested
// (routes in services, targets in upstreams) so that no entity refers to
// another by a foreign key that Kong could fail to resolve.
type Config struct {
	FormatVersion string         `json:"_format_version"`
	Services      []*Service     `json:"services,omitempty"`
	Upstreams     []*Upstream    `json:"upstreams,omitempty"`
	Certificates  []*Certificate `json:"certificates,omitempty"`
	// CACertificates are what services verify their upstreams against.
	CACertificates []*CACertificate `json:"ca_certificates,omitempty"`
	// Plugins are global: they run for every request.
	Plugins []*Plugin `json:"plugins,omitempty"`
}

// Service is a Kong service: where matched requests go. Services, routes
// and upstreams carry no id: they have unique names, from which Kong derives
// the same id on every push and replica, and ids would add about a fifth to
// the document (Kong's admin API refuses bodies above 10 MiB by default).
type Service struct {
	Name           string `json:"name"`
	Protocol       string `json:"protocol,omitempty"` // Kong default: http
	Host           string `json:"host"`
	Port           int    `json:"port,omitempty"` // Kong default: 80
	Path           string `json:"path,omitempty"`
	ConnectTimeout int    `json:"connect_timeout,omitempty"`
	ReadTimeout    int    `json:"read_timeout,omitempty"`
	WriteTimeout   int    `json:"write_timeout,omitempty"`
	Retries        *int   `json:"retries,omitempty"`
	// TLS to the upstream (protocol https only): verify its certificate
	// against CACertificates, present ClientCertificate.
	TLSVerify         *bool     `json:"tls_verify,omitempty"`
	TLSVerifyDepth    int       `json:"tls_verify_depth,omitempty"` // 0: nginx's default, 1
	CACertificates    []string  `json:"ca_certificates,omitempty"`
	ClientCertificate *EntityID `json:"client_certificate,omitempty"`
	Tags              []string  `json:"tags,omitempty"`
	Routes            []*Route  `json:"routes,omitempty"`
}

// Route is a Kong route. Either Expression (expressions router) or the
// traditional match fields are set, never both. Routes carry no tags: their
// service names the same object, and they are the most numerous entity.
type Route struct {
	Name         string              `json:"name"`
	Protocols    []string            `json:"protocols"`
	Expression   string              `json:"expression,omitempty"`
	Priority     uint64              `json:"priority,omitempty"` // 0 is Kong's default
	Methods      []string            `json:"methods,omitempty"`
	Hosts        []string            `json:"hosts,omitempty"`
	Paths        []string            `json:"paths,omitempty"`
	Headers      map[string][]string `json:"headers,omitempty"`
	SNIs         []string            `json:"snis,omitempty"`
	Destinations []Endpoint          `json:"destinations,omitempty"`
	RegexPrio    int64               `json:"regex_priority,omitempty"` // 0 is Kong's default
	StripPath    *bool               `json:"strip_path,omitempty"`
	PreserveHost *bool               `json:"preserve_host,omitempty"`
	Plugins      []*Plugin           `json:"plugins,omitempty"`
}

// Endpoint is a stream route's destination (konglet matches on the port).
type Endpoint struct {
	Port int `json:"port"`
}

// Plugin is a Kong plugin instance attached to the entity it is nested in.
type Plugin struct {
	ID     string         `json:"id"`
	Name   string         `json:"name"`
	Config map[string]any `json:"config,omitempty"`
	Tags   []string       `json:"tags,omitempty"`
}

// Upstream is a Kong load-balancing pool.
type Upstream struct {
	Name    string    `json:"name"`
	Tags    []string  `json:"tags,omitempty"`
	Targets []*Target `json:"targets,omitempty"`
}

// Target is one backend address of an upstream.
type Target struct {
	ID     string `json:"id"`
	Target string `json:"target"`
	Weight int    `json:"weight"`
}

// EntityID refers to another entity by id.
type EntityID struct {
	ID string `json:"id"`
}

// CACertificate is one CA certificate (Kong takes one per entity).
type CACertificate struct {
	ID   string   `json:"id"`
	Cert string   `json:"cert"`
	Tags []string `json:"tags,omitempty"`
}

// Certificate is a TLS certificate with the server names it serves.
type Certificate struct {
	ID   string `json:"id"`
	Cert string `json:"cert"`
	Key  string `json:"key"`
	// CertAlt and KeyAlt are a second certificate of another key type
	// (RSA and ECDSA): Kong serves the one the client supports.
	CertAlt string   `json:"cert_alt,omitempty"`
	KeyAlt  string   `json:"key_alt,omitempty"`
	Tags    []string `json:"tags,omitempty"`
	SNIs    []*SNI   `json:"snis,omitempty"`
}

// SNI binds a server name to the certificate it is nested in.
type SNI struct {
	ID   string   `json:"id"`
	Name string   `json:"name"`
	Tags []string `json:"tags,omitempty"`
}

// ID returns the deterministic id of an entity of kind without a unique
// name (targets, plugins, certificates), named within its parent: the same
// across pushes and replicas, as Kong keys its caches and errors by ids. It
// is a UUIDv8 from the first 16 bytes of a SHA-256; a sync computes tens of
// thousands of them, so the input is assembled on the stack.
func ID(kind, parent, name string) string {
	var id [IDLen]byte
	return string(AppendID(id[:0], kind, parent, name))
}

// IDLen is the length of an ID: a UUID's text.
const IDLen = 36

// AppendID appends ID(kind, parent, name) to dst, so that ids made
// together can share one allocation.
func AppendID(dst []byte, kind, parent, name string) []byte {
	var buf [256]byte
	in := append(buf[:0], kind...)
	in = append(in, 0)
	in = append(in, parent...)
	in = append(in, 0)
	in = append(in, name...)
	sum := sha256.Sum256(in)
	u := sum[:16]
	u[6] = u[6]&0x0f | 0x80 // version 8
	u[8] = u[8]&0x3f | 0x80 // RFC 9562 variant
	for i, b := range u {
		if i == 4 || i == 6 || i == 8 || i == 10 {
			dst = append(dst, '-') // 8-4-4-4-12 hex digits
		}
		dst = append(dst, hexDigits[b>>4], hexDigits[b&0xf])
	}
	return dst
}

// Hash is what Kong reports as configuration_hash once it has loaded
// document as a raw POST /config body: md5 of the exact bytes.
func Hash(document []byte) string {
	sum := md5.Sum(document)
	return hex.EncodeToString(sum[:])
}
