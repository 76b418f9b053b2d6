package fakecri

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"fmt"
	"net/netip"
	"strings"
	"sync"
	"sync/atomic"

	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
	runtimeapi "k8s.io/cri-api/pkg/apis/runtime/v1"
)

// Runtime implements runtimeapi.RuntimeServiceServer and
// runtimeapi.ImageServiceServer in memory.
//
// All state sits behind one RWMutex: every CRI call is a short critical
// section (no I/O, no waiting under the lock), which keeps the model easy
// to reason about and race-free. Waiting — for a container to honour its
// grace period, for an exec to finish — always happens outside the lock.
type Runtime struct {
	// Embedded by value so every CRI method we do not implement (today only
	// CheckpointContainer) answers codes.Unimplemented instead of panicking.
	runtimeapi.UnimplementedRuntimeServiceServer
	runtimeapi.UnimplementedImageServiceServer

	opts options

	mu         sync.RWMutex
	sandboxes  map[string]*sandbox
	containers map[string]*container
	names      map[string]string // reserved sandbox/container names → ID
	images     imageStore
	conditions map[string]*runtimeapi.RuntimeCondition
	ipam       *ipam
	nextPid    int
	seq        uint64 // last creation sequence number
	closed     bool

	events *broadcaster

	// ctx ends when the Runtime is closed; every container process and
	// exec watches it so Close leaves no goroutine behind.
	ctx    context.Context
	cancel context.CancelFunc
	procs  sync.WaitGroup
	// sessions counts execs, attaches and port-forwards in progress.
	sessions sync.WaitGroup
	execs    atomic.Int32 // execs in progress (shown by Status verbose)

	streamMu  sync.Mutex
	streaming *streamingServer // started lazily on the first Exec/Attach/PortForward
}

var (
	_ runtimeapi.RuntimeServiceServer = (*Runtime)(nil)
	_ runtimeapi.ImageServiceServer   = (*Runtime)(nil)
)

// New returns an empty in-process runtime holding only the pause image
// (plus any WithImages). Call Close when done if containers were started
// or streaming was used; Server.Stop does that for you.
func New(opts ...Option) *Runtime {
	o := defaultOptions()
	for _, opt := range opts {
		opt(&o)
	}
	ctx, cancel := context.WithCancel(context.Background())
	r := &Runtime{
		opts:       o,
		sandboxes:  map[string]*sandbox{},
		containers: map[string]*container{},
		names:      map[string]string{},
		images:     newImageStore(),
		conditions: map[string]*runtimeapi.RuntimeCondition{},
		nextPid:    1000,
		events:     newBroadcaster(),
		ctx:        ctx,
		cancel:     cancel,
	}
	for _, t := range []string{runtimeapi.RuntimeReady, runtimeapi.NetworkReady} {
		r.conditions[t] = &runtimeapi.RuntimeCondition{Type: t, Status: true}
	}
	r.ipam = mustIPAM(o.podCIDR)
	now := r.nowNano()
	if _, err := r.images.add(o.pauseImage, true, now); err != nil {
		panic(fmt.Sprintf("fakecri: bad pause image %q: %v", o.pauseImage, err))
	}
	for _, ref := range o.images {
		if _, err := r.images.add(ref, false, now); err != nil {
			panic(fmt.Sprintf("fakecri: bad preloaded image %q: %v", ref, err))
		}
	}
	return r
}

// Register adds both CRI services to a gRPC server, for callers that run
// their own server instead of Start.
func (r *Runtime) Register(s *grpc.Server) {
	runtimeapi.RegisterRuntimeServiceServer(s, r)
	runtimeapi.RegisterImageServiceServer(s, r)
}

// Close kills every container process (their state becomes EXITED 137),
// ends event streams and stops the streaming server. It is idempotent.
func (r *Runtime) Close() {
	r.mu.Lock()
	if r.closed {
		r.mu.Unlock()
		return
	}
	r.closed = true
	r.mu.Unlock()

	r.cancel()
	r.procs.Wait()
	r.sessions.Wait()
	r.events.close()

	r.streamMu.Lock()
	s := r.streaming
	r.streaming = nil
	r.streamMu.Unlock()
	if s != nil {
		s.stop()
	}
}

func (r *Runtime) nowNano() int64 { return r.opts.now().UnixNano() }

// newID returns a 64-hex-digit ID like containerd's, so crictl's 13-char
// truncation and prefix lookups behave as they do against a real runtime.
func newID() string {
	var b [32]byte
	if _, err := rand.Read(b[:]); err != nil {
		panic(err) // crypto/rand never fails on Linux
	}
	return hex.EncodeToString(b[:])
}

// resolveID finds a full ID from an exact ID or a unique prefix, the way
// containerd's truncindex does (crictl users type the short IDs it prints).
// Caller holds r.mu.
func resolveID[T any](m map[string]T, kind, id string) (string, error) {
	if id == "" {
		return "", status.Errorf(codes.InvalidArgument, "%s ID must not be empty", kind)
	}
	if _, ok := m[id]; ok {
		return id, nil
	}
	var found string
	for full := range m {
		if strings.HasPrefix(full, id) {
			if found != "" {
				return "", status.Errorf(codes.InvalidArgument, "%s ID prefix %q is ambiguous", kind, id)
			}
			found = full
		}
	}
	if found == "" {
		return "", status.Errorf(codes.NotFound, "%s %q not found", kind, id)
	}
	return found, nil
}

// reserveName enforces what containerd enforces: one live sandbox per
// (name, namespace, uid, attempt) and one container per (name, sandbox,
// attempt). The kubelet relies on attempts to tell restarts apart.
// Caller holds r.mu for writing.
func (r *Runtime) reserveName(key, id string) error {
	if owner, ok := r.names[key]; ok {
		return status.Errorf(codes.AlreadyExists, "name %q is reserved for %q", key, owner)
	}
	r.names[key] = id
	return nil
}

// ipam hands out sandbox IPs from the pod CIDR, skipping the network and
// gateway addresses like the host-local CNI plugin does.
type ipam struct {
	prefix netip.Prefix
	next   netip.Addr
	used   map[netip.Addr]bool
}

func newIPAM(cidr string) (*ipam, error) {
	p, err := netip.ParsePrefix(cidr)
	if err != nil {
		return nil, err
	}
	p = p.Masked()
	return &ipam{prefix: p, next: p.Addr().Next().Next(), used: map[netip.Addr]bool{}}, nil
}

func mustIPAM(cidr string) *ipam {
	a, err := newIPAM(cidr)
	if err != nil {
		panic(fmt.Sprintf("fakecri: bad pod CIDR %q: %v", cidr, err))
	}
	return a
}

func (a *ipam) allocate() (string, error) {
	start := a.next
	for {
		ip := a.next
		a.next = a.next.Next()
		if !a.prefix.Contains(a.next) {
			a.next = a.prefix.Addr().Next().Next()
		}
		if a.prefix.Contains(ip) && !a.used[ip] {
			a.used[ip] = true
			return ip.String(), nil
		}
		if a.next == start {
			return "", status.Errorf(codes.ResourceExhausted, "no free IP in pod CIDR %s", a.prefix)
		}
	}
}

func (a *ipam) release(ip string) {
	if addr, err := netip.ParseAddr(ip); err == nil {
		delete(a.used, addr)
	}
}
