# prefixroute's container image: prefixrouted (the sidecar), prefixctl
# (the operator CLI) and prefixagent (next to each vLLM/SGLang instance), static Go binaries on a distroless non-root base.
# Build with 'make image' (docker or podman); deploy/kubernetes/ runs it.
#
#   docker run -p 50051:50051 -p 9090:9090 -v prefixroute-data:/var/lib/prefixroute \
#     prefixroute:dev --insecure          # or --tokens-file/--tls-cert (SECURITY.md)
#   docker run --entrypoint prefixctl prefixroute:dev --addr HOST:50051 pools
#   docker run --entrypoint prefixagent prefixroute:dev --engine vllm ...

FROM golang:1.26 AS build
WORKDIR /src
COPY go.mod go.sum ./
RUN go mod download
COPY . .
ARG VERSION=unknown
ARG REVISION=
RUN CGO_ENABLED=0 go build -trimpath -buildvcs=false \
      -ldflags "-s -w -X github.com/prefixroute/prefixroute/internal/buildinfo.version=${VERSION} -X github.com/prefixroute/prefixroute/internal/buildinfo.revision=${REVISION}" \
      -o /out/ ./cmd/prefixrouted ./cmd/prefixctl ./cmd/prefixagent

# static-debian12:nonroot: CA certificates, tzdata, /etc/passwd with
# nonroot (65532); no shell, no package manager.
FROM gcr.io/distroless/static-debian12:nonroot
COPY --from=build /out/prefixrouted /usr/local/bin/prefixrouted
COPY --from=build /out/prefixctl /usr/local/bin/prefixctl
COPY --from=build /out/prefixagent /usr/local/bin/prefixagent
USER 65532:65532
# Weights, policies, ramps and audit.log (--data-dir): keep it across
# restarts, or use --nats with an emptyDir (deploy/kubernetes/).
VOLUME ["/var/lib/prefixroute"]
# 50051 gRPC (Pick, ReportLoad, Admin); 9090 HTTP (/healthz, /readyz,
# /metrics, the HTTP front ends); 9092 read-only /healthz, /readyz and
# /metrics (--metrics-listen, no token needed); 9002 Envoy ext_proc.
EXPOSE 50051 9090 9092 9002
# Non-loopback gRPC and HTTP listeners need --tokens-file (and --tls-cert
# for gRPC) or --insecure (the metrics listener does not): the arguments of 'docker run IMAGE ...' (or a pod's args)
# follow these, e.g. --config /etc/prefixroute/prefixrouted.yaml.
ENTRYPOINT ["/usr/local/bin/prefixrouted", "--listen", "0.0.0.0:50051", "--http-listen", "0.0.0.0:9090", "--metrics-listen", "0.0.0.0:9092", "--data-dir", "/var/lib/prefixroute"]
