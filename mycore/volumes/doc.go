// Package volumes is our node's volume manager: what the kubelet's
// volume manager (pkg/kubelet/volumemanager) and its in-tree plugins do for
// the volumes a pod brings with it, in a compact form.
//
//   - SetUp is WaitForAttachAndMount (volume_manager.go:397): every volume
//     of the pod is made before its containers start, and made again at each
//     sync so ConfigMap, Secret, downward-API and projected volumes follow
//     their sources (the reconciler's remount, reconciler_common.go). A
//     volume that cannot be made (a ConfigMap that is missing and not
//     optional) is an error that names it: the pod does not start.
//   - Mounts is makeMounts (kubelet_pods.go:278): the CRI mounts of one
//     container, subPath and subPathExpr bound safely with upstream's
//     pkg/volume/util/subpath (no escaping the volume through symlinks).
//   - TearDown unmounts and removes a pod's volumes once it is over (the
//     reconciler's unmount), CleanupOrphans removes the folder of a pod the
//     node no longer has (cleanupOrphanedPodDirs, kubelet_volumes.go:169).
//
// The layout is the kubelet's: PodsDir/UID/volumes/kubernetes.io~TYPE/NAME
// (kubelet_getters.go getPodVolumeDir), subPath bind mounts in
// PodsDir/UID/volume-subpaths/.
//
// Plugins: emptyDir (disk, or medium Memory as a tmpfs sized as upstream
// sizes it), hostPath (with its type checks), configMap, secret,
// downwardAPI and projected (configMap, secret, downwardAPI and
// serviceAccountToken through the TokenRequest API, refreshed before
// they expire by Tokens, a compact token manager). Their contents are written by upstream's AtomicWriter
// and payload builders (pkg/volume/util, configmap.MakePayload,
// secret.MakePayload, downwardapi.CollectData); fsGroup ownership is
// upstream's VolumeOwnership. Any other volume type is refused with an
// error that names it, never silently dropped.
package volumes
