// Package chart renders the real Kong Helm chart with deploy/helm/values.yaml
// (and its variants) through the Helm Go SDK and checks what users install:
// every object against a real kube-apiserver (server-side dry run), and the
// properties konglet relies on. It is a module of its own so that the Helm
// SDK stays out of konglet's go.mod.
package chart
