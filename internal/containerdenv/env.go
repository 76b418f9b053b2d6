// Package containerdenv finds the course's containerd instances: it reads
// the env files scripts/containerd-up.sh writes into root's tree (one per
// flavour, plus the default's copy). It is the contract between the up
// script and everything that uses its containerd — the labs (through
// internal/labruntime) and the tests (through internal/critest) — and so
// part of the test harness a test of mycore may reach: it imports nothing of
// the course, only mycore/cri (to spell an endpoint the way a dial does).
package containerdenv

import (
	"bufio"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"

	"kubelet-labs/mycore/cri"
)

// The images the course's containerd has (scripts/containerd-up.sh builds
// them offline); the mock is given the same names, so one pod manifest runs
// on both.
const (
	PauseImage   = "localhost/kubelet-labs/pause:1.0"
	BusyboxImage = "localhost/kubelet-labs/busybox:1.35.0"
)

// UpHint is the one command that starts the course's containerd; it is the
// only command of the course that needs root.
const UpHint = "sudo scripts/containerd-up.sh"

// EndpointEnvVar overrides the runtime endpoint, as it does for crictl.
const EndpointEnvVar = "CONTAINER_RUNTIME_ENDPOINT"

// RootDirEnvVar names root's tree when it is not DefaultRootDir; the up
// script reads the same variable (and refuses a folder that is not root's
// all the way down).
const RootDirEnvVar = "LABS_ROOT_DIR"

// DefaultRootDir is root's tree: scripts/containerd-up.sh keeps everything
// root runs, reads or writes there — containerd's binaries, images, config,
// state and socket — never in the learner's state folder, which any process
// of the learner could fill with symlinks for root to follow. The labs only
// read from it: the env files, the socket handed to the learner, pod logs.
const DefaultRootDir = "/var/lib/kubelet-labs"

// RootDir is root's tree: $LABS_ROOT_DIR, else DefaultRootDir.
func RootDir() string {
	if d := os.Getenv(RootDirEnvVar); d != "" {
		return filepath.Clean(d)
	}
	return DefaultRootDir
}

// containerdPath joins elem onto <root>/containerd.
func containerdPath(elem ...string) string {
	return filepath.Join(append([]string{RootDir(), "containerd"}, elem...)...)
}

// The containerd flavours scripts/containerd-up.sh runs, each in its own
// folder <root>/containerd/<flavour>/ with its own socket, so both can run
// at once: "2.2" is containerd v2.2 built from its Go module (what kind and
// current distributions run), "1.6" the distribution's (Debian 12, apt).
const (
	Flavour22      = "2.2"
	Flavour16      = "1.6"
	DefaultFlavour = Flavour22
)

// Flavours lists every flavour, the default first.
func Flavours() []string { return []string{Flavour22, Flavour16} }

// Env is what scripts/containerd-up.sh wrote to an env file: where a
// containerd listens and which offline images it has.
type Env struct {
	File         string // the env file read ("" if there was none)
	Endpoint     string // unix:///…/containerd.sock
	PauseImage   string // the sandbox (infra) image
	BusyboxImage string // what the labs run in containers
	PodLogDir    string // where pod logs go (the kubelet uses /var/log/pods)
	Flavour      string // "2.2" or "1.6" ("" for an env file without it)
	Version      string // containerd's own version, e.g. v2.2.9 or 1.6.20~ds1
	Bridge       string // the CNI bridge its pods are on, e.g. labs22
	Subnet       string // their subnet, e.g. 10.231.22.0/24
}

// EnvFile is the labs' default env file: a copy of the env of the flavour
// the last containerd-up.sh named first.
func EnvFile() (string, error) { return containerdPath("env"), nil }

// FlavourEnvFile is the env file of one flavour.
func FlavourEnvFile(flavour string) (string, error) {
	if err := checkFlavour(flavour); err != nil {
		return "", err
	}
	return containerdPath(flavour, "env"), nil
}

// Load finds the runtime the labs use: the default env file if
// containerd-up.sh wrote one, else the default flavour's socket path in
// root's tree. CONTAINER_RUNTIME_ENDPOINT, when set, wins over both (a flag
// in the caller wins over everything). A missing env file is not an error:
// Dial will say the runtime is not reachable, which is the useful message.
func Load() (Env, error) {
	file, err := EnvFile()
	if err != nil {
		return Env{}, err
	}
	env, err := load(DefaultFlavour, file)
	if err != nil {
		return env, err
	}
	if v := os.Getenv(EndpointEnvVar); v != "" {
		env.Endpoint = cri.NormalizeEndpoint(v)
	}
	return env, nil
}

// LoadFlavour finds one flavour's containerd from its own env file (or its
// socket path if there is none). CONTAINER_RUNTIME_ENDPOINT does not apply:
// the caller asked for this very instance.
func LoadFlavour(flavour string) (Env, error) {
	file, err := FlavourEnvFile(flavour)
	if err != nil {
		return Env{}, err
	}
	return load(flavour, file)
}

// StartedFlavours lists, in the order of Flavours, the flavours whose env
// file exists: those containerd-up.sh started (down removes the file).
func StartedFlavours() ([]string, error) {
	var started []string
	for _, f := range Flavours() {
		file, err := FlavourEnvFile(f)
		if err != nil {
			return nil, err
		}
		if _, err := os.Stat(file); err == nil {
			started = append(started, f)
		}
	}
	return started, nil
}

func checkFlavour(flavour string) error {
	for _, f := range Flavours() {
		if f == flavour {
			return nil
		}
	}
	return fmt.Errorf("unknown containerd flavour %q (known: %s)", flavour, strings.Join(Flavours(), ", "))
}

// load reads file over the defaults of flavour's folder.
func load(flavour, file string) (Env, error) {
	var env Env
	env.Endpoint = "unix://" + containerdPath(flavour, "containerd.sock")
	env.PodLogDir = containerdPath(flavour, "pod-logs")
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
		set(&env.Flavour, "CONTAINERD_FLAVOUR")
		set(&env.Version, "CONTAINERD_VERSION")
		set(&env.Bridge, "CNI_BRIDGE")
		set(&env.Subnet, "CNI_SUBNET")
	}
	env.Endpoint = cri.NormalizeEndpoint(env.Endpoint)
	return env, nil
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
