package fakecri

import (
	"context"
	"encoding/json"
	"errors"
	"strings"
	"testing"
	"time"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
	runtimeapi "k8s.io/cri-api/pkg/apis/runtime/v1"
)

func pull(t *testing.T, r *Runtime, ref string) string {
	t.Helper()
	resp, err := r.PullImage(tctx(t), &runtimeapi.PullImageRequest{Image: &runtimeapi.ImageSpec{Image: ref}})
	if err != nil {
		t.Fatalf("PullImage %s: %v", ref, err)
	}
	return resp.ImageRef
}

func imageStatus(t *testing.T, r *Runtime, ref string) *runtimeapi.Image {
	t.Helper()
	resp, err := r.ImageStatus(tctx(t), &runtimeapi.ImageStatusRequest{Image: &runtimeapi.ImageSpec{Image: ref}})
	if err != nil {
		t.Fatalf("ImageStatus %s: %v", ref, err)
	}
	return resp.Image
}

func TestPullNormalizesLikeContainerd(t *testing.T) {
	r := newRuntime(t)
	id := pull(t, r, "busybox")
	img := imageStatus(t, r, "docker.io/library/busybox:latest")
	if img == nil || img.Id != id {
		t.Fatalf("busybox not found by its normalized name: %v", img)
	}
	if len(img.RepoTags) != 1 || img.RepoTags[0] != "docker.io/library/busybox:latest" {
		t.Fatalf("repo tags %v", img.RepoTags)
	}
	if len(img.RepoDigests) != 1 || !strings.HasPrefix(img.RepoDigests[0], "docker.io/library/busybox@sha256:") {
		t.Fatalf("repo digests %v", img.RepoDigests)
	}
	if img.Size == 0 || !strings.HasPrefix(img.Id, "sha256:") || len(img.Id) != 71 {
		t.Fatalf("id %q size %d", img.Id, img.Size)
	}
	// Same reference, same image: a second pull is a no-op.
	if again := pull(t, r, "docker.io/library/busybox"); again != id {
		t.Fatalf("second pull gave %q, want %q", again, id)
	}
	// Every way crictl or the kubelet names an image finds it.
	for _, ref := range []string{"busybox", "busybox:latest", id, strings.TrimPrefix(id, "sha256:"), id[7:19], img.RepoDigests[0]} {
		if got := imageStatus(t, r, ref); got == nil || got.Id != id {
			t.Errorf("lookup by %q: %v", ref, got)
		}
	}
	// Deterministic: a fresh runtime makes the same image from the name.
	if other := pull(t, newRuntime(t), "busybox"); other != id {
		t.Fatalf("image IDs are not reproducible: %q vs %q", other, id)
	}
}

func TestPullByDigest(t *testing.T) {
	r := newRuntime(t)
	const digest = "sha256:1111111111111111111111111111111111111111111111111111111111111111"
	id := pull(t, r, "registry.k8s.io/etcd@"+digest)
	img := imageStatus(t, r, id)
	if len(img.RepoTags) != 0 || img.RepoDigests[0] != "registry.k8s.io/etcd@"+digest {
		t.Fatalf("digest pull: tags %v digests %v", img.RepoTags, img.RepoDigests)
	}
}

func TestImageStatusMissingIsNilNotError(t *testing.T) {
	r := newRuntime(t)
	if img := imageStatus(t, r, "not/pulled:yet"); img != nil {
		t.Fatalf("missing image reported: %v", img)
	}
	_, err := r.ImageStatus(tctx(t), &runtimeapi.ImageStatusRequest{})
	wantCode(t, err, codes.InvalidArgument, "")
	_, err = r.PullImage(tctx(t), &runtimeapi.PullImageRequest{Image: &runtimeapi.ImageSpec{Image: "BusyBox"}})
	wantCode(t, err, codes.InvalidArgument, "BusyBox")
}

func TestListRemoveAndFsInfo(t *testing.T) {
	r := newRuntime(t)
	pause := imageStatus(t, r, "registry.k8s.io/pause:3.10.2")
	if pause == nil || !pause.Pinned {
		t.Fatalf("the pause image must be present and pinned: %v", pause)
	}
	nginx := pull(t, r, "nginx:1.27")
	pull(t, r, "busybox")
	list, err := r.ListImages(tctx(t), &runtimeapi.ListImagesRequest{})
	if err != nil || len(list.Images) != 3 {
		t.Fatalf("list: %v %v", list, err)
	}
	var total uint64
	for _, img := range list.Images {
		if img.Id == "" || img.Size == 0 {
			t.Fatalf("image without id or size: %v", img)
		}
		total += img.Size
	}
	fs, err := r.ImageFsInfo(tctx(t), &runtimeapi.ImageFsInfoRequest{})
	if err != nil || len(fs.ImageFilesystems) != 1 {
		t.Fatalf("fs info: %v %v", fs, err)
	}
	if u := fs.ImageFilesystems[0]; u.UsedBytes.Value != total || u.Timestamp <= 0 || u.FsId.Mountpoint == "" {
		t.Fatalf("fs usage %v, want used %d", u, total)
	}
	filtered, _ := r.ListImages(tctx(t), &runtimeapi.ListImagesRequest{Filter: &runtimeapi.ImageFilter{Image: &runtimeapi.ImageSpec{Image: "nginx:1.27"}}})
	if len(filtered.Images) != 1 || filtered.Images[0].Id != nginx {
		t.Fatalf("filtered list %v", filtered.Images)
	}
	for range 2 { // idempotent
		if _, err := r.RemoveImage(tctx(t), &runtimeapi.RemoveImageRequest{Image: &runtimeapi.ImageSpec{Image: nginx}}); err != nil {
			t.Fatal(err)
		}
	}
	if imageStatus(t, r, "nginx:1.27") != nil {
		t.Fatal("removed image still present")
	}
}

func TestContainerOutlivesItsImage(t *testing.T) {
	r := newRuntime(t)
	id := pull(t, r, "nginx")
	cfg := ctrConfig("web")
	cfg.Image.Image = "nginx"
	c := createStart(t, r, runPod(t, r, podConfig("p")), cfg)
	r.RemoveImage(tctx(t), &runtimeapi.RemoveImageRequest{Image: &runtimeapi.ImageSpec{Image: id}})
	if st := ctrStatus(t, r, c); st.ImageId != id || st.ImageRef == "" || st.State != runtimeapi.ContainerState_CONTAINER_RUNNING {
		t.Fatalf("status after image removal: %v", st)
	}
}

func TestPullHookAndDelay(t *testing.T) {
	hook := func(_ context.Context, ref string) error {
		switch {
		case strings.Contains(ref, "private"):
			return status.Error(codes.PermissionDenied, "pull access denied")
		case strings.Contains(ref, "broken"):
			return errors.New("manifest unknown")
		}
		return nil
	}
	r := newRuntime(t, WithPullHook(hook), WithPullDelay(200*time.Millisecond))
	_, err := r.PullImage(tctx(t), &runtimeapi.PullImageRequest{Image: &runtimeapi.ImageSpec{Image: "example.com/private/app"}})
	wantCode(t, err, codes.PermissionDenied, "")
	_, err = r.PullImage(tctx(t), &runtimeapi.PullImageRequest{Image: &runtimeapi.ImageSpec{Image: "broken"}})
	wantCode(t, err, codes.Unknown, "broken")

	c, cancel := context.WithTimeout(context.Background(), 10*time.Millisecond)
	defer cancel()
	_, err = r.PullImage(c, &runtimeapi.PullImageRequest{Image: &runtimeapi.ImageSpec{Image: "slow"}})
	wantCode(t, err, codes.DeadlineExceeded, "")
	if imageStatus(t, r, "slow") != nil {
		t.Fatal("a cancelled pull left an image")
	}
	began := time.Now()
	pull(t, r, "slow")
	if time.Since(began) < 200*time.Millisecond {
		t.Fatal("pull delay not honoured")
	}
}

func TestImageStatusVerbose(t *testing.T) {
	r := newRuntime(t, WithImages("alpine:3.20"))
	resp, err := r.ImageStatus(tctx(t), &runtimeapi.ImageStatusRequest{Image: &runtimeapi.ImageSpec{Image: "alpine:3.20"}, Verbose: true})
	if err != nil {
		t.Fatal(err)
	}
	var info map[string]any
	if err := json.Unmarshal([]byte(resp.Info["info"]), &info); err != nil || info["id"] != resp.Image.Id {
		t.Fatalf("verbose info %q: %v", resp.Info["info"], err)
	}
}
