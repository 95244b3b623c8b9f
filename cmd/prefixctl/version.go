package main

import (
	"encoding/json"
	"fmt"
	"time"

	"github.com/spf13/pflag"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	pb "github.com/prefixroute/prefixroute/api/prefixroute/v1"
	"github.com/prefixroute/prefixroute/internal/buildinfo"
	"github.com/prefixroute/prefixroute/pkg/client"
)

// version is 'prefixctl version': the client's build, then the sidecar's
// when it answers GetServerInfo within --timeout. An unreachable sidecar
// is not an error here: the client's version is still the answer.
func (c *cli) version(*pflag.FlagSet) runner {
	return func([]string) error {
		local := buildinfo.Read()
		info, why := c.serverInfo()
		if c.output == "json" {
			return c.writeVersionJSON(local, info, why)
		}
		fmt.Fprintf(c.stdout, "prefixctl %s\n", local)
		if info == nil {
			fmt.Fprintf(c.stdout, "sidecar at %s: %s\n", c.addr, why)
			return nil
		}
		server := buildinfo.Info{Version: info.GetVersion(), Revision: info.GetRevision(), Dirty: info.GetDirty(),
			GoVersion: info.GetGoVersion()}
		fmt.Fprintf(c.stdout, "sidecar at %s: prefixrouted %s, started %s\n", c.addr, server,
			info.GetStartTime().AsTime().UTC().Format(time.RFC3339))
		return nil
	}
}

// serverInfo asks the sidecar for its build; on failure it says why in
// words, for the second line of 'prefixctl version'.
func (c *cli) serverInfo() (*pb.GetServerInfoResponse, string) {
	admin, err := c.admin()
	if err != nil {
		return nil, "not asked: " + err.Error()
	}
	ctx, cancel := c.call()
	defer cancel()
	info, err := admin.GetServerInfo(ctx, &pb.GetServerInfoRequest{})
	switch {
	case err == nil:
		return info, ""
	case client.Unreachable(err):
		return nil, fmt.Sprintf("unreachable within %v (%s)", c.timeout, status.Code(err))
	case status.Code(err) == codes.Unimplemented:
		return nil, "version unknown: the sidecar predates GetServerInfo"
	}
	st, _ := status.FromError(err)
	return nil, fmt.Sprintf("version unknown: %s: %s", st.Code(), st.Message())
}

// writeVersionJSON prints {"client": {...}, "server": {...}} with the
// server's GetServerInfo in protojson, or "server_error" when it did not
// answer.
func (c *cli) writeVersionJSON(local buildinfo.Info, info *pb.GetServerInfoResponse, why string) error {
	out := struct {
		Client struct {
			Version   string `json:"version"`
			Revision  string `json:"revision"`
			Dirty     bool   `json:"dirty"`
			GoVersion string `json:"go_version"`
		} `json:"client"`
		Server      json.RawMessage `json:"server,omitempty"`
		ServerError string          `json:"server_error,omitempty"`
	}{ServerError: why}
	out.Client.Version, out.Client.Revision, out.Client.Dirty, out.Client.GoVersion =
		local.Version, local.Revision, local.Dirty, local.GoVersion
	if info != nil {
		b, err := protojsonOptions.Marshal(info)
		if err != nil {
			return err
		}
		out.Server = b
	}
	b, err := json.MarshalIndent(out, "", "  ")
	if err != nil {
		return err
	}
	_, err = fmt.Fprintf(c.stdout, "%s\n", b)
	return err
}
