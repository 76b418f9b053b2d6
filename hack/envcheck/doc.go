// Package envcheck validates the files of the VM path against the tools that
// read them, using those tools' own Go packages:
//
//   - vm.yaml with Lima's pkg/limayaml (github.com/lima-vm/lima v1.2.1):
//     Load (which applies Lima's defaults, FillDefault) and Validate, for both
//     architectures, plus what matters to the course: a pinned image per
//     architecture, the pinned tool versions, the mount, the self-check;
//   - the provisioning shell code of vm.yaml, run for real with fake tools
//     (architecture mapping, checksum verification, the self-check);
//   - yaml/kind-config.yaml with kind's public config types
//     (sigs.k8s.io/kind v0.32.0 pkg/apis/config/v1alpha4), decoded strictly
//     the way kind decodes it, and its node image against kind's default.
//
// It is its own module (kubelet-labs/hack/envcheck) because Lima's
// dependencies would raise versions of modules that k8s.io/kubernetes
// v1.36.3 is built with in the main module. Run it with:
//
//	cd hack/envcheck && go test ./...
package envcheck
