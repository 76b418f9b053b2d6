package labruntime

import "kubelet-labs/internal/containerdenv"

// The env files of scripts/containerd-up.sh are read by
// internal/containerdenv, which the test harness shares (a test of mycore
// may reach it, not this package); the labs keep these names for them.
const (
	// EndpointEnvVar overrides the runtime endpoint, as it does for crictl.
	EndpointEnvVar = containerdenv.EndpointEnvVar
	// RootDirEnvVar moves root's tree of the course (tests use it).
	RootDirEnvVar = containerdenv.RootDirEnvVar
	// DefaultRootDir is root's tree of the course.
	DefaultRootDir = containerdenv.DefaultRootDir

	Flavour22      = containerdenv.Flavour22
	Flavour16      = containerdenv.Flavour16
	DefaultFlavour = containerdenv.DefaultFlavour
)

// Env is what scripts/containerd-up.sh wrote to an env file.
type Env = containerdenv.Env

var (
	// RootDir is root's tree of the course ($LABS_ROOT_DIR or DefaultRootDir).
	RootDir = containerdenv.RootDir
	// Flavours lists every flavour, the default first.
	Flavours = containerdenv.Flavours
	// EnvFile is the labs' default env file.
	EnvFile = containerdenv.EnvFile
	// FlavourEnvFile is one flavour's env file.
	FlavourEnvFile = containerdenv.FlavourEnvFile
	// Load reads the default env file.
	Load = containerdenv.Load
	// LoadFlavour reads one flavour's env file.
	LoadFlavour = containerdenv.LoadFlavour
	// StartedFlavours lists the flavours whose env file exists.
	StartedFlavours = containerdenv.StartedFlavours
)
