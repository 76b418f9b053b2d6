package containerdenv

import (
	"os"
	"path/filepath"
	"testing"
)

func TestLoadWithoutEnvFile(t *testing.T) {
	dir := t.TempDir()
	t.Setenv(RootDirEnvVar, dir)
	t.Setenv(EndpointEnvVar, "")
	env, err := Load()
	if err != nil {
		t.Fatal(err)
	}
	// the default flavour's socket: what the message of a failed Dial names
	if want := "unix://" + filepath.Join(dir, "containerd", DefaultFlavour, "containerd.sock"); env.Endpoint != want {
		t.Errorf("endpoint %q, want the default %q", env.Endpoint, want)
	}
	if env.File != "" || env.BusyboxImage != "" {
		t.Errorf("no env file, yet got %+v", env)
	}
}

func TestLoadEnvFile(t *testing.T) {
	dir := t.TempDir()
	t.Setenv(RootDirEnvVar, dir)
	t.Setenv(EndpointEnvVar, "")
	if err := os.MkdirAll(filepath.Join(dir, "containerd"), 0o700); err != nil {
		t.Fatal(err)
	}
	file := filepath.Join(dir, "containerd", "env")
	content := "# written by containerd-up.sh\nCONTAINERD_ENDPOINT=unix:///run/x.sock\nPAUSE_IMAGE=localhost/p:1\nBUSYBOX_IMAGE=localhost/b:2\nPOD_LOG_DIR=/logs\n"
	if err := os.WriteFile(file, []byte(content), 0o600); err != nil {
		t.Fatal(err)
	}
	env, err := Load()
	if err != nil {
		t.Fatal(err)
	}
	want := Env{File: file, Endpoint: "unix:///run/x.sock", PauseImage: "localhost/p:1", BusyboxImage: "localhost/b:2", PodLogDir: "/logs"}
	if env != want {
		t.Errorf("Load() = %+v, want %+v", env, want)
	}

	// CONTAINER_RUNTIME_ENDPOINT (crictl's variable) wins; a bare path is fine.
	t.Setenv(EndpointEnvVar, "/other/cri.sock")
	if env, _ = Load(); env.Endpoint != "unix:///other/cri.sock" {
		t.Errorf("with %s set: endpoint %q", EndpointEnvVar, env.Endpoint)
	}
}

// Each flavour has its own env file; Load (the labs' default) reads the copy
// in containerd/, LoadFlavour the flavour's own, and StartedFlavours lists
// the flavours that have one, in the order of Flavours.
func TestFlavours(t *testing.T) {
	dir := t.TempDir()
	t.Setenv(RootDirEnvVar, dir)
	t.Setenv(EndpointEnvVar, "")
	write := func(path, content string) {
		t.Helper()
		if err := os.MkdirAll(filepath.Dir(path), 0o700); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(path, []byte(content), 0o600); err != nil {
			t.Fatal(err)
		}
	}
	if got, err := StartedFlavours(); err != nil || len(got) != 0 {
		t.Fatalf("StartedFlavours() with no env file = %v, %v; want none", got, err)
	}

	env16 := "CONTAINERD_FLAVOUR=1.6\nCONTAINERD_ENDPOINT=unix:///s/1.6.sock\nCONTAINERD_VERSION=1.6.20~ds1\nBUSYBOX_IMAGE=localhost/b:1\n"
	write(filepath.Join(dir, "containerd", "1.6", "env"), env16)
	write(filepath.Join(dir, "containerd", "2.2", "env"), "CONTAINERD_FLAVOUR=2.2\nCONTAINERD_ENDPOINT=unix:///s/2.2.sock\nCONTAINERD_VERSION=v2.2.9\n")
	// the up script copies the first flavour it started to containerd/env
	write(filepath.Join(dir, "containerd", "env"), env16)

	got, err := StartedFlavours()
	if err != nil || len(got) != 2 || got[0] != Flavour22 || got[1] != Flavour16 {
		t.Fatalf("StartedFlavours() = %v, %v; want [2.2 1.6]", got, err)
	}
	env, err := LoadFlavour(Flavour22)
	if err != nil {
		t.Fatal(err)
	}
	if env.Endpoint != "unix:///s/2.2.sock" || env.Flavour != "2.2" || env.Version != "v2.2.9" {
		t.Errorf("LoadFlavour(2.2) = %+v", env)
	}
	if want := filepath.Join(dir, "containerd", "2.2", "pod-logs"); env.PodLogDir != want {
		t.Errorf("LoadFlavour(2.2) pod logs %q, want the flavour's default %q", env.PodLogDir, want)
	}
	if env, err = Load(); err != nil || env.Flavour != Flavour16 || env.Endpoint != "unix:///s/1.6.sock" {
		t.Errorf("Load() = %+v, %v; want the default copy (1.6)", env, err)
	}

	// CONTAINER_RUNTIME_ENDPOINT changes the default, never a named flavour
	t.Setenv(EndpointEnvVar, "/other.sock")
	if env, _ = LoadFlavour(Flavour16); env.Endpoint != "unix:///s/1.6.sock" {
		t.Errorf("LoadFlavour(1.6) with %s set: endpoint %q", EndpointEnvVar, env.Endpoint)
	}

	if _, err := LoadFlavour("../x"); err == nil {
		t.Error("LoadFlavour(\"../x\"): no error for an unknown flavour")
	}
}
