// Package httproute is the router's Pick front ends on the daemon's HTTP
// listener (--http-listen), for gateways that can make an HTTP subrequest
// but not a gRPC call:
//
//	POST /v1/pick   a PickRequest in the canonical protobuf JSON mapping
//	                (64-bit integers as strings) -> the PickResponse in it;
//	                an error is the gRPC status's HTTP status with the
//	                google.rpc.Status as JSON: {"code": 5, "message": "..."}
//	POST /v1/route  an OpenAI request body, unchanged -> 204 with the
//	                chosen address in x-gateway-destination-endpoint
//	                (route.go)
//
// Both are a Pick as the gRPC one is: authorized as PickService.Pick
// (role gateway, by bearer token or verified client certificate), decided
// and recorded by frontend.Picker.PickFor (metrics, span, decision log,
// failed-pick log line), under frontend.Wrap (authentication, panic
// recovery, the server span). With authentication on and TLS off the
// daemon serves them only on a loopback --http-listen (else 403, through
// frontend.HTTP.Refused): bearer tokens must not cross a network in
// cleartext (--insecure allows it, when a mesh encrypts the traffic).
// Neither keeps any part of a body after its request.
//
// The package imports frontend, never server or daemon; the daemon builds
// a Handler and registers it on its HTTP listener's mux.
package httproute
