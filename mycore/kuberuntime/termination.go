package kuberuntime

import (
	"crypto/rand"
	"encoding/hex"
	"fmt"
	"os"
	"path/filepath"

	v1 "k8s.io/api/core/v1"
	runtimeapi "k8s.io/cri-api/pkg/apis/runtime/v1"
)

// terminationMessageMount is the termination-message half of makeMounts
// (kuberuntime_container.go:508-541): an empty host file, writable by any
// user (0666, as upstream: the container may run as anyone), at
// PODSDIR/UID/containers/NAME/RANDOM, mounted at the container's
// terminationMessagePath (the apiserver defaults it to
// /dev/termination-log). A random name per instance: a restarted container
// starts with an empty file, and the old instance's message stays with the
// old instance. When the container exits, mycore/plegruntime reads the
// file back through the mount the runtime reports (getTerminationMessage)
// into the status's terminated.message. No path (a pod the apiserver did
// not default, e.g. in a unit test): no file.
func (m *Manager) terminationMessageMount(pod *v1.Pod, c *v1.Container) (*runtimeapi.Mount, error) {
	if c.TerminationMessagePath == "" {
		return nil, nil
	}
	dir := filepath.Join(m.podsDir, string(pod.UID), "containers", c.Name)
	if err := os.MkdirAll(dir, 0o750); err != nil {
		return nil, fmt.Errorf("container folder for the termination log: %w", err)
	}
	var id [4]byte // makeUID: 8 hex digits
	if _, err := rand.Read(id[:]); err != nil {
		return nil, err
	}
	path := filepath.Join(dir, hex.EncodeToString(id[:]))
	// O_EXCL: a new file, never one that was already there (or a link).
	f, err := os.OpenFile(path, os.O_CREATE|os.O_EXCL|os.O_WRONLY, 0o666)
	if err != nil {
		return nil, fmt.Errorf("termination-log file: %w", err)
	}
	f.Close()
	// 0666 whatever the umask (:527-533).
	if err := os.Chmod(path, 0o666); err != nil {
		return nil, fmt.Errorf("termination-log file: %w", err)
	}
	return &runtimeapi.Mount{HostPath: path, ContainerPath: filepath.Clean("/" + c.TerminationMessagePath)}, nil
}
