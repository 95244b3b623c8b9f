package daemon

import (
	"crypto/tls"
	"fmt"
	"net"
	"time"

	"golang.org/x/net/netutil"
	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials"
	"google.golang.org/grpc/health"
	healthpb "google.golang.org/grpc/health/grpc_health_v1"

	"github.com/prefixroute/prefixroute/frontend"
	"github.com/prefixroute/prefixroute/internal/auth"
)

// frontEnd is one running FrontEnd: its listener, gRPC server and health.
type frontEnd struct {
	cfg    frontend.GRPC
	lis    net.Listener
	grpc   *grpc.Server
	health *health.Server
	tls    string // "daemon", "self-signed" or "plaintext", for the log
}

// listenFrontEnds checks the front ends and binds their listeners, for
// start; the caller releases them on error.
func (d *Daemon) listenFrontEnds(cfg *Config) error {
	for _, f := range cfg.FrontEnds {
		if f.Listen == "" {
			continue
		}
		if err := f.Check(); err != nil {
			return err
		}
		fe := &frontEnd{cfg: f}
		d.fronts = append(d.fronts, fe)
		lis, err := net.Listen("tcp", f.Listen)
		if err != nil {
			return fmt.Errorf("listen %s (--%s-listen): %w", f.Listen, f.Name, err)
		}
		fe.lis = netutil.LimitListener(lis, cfg.Transport.MaxConnections)
	}
	return nil
}

// serveFrontEnds builds each front end's gRPC server, with the main
// server's middleware, its own credentials and a health service, registers
// its services and serves it.
func (d *Daemon) serveFrontEnds(cfg *Config) error {
	for _, fe := range d.fronts {
		opts := transportOptions(cfg)
		if fe.cfg.MaxRecvMsgBytes > 0 {
			opts = append(opts, grpc.MaxRecvMsgSize(fe.cfg.MaxRecvMsgBytes))
		}
		creds, mode, err := d.frontEndCredentials(fe.cfg.TLS)
		if err != nil {
			return fmt.Errorf("--%s-tls: %w", fe.cfg.Name, err)
		}
		fe.tls = mode
		if creds != nil {
			opts = append(opts, grpc.Creds(creds))
		}
		fe.grpc = grpc.NewServer(append(middleware(d.log, d.tel, d.srv, &d.calls, d.authFunc(), cfg.testUnary), opts...)...)
		names, err := fe.cfg.Register(fe.grpc, frontend.Deps{Picker: d.srv, Logger: d.log, Tracer: d.tel.tracer, MaxPrefixBlocks: d.srv.Limits().MaxPrefixBlocks,
			Meter: d.tel.meter.Meter("github.com/prefixroute/prefixroute/server/" + fe.cfg.Name)})
		if err != nil {
			return fmt.Errorf("%s: %w", fe.cfg.Name, err)
		}
		fe.health = health.NewServer()
		healthpb.RegisterHealthServer(fe.grpc, fe.health)
		for _, name := range append([]string{""}, names...) {
			fe.health.SetServingStatus(name, healthpb.HealthCheckResponse_SERVING)
		}
		go func(fe *frontEnd) { d.done <- fe.grpc.Serve(fe.lis) }(fe)
		d.log.Info("front end serving", "front_end", fe.cfg.Name, "grpc", fe.lis.Addr().String(), "tls", fe.tls)
	}
	return nil
}

// frontEndCredentials are a front end's transport credentials (nil:
// plaintext) and the mode's name.
func (d *Daemon) frontEndCredentials(mode frontend.TLSMode) (credentials.TransportCredentials, string, error) {
	switch mode {
	case frontend.TLSPlaintext:
		return nil, "plaintext", nil
	case frontend.TLSSelfSigned:
		cert, err := auth.SelfSigned(time.Now())
		if err != nil {
			return nil, "", err
		}
		return credentials.NewTLS(&tls.Config{Certificates: []tls.Certificate{cert}, MinVersion: tls.VersionTLS12}), "self-signed", nil
	}
	if d.tls == nil {
		return nil, "plaintext", nil
	}
	return d.tls.GRPCCredentials(), "daemon", nil
}

// FrontEndAddr is the listener address of the named front end, "" when it
// is not serving.
func (d *Daemon) FrontEndAddr(name string) string {
	for _, fe := range d.fronts {
		if fe.cfg.Name == name && fe.lis != nil {
			return fe.lis.Addr().String()
		}
	}
	return ""
}

// gracefulStopFrontEnds turns the front ends' health NOT_SERVING and stops
// them gracefully: in-flight streams (an HTTP request with its response)
// finish.
func (d *Daemon) gracefulStopFrontEnds() {
	for _, fe := range d.fronts {
		if fe.grpc != nil {
			fe.health.Shutdown()
			fe.grpc.GracefulStop()
		}
	}
}

// stopFrontEnds cuts the front ends' streams.
func (d *Daemon) stopFrontEnds() {
	for _, fe := range d.fronts {
		if fe.grpc != nil {
			fe.grpc.Stop()
		}
	}
}
