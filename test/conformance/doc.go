// Package conformance runs the upstream Gateway API conformance suite against konglet.
package conformance
