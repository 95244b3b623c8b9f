package auth

import (
	extprocv3 "github.com/envoyproxy/go-control-plane/envoy/service/ext_proc/v3"
	healthpb "google.golang.org/grpc/health/grpc_health_v1"
	rpb "google.golang.org/grpc/reflection/grpc_reflection_v1"

	pb "github.com/prefixroute/prefixroute/api/prefixroute/v1"
)

// Rule is who may call one method.
type Rule struct {
	// Open methods are served to every caller, with or without
	// credentials.
	Open bool
	// Role is, for a method that is not open, what the caller's principal
	// must hold; AnyRole lets every authenticated principal call it.
	Role Role
}

// String is the rule as an operator reads it.
func (r Rule) String() string {
	switch {
	case r.Open:
		return "open"
	case r.Role == AnyRole:
		return "any identity"
	}
	return "role " + r.Role.String()
}

// reflectionV1Alpha is the older name of server reflection, which
// reflection.Register serves too (its generated package is deprecated, so
// the name is spelled out).
const reflectionV1Alpha = "/grpc.reflection.v1alpha.ServerReflection/ServerReflectionInfo"

// methodRules is the authorization table: every method the daemon serves,
// by full name, and who may call it. A method missing from it is refused
// to everybody (PermissionDenied), so a new RPC needs its line here; the
// tests walk the daemon's registered services to make sure it has one.
var methodRules = map[string]Rule{
	pb.PickService_Pick_FullMethodName: {Role: RoleGateway},
	// A gateway's outcomes of the tries of its picks.
	pb.PickService_ReportOutcome_FullMethodName: {Role: RoleGateway},
	// The Envoy ext_proc endpoint picker (--extproc-listen) picks as Pick does.
	extprocv3.ExternalProcessor_Process_FullMethodName: {Role: RoleGateway},
	pb.LoadService_ReportLoad_FullMethodName:           {Role: RoleInstance},
	// A node agent's batch: each report inside the binding (server checks).
	pb.LoadService_ReportLoadBatch_FullMethodName: {Role: RoleInstance},

	pb.AdminService_GetWeights_FullMethodName:         {Role: RoleOperatorRead},
	pb.AdminService_GetPolicy_FullMethodName:          {Role: RoleOperatorRead},
	pb.AdminService_ListInstances_FullMethodName:      {Role: RoleOperatorRead},
	pb.AdminService_ListPools_FullMethodName:          {Role: RoleOperatorRead},
	pb.AdminService_GetRamp_FullMethodName:            {Role: RoleOperatorRead},
	pb.AdminService_GetMigrationStatus_FullMethodName: {Role: RoleOperatorRead},
	pb.AdminService_GetServerInfo_FullMethodName:      {Role: RoleOperatorRead},
	pb.AdminService_GetSloCalibration_FullMethodName:  {Role: RoleOperatorRead},
	pb.AdminService_SetWeights_FullMethodName:         {Role: RoleOperator},
	pb.AdminService_SetPolicy_FullMethodName:          {Role: RoleOperator},
	pb.AdminService_StartRamp_FullMethodName:          {Role: RoleOperator},
	pb.AdminService_PauseRamp_FullMethodName:          {Role: RoleOperator},
	pb.AdminService_ResumeRamp_FullMethodName:         {Role: RoleOperator},
	pb.AdminService_AbortRamp_FullMethodName:          {Role: RoleOperator},

	// Health stays open for load balancers and probes.
	healthpb.Health_Check_FullMethodName: {Open: true},
	healthpb.Health_List_FullMethodName:  {Open: true},
	healthpb.Health_Watch_FullMethodName: {Open: true},

	// The schema is public in the repository; any identity may list it.
	rpb.ServerReflection_ServerReflectionInfo_FullMethodName: {Role: AnyRole},
	reflectionV1Alpha: {Role: AnyRole},
}

// RuleFor returns who may call method (a full name,
// "/package.Service/Method") and whether the table has it; a method not in
// the table is refused to everybody.
func RuleFor(method string) (Rule, bool) {
	r, ok := methodRules[method]
	return r, ok
}
