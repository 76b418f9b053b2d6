package server

import (
	"net/http"

	"k8s.io/apiserver/pkg/authentication/user"
	"k8s.io/apiserver/pkg/authorization/authorizer"
)

// nodeRequestAttributes says what a request to the node server needs the
// apiserver to allow: one authorization question per subresource that
// would do, in order (the filter sends them as SubjectAccessReviews and
// lets the request through at the first one allowed). It is the kubelet's
// GetRequestAttributes (pkg/kubelet/server/auth.go:83-155, v1.36.3), with
// KubeletFineGrainedAuthz on (GA and locked on in 1.36,
// pkg/features/kube_features.go:1592-1596), and with one change of ours for
// the stream paths.
//
// Each question is an authorizer.AttributesRecord about the node object:
// user u, resource "nodes", name nodeName, API version "v1", no API group,
// no namespace, ResourceRequest true (so the SubjectAccessReview carries
// resourceAttributes, not nonResourceAttributes), Path the request's path
// (auth.go:137-148). Only the verb and the subresource depend on the
// request:
//
//   - the verb comes from the HTTP method (auth.go:86-97): POST create, GET
//     get, PUT update, PATCH patch, DELETE delete, any other method "" —
//     except on a stream path (isStreamPath: /exec, /attach, /portForward,
//     /run and what is under them), which needs create whatever the method
//     (why: streamPaths, auth.go);
//   - the subresources come from the path, matched with isSubpath
//     (auth.go:102-133). First, at most one of: /pods → pods,
//     /healthz → healthz, /configz → configz, /runningpods/ → pods. Then
//     always exactly one of: /stats/ → stats, /metrics → metrics,
//     /logs/ → log, /checkpoint/ → checkpoint, /statusz → statusz,
//     /flagz → configz, and any other path (exec, attach, portForward,
//     containerLogs, /pods, /healthz…) → proxy. So GET /pods asks
//     get nodes/pods, then get nodes/proxy; GET /stats/summary asks only
//     get nodes/stats.
//
//stage:node-server-authz
func nodeRequestAttributes(nodeName string, u user.Info, r *http.Request) []authorizer.Attributes {
	verb := ""
	switch r.Method {
	case http.MethodPost:
		verb = "create"
	case http.MethodGet:
		verb = "get"
	case http.MethodPut:
		verb = "update"
	case http.MethodPatch:
		verb = "patch"
	case http.MethodDelete:
		verb = "delete"
	}
	path := r.URL.Path
	if isStreamPath(path) {
		verb = "create"
	}

	var subresources []string
	switch {
	case isSubpath(path, "/pods"):
		subresources = append(subresources, "pods")
	case isSubpath(path, "/healthz"):
		subresources = append(subresources, "healthz")
	case isSubpath(path, "/configz"):
		subresources = append(subresources, "configz")
	case isSubpath(path, "/runningpods/"):
		subresources = append(subresources, "pods")
	}
	switch {
	case isSubpath(path, "/stats/"):
		subresources = append(subresources, "stats")
	case isSubpath(path, "/metrics"):
		subresources = append(subresources, "metrics")
	case isSubpath(path, "/logs/"):
		subresources = append(subresources, "log")
	case isSubpath(path, "/checkpoint/"):
		subresources = append(subresources, "checkpoint")
	case isSubpath(path, "/statusz"):
		subresources = append(subresources, "statusz")
	case isSubpath(path, "/flagz"):
		subresources = append(subresources, "configz")
	default:
		subresources = append(subresources, "proxy")
	}

	attrs := make([]authorizer.Attributes, 0, len(subresources))
	for _, sub := range subresources {
		attrs = append(attrs, authorizer.AttributesRecord{
			User:            u,
			Verb:            verb,
			APIVersion:      "v1",
			Resource:        "nodes",
			Subresource:     sub,
			Name:            nodeName,
			ResourceRequest: true,
			Path:            path,
		})
	}
	return attrs
}
