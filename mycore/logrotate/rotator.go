package logrotate

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"sync"
	"time"

	"k8s.io/apimachinery/pkg/api/resource"
	runtimeapi "k8s.io/cri-api/pkg/apis/runtime/v1"
	kubetypes "k8s.io/kubelet/pkg/types"
	"k8s.io/utils/clock"
)

// The kubelet's defaults (pkg/kubelet/apis/config/v1beta1/defaults.go:258-269).
const (
	DefaultMaxSize  = 10 << 20         // containerLogMaxSize "10Mi"
	DefaultMaxFiles = 5                // containerLogMaxFiles
	DefaultInterval = 10 * time.Second // containerLogMonitorInterval
)

// Runtime is the part of the CRI the rotator uses; the kubelet's
// internalapi.RuntimeService (cri.Client.Runtime) has it.
type Runtime interface {
	ListContainers(ctx context.Context, filter *runtimeapi.ContainerFilter) ([]*runtimeapi.Container, error)
	ContainerStatus(ctx context.Context, containerID string, verbose bool) (*runtimeapi.ContainerStatusResponse, error)
	ReopenContainerLog(ctx context.Context, containerID string) error
}

// Options configure a Rotator. Zero values take the kubelet's defaults.
type Options struct {
	// MaxSize in bytes: a log this big is rotated. Negative: never
	// (upstream's way to turn rotation off, :120-123).
	MaxSize int64
	// MaxFiles counts every file of one container's log, the live one
	// included; at least 2 (:113-115).
	MaxFiles int
	// Interval between two RotateOnce in Run.
	Interval time.Duration
	// Selector: only containers with these labels (a node's own, when
	// several nodes share a runtime). Nil: every container, as upstream.
	Selector map[string]string
	// Clock names the rotated files and ticks Run; nil is the real one.
	Clock clock.WithTicker
	// Log gets one line per rotation and per failure; nil is silent.
	Log func(format string, args ...any)
}

// Rotator rotates the logs of running containers. Build it with New.
type Rotator struct {
	rt Runtime
	o  Options
	mu sync.Mutex // one rotation at a time (upstream's mutex, :105)
}

// New checks o as NewContainerLogManager does (:112-141).
func New(rt Runtime, o Options) (*Rotator, error) {
	if o.MaxSize == 0 {
		o.MaxSize = DefaultMaxSize
	}
	if o.MaxFiles == 0 {
		o.MaxFiles = DefaultMaxFiles
	}
	if o.MaxFiles < 2 {
		return nil, fmt.Errorf("container log max files %d: must be at least 2 (the live file and one rotated)", o.MaxFiles)
	}
	if o.Interval <= 0 {
		o.Interval = DefaultInterval
	}
	if o.Clock == nil {
		o.Clock = clock.RealClock{}
	}
	if o.Log == nil {
		o.Log = func(string, ...any) {}
	}
	return &Rotator{rt: rt, o: o}, nil
}

// ParseSize reads a size the way the kubelet reads containerLogMaxSize
// (parseMaxSize, :88-98): a quantity such as "10Mi" or "64Ki".
func ParseSize(s string) (int64, error) {
	q, err := resource.ParseQuantity(s)
	if err != nil {
		return 0, fmt.Errorf("container log max size %q: %w", s, err)
	}
	n, ok := q.AsInt64()
	if !ok {
		return 0, fmt.Errorf("container log max size %q: not a whole number of bytes", s)
	}
	return n, nil
}

// Policy is the size and file count in force, after defaults.
func (r *Rotator) Policy() (maxSize int64, maxFiles int) { return r.o.MaxSize, r.o.MaxFiles }

// Run calls RotateOnce every Interval until ctx ends, logging what it
// did (Start, :144-157; upstream loops forever, we stop with the node).
func (r *Rotator) Run(ctx context.Context) {
	if r.o.MaxSize < 0 {
		return
	}
	t := r.o.Clock.NewTicker(r.o.Interval)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-t.C():
		}
		if _, err := r.RotateOnce(ctx); err != nil && ctx.Err() == nil {
			r.o.Log("%v", err)
		}
	}
}

// Rotation is one log rotated.
type Rotation struct {
	Container *runtimeapi.Container
	Log       string   // the live file, e.g. …/main/0.log
	Size      int64    // its size when it was rotated
	Rotated   string   // what it was renamed to: Log + "." + timestamp
	Removed   []string // older files removed to stay within MaxFiles
}

// RotateOnce is one round of rotateLogs (:193-216) and processContainer
// (:218-270): every running container whose log reached MaxSize is
// rotated. A failure with one container does not stop the others; the
// errors are returned together.
func (r *Rotator) RotateOnce(ctx context.Context) ([]Rotation, error) {
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.o.MaxSize < 0 {
		return nil, nil
	}
	cs, err := r.rt.ListContainers(ctx, &runtimeapi.ContainerFilter{LabelSelector: r.o.Selector})
	if err != nil {
		return nil, fmt.Errorf("log rotation: ListContainers: %w", err)
	}
	var done []Rotation
	var errs []error
	for _, c := range cs {
		// A container that is not running writes nothing more (:204-208).
		if c.GetState() != runtimeapi.ContainerState_CONTAINER_RUNNING {
			continue
		}
		rot, err := r.rotateContainer(ctx, c)
		if err != nil {
			errs = append(errs, fmt.Errorf("log rotation of %s: %w", name(c), err))
			continue
		}
		if rot != nil {
			done = append(done, *rot)
			r.o.Log("rotated %s's log at %s: %s → %s (ReopenContainerLog)%s", name(c), size(rot.Size), rot.Log, filepath.Base(rot.Rotated), removed(rot.Removed))
		}
	}
	return done, errors.Join(errs...)
}

// rotateContainer is processContainer for one container: nil if its log
// is below MaxSize.
func (r *Rotator) rotateContainer(ctx context.Context, c *runtimeapi.Container) (*Rotation, error) {
	resp, err := r.rt.ContainerStatus(ctx, c.GetId(), false)
	if err != nil {
		return nil, fmt.Errorf("ContainerStatus: %w", err)
	}
	path := resp.GetStatus().GetLogPath()
	if path == "" {
		return nil, nil // the pod has no log folder: nothing to rotate
	}
	info, err := os.Stat(path)
	if errors.Is(err, os.ErrNotExist) {
		// Renamed, but the reopen failed and so did the rename back (or
		// someone deleted it): ask the runtime for a new file (:243-259).
		if err := r.rt.ReopenContainerLog(ctx, c.GetId()); err != nil {
			return nil, fmt.Errorf("log %s is missing and ReopenContainerLog failed: %w", path, err)
		}
		info, err = os.Stat(path)
	}
	if err != nil {
		return nil, err
	}
	if info.Size() < r.o.MaxSize {
		return nil, nil
	}
	rot := &Rotation{Container: c, Log: path, Size: info.Size(),
		Rotated: path + "." + r.o.Clock.Now().Format(timestampFormat)}
	if exists(rot.Rotated) || exists(rot.Rotated+gzSuffix) {
		// Rotated once already within this second (an interval below the
		// timestamp's resolution): the rename would overwrite that file.
		// Upstream never gets here at 10 s; we wait for the next round.
		return nil, nil
	}
	if err := r.rotateLog(ctx, c.GetId(), rot); err != nil {
		return nil, err
	}
	return rot, nil
}

func exists(path string) bool {
	_, err := os.Lstat(path)
	return err == nil
}

func name(c *runtimeapi.Container) string {
	l := c.GetLabels()
	if pod := l[kubetypes.KubernetesPodNameLabel]; pod != "" {
		return l[kubetypes.KubernetesPodNamespaceLabel] + "/" + pod + "/" + c.GetMetadata().GetName()
	}
	return c.GetMetadata().GetName()
}

func size(n int64) string {
	if n >= 1<<20 {
		return fmt.Sprintf("%.1f MiB", float64(n)/(1<<20))
	}
	return fmt.Sprintf("%.1f KiB", float64(n)/(1<<10))
}

func removed(files []string) string {
	if len(files) == 0 {
		return ""
	}
	return fmt.Sprintf("; removed %d old file(s)", len(files))
}
