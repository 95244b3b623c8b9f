// Package deploy holds no code: it is the home of the deployment files
// (../Dockerfile, kubernetes/, grafana/, envoy/) and of the tests that keep
// them true to the code: the binaries the Dockerfile copies are those 'make
// build' produces, the Kubernetes manifests parse and agree with each other
// and with prefixrouted's flags (the endpoint-picker ones, epp-*.yaml,
// with the InferencePool and HTTPRoute), envoy/envoy.yaml is a valid Envoy
// bootstrap by go-control-plane's schema, and every metric the Grafana
// dashboard queries is one a running daemon exports. nginx/ is a package
// of its own: its configuration and the end-to-end test that runs it.
package deploy
