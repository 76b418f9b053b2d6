// Package fakecri is a mock container runtime that speaks CRI v1
// (k8s.io/cri-api v0.36.3, runtime.v1.RuntimeService and ImageService)
// correctly enough for crictl and the real kubelet, but runs no processes.
//
// It keeps pod sandboxes, containers and images in memory and walks them
// through the same state machine a real runtime does (containerd's CRI
// plugin is the reference): sandboxes are READY or NOTREADY; containers go
// CREATED → RUNNING → EXITED with created/started/finished timestamps, an
// exit code and a reason. Stop honours the grace period, Remove and Stop
// are idempotent, logs are written in the CRI log format at the path the
// kubelet asks for, Exec/Attach/PortForward hand out URLs of a real CRI
// streaming server (k8s.io/cri-streaming v0.36.3, the package the kubelet
// itself uses), and GetContainerEvents streams events for the evented PLEG.
//
// # Processes without processes
//
// Each running container whose command the mock knows has one goroutine
// that interprets it with a tiny shell (package mocksh lists the exact
// command set): `echo`, `cat`, `env`, `sleep`, `exit N`, `trap`,
// `while ...; do ...; done`, `>&2`, `2>&1`, `>/dev/null`, `sh -c '...'`.
// Anything else (/pause, nginx) is a daemon that runs until it is
// signalled — kept as state, with no goroutine (idle.go). That is enough
// for the classic teaching containers:
//
//	sh -c 'echo hello; sleep 3; exit 3'             # exits 3 after 3 s
//	sh -c "trap '' TERM; while true; do sleep 1; done"  # ignores SIGTERM
//
// # Ignoring SIGTERM
//
// StopContainer sends the container's stop signal (SIGTERM unless the
// config says otherwise). A container ignores it, runs until the timeout
// and is then killed with exit code 137 when either
//
//   - its shell command sets an ignoring trap for TERM, as in the
//     example above (the same command ignores SIGTERM on containerd, so
//     pod manifests stay portable), or
//   - its container config carries the annotation
//     fakecri.kubelet-labs/ignore-sigterm: "true", or its pod sandbox
//     carries that annotation with value "true"/"*" (all containers) or a
//     comma-separated list of container names. The kubelet copies pod
//     annotations onto the sandbox, so this works for pods too.
//
// Every other container exits at once with 143 (128+SIGTERM).
//
// # Security context
//
// The sandbox's and the container's Linux security context are accepted
// whatever they say, and only runAsUser and runAsGroup are used: `id` in a
// container or an exec reports them. Capabilities, privileged, the
// read-only root filesystem, no_new_privs, seccomp, masked and read-only
// paths and supplemental groups are ignored — there is no process for them
// to restrict. Tests of what they enforce run on containerd.
//
// # Lists share what never changes
//
// A sandbox's or container's labels and annotations are fixed when it is
// created (no CRI call changes them), so ListPodSandbox and ListContainers
// hand out the runtime's own maps instead of a copy per item and call.
// Over gRPC that is invisible (each response is serialized); an in-process
// caller (lab 18's fleet: a thousand PLEGs listing every second) must
// treat a list's maps as read-only, as the kubelet does. Copying them was
// 16 % of a 1,000-node fleet's CPU, and much of its garbage (issue 23).
// Statuses and stats, asked for one object at a time, are still copies.
//
// # Entry points
//
// New returns an in-process Runtime (it implements
// runtimeapi.RuntimeServiceServer and runtimeapi.ImageServiceServer).
// Start serves a new Runtime over gRPC on a unix socket, plus the
// streaming server on 127.0.0.1 and the control API on a second unix
// socket next to it (see control.go). Both sockets are 0600 from their
// first moment, one starter holds a path at a time, and only a socket
// nobody listens on is ever replaced (see socket.go).
package fakecri
