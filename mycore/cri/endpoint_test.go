package cri

import (
	"os"
	"path/filepath"
	"testing"

	"kubelet-labs/internal/state"
)

func TestLoadWithoutEnvFile(t *testing.T) {
	dir := t.TempDir()
	t.Setenv(state.EnvVar, dir)
	t.Setenv(EndpointEnvVar, "")
	env, err := Load()
	if err != nil {
		t.Fatal(err)
	}
	if want := "unix://" + filepath.Join(dir, "containerd", "containerd.sock"); env.Endpoint != want {
		t.Errorf("endpoint %q, want the default %q", env.Endpoint, want)
	}
	if env.File != "" || env.BusyboxImage != "" {
		t.Errorf("no env file, yet got %+v", env)
	}
}

func TestLoadEnvFile(t *testing.T) {
	dir := t.TempDir()
	t.Setenv(state.EnvVar, dir)
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
