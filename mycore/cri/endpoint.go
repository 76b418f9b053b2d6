package cri

import (
	"bufio"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"

	"kubelet-labs/internal/state"
)

// EndpointEnvVar overrides the runtime endpoint, as it does for crictl.
const EndpointEnvVar = "CONTAINER_RUNTIME_ENDPOINT"

// Env is what scripts/containerd-up.sh wrote to .labs/containerd/env: where
// our containerd listens and which offline images it has.
type Env struct {
	File         string // the env file read ("" if there was none)
	Endpoint     string // unix:///…/containerd.sock
	PauseImage   string // the sandbox (infra) image
	BusyboxImage string // what the labs run in containers
	PodLogDir    string // where pod logs go (the kubelet uses /var/log/pods)
}

// EnvFile is the path of the env file in the state folder.
func EnvFile() (string, error) { return state.Path("containerd", "env") }

// DefaultSocket is where the up script puts containerd's socket.
func DefaultSocket() (string, error) { return state.Path("containerd", "containerd.sock") }

// Load finds the runtime: the env file if containerd-up.sh wrote one, else
// the default socket path in the state folder. CONTAINER_RUNTIME_ENDPOINT,
// when set, wins over both (a flag in the caller wins over everything).
// A missing env file is not an error: Dial will say the runtime is not
// reachable, which is the useful message.
func Load() (Env, error) {
	var env Env
	sock, err := DefaultSocket()
	if err != nil {
		return env, err
	}
	env.Endpoint = "unix://" + sock
	if env.PodLogDir, err = state.Path("containerd", "pod-logs"); err != nil {
		return env, err
	}

	file, err := EnvFile()
	if err != nil {
		return env, err
	}
	vars, err := readEnvFile(file)
	switch {
	case errors.Is(err, os.ErrNotExist):
	case err != nil:
		return env, err
	default:
		env.File = file
		set := func(dst *string, key string) {
			if v := vars[key]; v != "" {
				*dst = v
			}
		}
		set(&env.Endpoint, "CONTAINERD_ENDPOINT")
		set(&env.PauseImage, "PAUSE_IMAGE")
		set(&env.BusyboxImage, "BUSYBOX_IMAGE")
		set(&env.PodLogDir, "POD_LOG_DIR")
	}
	if v := os.Getenv(EndpointEnvVar); v != "" {
		env.Endpoint = v
	}
	env.Endpoint = NormalizeEndpoint(env.Endpoint)
	return env, nil
}

// NormalizeEndpoint turns a bare socket path into a unix:// endpoint, the
// form the kubelet's --container-runtime-endpoint takes.
func NormalizeEndpoint(e string) string {
	if strings.HasPrefix(e, "/") {
		return "unix://" + filepath.Clean(e)
	}
	return e
}

// SocketPath is the file behind a unix:// endpoint ("" for other schemes).
func SocketPath(endpoint string) string {
	if p, ok := strings.CutPrefix(endpoint, "unix://"); ok {
		return p
	}
	return ""
}

// readEnvFile reads KEY=VALUE lines (the subset of shell the up script writes).
func readEnvFile(path string) (map[string]string, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	vars := map[string]string{}
	sc := bufio.NewScanner(f)
	for n := 1; sc.Scan(); n++ {
		line := strings.TrimSpace(sc.Text())
		if line == "" || strings.HasPrefix(line, "#") {
			continue
		}
		k, v, ok := strings.Cut(line, "=")
		if !ok {
			return nil, fmt.Errorf("%s:%d: want KEY=VALUE, got %q", path, n, line)
		}
		vars[k] = strings.Trim(v, `"'`)
	}
	return vars, sc.Err()
}
