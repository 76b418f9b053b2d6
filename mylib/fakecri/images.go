package fakecri

import (
	"context"
	"crypto/sha256"
	"encoding/binary"
	"encoding/hex"
	"encoding/json"
	"sort"
	"strings"
	"time"

	"github.com/distribution/reference"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
	runtimeapi "k8s.io/cri-api/pkg/apis/runtime/v1"
)

// Images are made up from their reference alone: the same name always
// yields the same ID ("sha256:…"), repo digest and size, so tests and
// lab output are reproducible. Names are normalised exactly as containerd
// and the docker CLI do ("busybox" → "docker.io/library/busybox:latest")
// by github.com/distribution/reference.

type image struct {
	id          string // sha256:<64 hex>
	repoTags    []string
	repoDigests []string
	size        uint64
	pinned      bool
	pulledAt    int64
}

func (img *image) proto() *runtimeapi.Image {
	return &runtimeapi.Image{
		Id:          img.id,
		RepoTags:    append([]string(nil), img.repoTags...),
		RepoDigests: append([]string(nil), img.repoDigests...),
		Size:        img.size,
		Spec:        &runtimeapi.ImageSpec{Image: img.id},
		Pinned:      img.pinned,
	}
}

// info is what a container created from this image remembers.
func (img *image) info(asked string) imageInfo {
	ii := imageInfo{id: img.id, name: asked}
	if len(img.repoTags) > 0 {
		ii.name = img.repoTags[0]
	}
	if len(img.repoDigests) > 0 {
		ii.digestRef = img.repoDigests[0]
	} else {
		ii.digestRef = img.id
	}
	return ii
}

// imageStore is guarded by Runtime.mu.
type imageStore struct {
	byID map[string]*image
	refs map[string]string // normalised tag or digest reference → ID
}

func newImageStore() imageStore {
	return imageStore{byID: map[string]*image{}, refs: map[string]string{}}
}

func sum(parts ...string) [32]byte { return sha256.Sum256([]byte(strings.Join(parts, "\x00"))) }

// normalize parses a reference the way containerd's CRI plugin does.
// It returns the tagged form (may be "") and the digested form (may be "").
func normalize(ref string) (tagged, digested string, err error) {
	named, err := reference.ParseNormalizedNamed(ref)
	if err != nil {
		return "", "", status.Errorf(codes.InvalidArgument, "invalid image reference %q: %v", ref, err)
	}
	if c, ok := named.(reference.Canonical); ok {
		digested = reference.TrimNamed(named).String() + "@" + c.Digest().String()
	}
	if t, ok := named.(reference.Tagged); ok {
		tagged = reference.TrimNamed(named).String() + ":" + t.Tag()
	} else if digested == "" {
		tagged = reference.TagNameOnly(named).String()
	}
	return tagged, digested, nil
}

// add makes an image present (a "pull") and returns it.
func (s *imageStore) add(ref string, pinned bool, now int64) (*image, error) {
	tagged, digested, err := normalize(ref)
	if err != nil {
		return nil, err
	}
	if img, ok := s.get(tagged, digested); ok {
		return img, nil
	}
	content := "tag:" + tagged
	if digested != "" {
		content = "digest:" + digested[strings.IndexByte(digested, '@')+1:]
	}
	idSum := sum("config", content)
	img := &image{
		id: "sha256:" + hex.EncodeToString(idSum[:]),
		// 512 KiB .. ~64.5 MiB: pause-sized to a small distro image.
		size:     512<<10 + binary.BigEndian.Uint64(idSum[:8])%(64<<20),
		pinned:   pinned,
		pulledAt: now,
	}
	if tagged != "" {
		img.repoTags = []string{tagged}
	}
	if digested != "" {
		img.repoDigests = []string{digested}
	} else {
		m := sum("manifest", content)
		name := tagged[:strings.LastIndexByte(tagged, ':')]
		img.repoDigests = []string{name + "@sha256:" + hex.EncodeToString(m[:])}
	}
	s.byID[img.id] = img
	for _, r := range append(append([]string(nil), img.repoTags...), img.repoDigests...) {
		s.refs[r] = img.id
	}
	return img, nil
}

func (s *imageStore) get(tagged, digested string) (*image, bool) {
	for _, r := range []string{digested, tagged} {
		if id, ok := s.refs[r]; ok && r != "" {
			return s.byID[id], true
		}
	}
	return nil, false
}

// lookup finds an image by ID ("sha256:…" or bare hex, or a unique prefix
// of at least 4 hex digits, as crictl users type) or by any reference.
func (s *imageStore) lookup(spec string) (*image, bool) {
	if spec == "" {
		return nil, false
	}
	if img, ok := s.byID[spec]; ok {
		return img, true
	}
	if img, ok := s.byID["sha256:"+spec]; ok {
		return img, true
	}
	if tagged, digested, err := normalize(spec); err == nil {
		if img, ok := s.get(tagged, digested); ok {
			return img, true
		}
	}
	hexPart := strings.TrimPrefix(spec, "sha256:")
	if len(hexPart) >= 4 && strings.Trim(hexPart, "0123456789abcdef") == "" {
		var found *image
		for id, img := range s.byID {
			if strings.HasPrefix(id, "sha256:"+hexPart) {
				if found != nil {
					return nil, false
				}
				found = img
			}
		}
		return found, found != nil
	}
	return nil, false
}

func (s *imageStore) remove(img *image) {
	delete(s.byID, img.id)
	for r, id := range s.refs {
		if id == img.id {
			delete(s.refs, r)
		}
	}
}

// sorted returns images ordered by first tag (then ID) for stable output.
func (s *imageStore) sorted() []*image {
	out := make([]*image, 0, len(s.byID))
	for _, img := range s.byID {
		out = append(out, img)
	}
	key := func(img *image) string {
		if len(img.repoTags) > 0 {
			return img.repoTags[0]
		}
		return "~" + img.id
	}
	sort.Slice(out, func(i, j int) bool { return key(out[i]) < key(out[j]) })
	return out
}

// ListImages lists present images, optionally only the one a filter names.
func (r *Runtime) ListImages(_ context.Context, req *runtimeapi.ListImagesRequest) (*runtimeapi.ListImagesResponse, error) {
	return &runtimeapi.ListImagesResponse{Images: r.listImages(req.GetFilter())}, nil
}

func (r *Runtime) listImages(f *runtimeapi.ImageFilter) []*runtimeapi.Image {
	r.mu.RLock()
	defer r.mu.RUnlock()
	if want := f.GetImage().GetImage(); want != "" {
		if img, ok := r.images.lookup(want); ok {
			return []*runtimeapi.Image{img.proto()}
		}
		return []*runtimeapi.Image{}
	}
	out := make([]*runtimeapi.Image, 0, len(r.images.byID))
	for _, img := range r.images.sorted() {
		out = append(out, img.proto())
	}
	return out
}

// StreamImages is ListImages in chunks (KEP-5825, feature CRIListStreaming).
func (r *Runtime) StreamImages(req *runtimeapi.StreamImagesRequest, stream grpc.ServerStreamingServer[runtimeapi.StreamImagesResponse]) error {
	return sendChunks(r.listImages(req.GetFilter()), func(c []*runtimeapi.Image) error {
		return stream.Send(&runtimeapi.StreamImagesResponse{Images: c})
	})
}

// ImageStatus returns the image or, per CRI, a nil Image (not an error)
// when it is not present — that is how the kubelet decides to pull.
func (r *Runtime) ImageStatus(_ context.Context, req *runtimeapi.ImageStatusRequest) (*runtimeapi.ImageStatusResponse, error) {
	spec := req.GetImage().GetImage()
	if spec == "" {
		return nil, status.Error(codes.InvalidArgument, "ImageStatus: image spec must not be empty")
	}
	r.mu.RLock()
	defer r.mu.RUnlock()
	img, ok := r.images.lookup(spec)
	if !ok {
		return &runtimeapi.ImageStatusResponse{}, nil
	}
	resp := &runtimeapi.ImageStatusResponse{Image: img.proto()}
	if req.GetVerbose() {
		info, _ := json.Marshal(map[string]any{
			"id": img.id, "repoTags": img.repoTags, "repoDigests": img.repoDigests,
			"size": img.size, "pinned": img.pinned,
			"pulledAt": time.Unix(0, img.pulledAt).UTC().Format(time.RFC3339Nano),
			"note":     "fakecri images have no layers; content is derived from the reference",
		})
		resp.Info = map[string]string{"info": string(info)}
	}
	return resp, nil
}

// PullImage "pulls" instantly (or after WithPullDelay), unless a PullHook
// fails it. It returns the image ID, which 1.36 requires to equal Image.id.
func (r *Runtime) PullImage(ctx context.Context, req *runtimeapi.PullImageRequest) (*runtimeapi.PullImageResponse, error) {
	ref := req.GetImage().GetImage()
	if ref == "" {
		return nil, status.Error(codes.InvalidArgument, "PullImage: image spec must not be empty")
	}
	if _, _, err := normalize(ref); err != nil {
		return nil, err
	}
	if h := r.opts.pullHook; h != nil {
		if err := h(ctx, ref); err != nil {
			if _, ok := status.FromError(err); ok {
				return nil, err
			}
			return nil, status.Errorf(codes.Unknown, "pulling image %q: %v", ref, err)
		}
	}
	if d := r.opts.pullDelay; d > 0 {
		t := time.NewTimer(d)
		defer t.Stop()
		select {
		case <-t.C:
		case <-ctx.Done():
			return nil, status.FromContextError(ctx.Err()).Err()
		}
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	img, err := r.images.add(ref, false, r.nowNano())
	if err != nil {
		return nil, err
	}
	return &runtimeapi.PullImageResponse{ImageRef: img.id}, nil
}

// RemoveImage is idempotent: removing a missing image succeeds. Like
// containerd it removes every tag of the image, and containers created
// from it keep running.
func (r *Runtime) RemoveImage(_ context.Context, req *runtimeapi.RemoveImageRequest) (*runtimeapi.RemoveImageResponse, error) {
	spec := req.GetImage().GetImage()
	if spec == "" {
		return nil, status.Error(codes.InvalidArgument, "RemoveImage: image spec must not be empty")
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	if img, ok := r.images.lookup(spec); ok {
		r.images.remove(img)
	}
	return &runtimeapi.RemoveImageResponse{}, nil
}

// imageFSMountpoint is reported as the image filesystem; nothing is stored there.
const imageFSMountpoint = "/var/lib/fakecri/images"

// ImageFsInfo reports the images' total size on a made-up filesystem.
func (r *Runtime) ImageFsInfo(context.Context, *runtimeapi.ImageFsInfoRequest) (*runtimeapi.ImageFsInfoResponse, error) {
	r.mu.RLock()
	defer r.mu.RUnlock()
	var used uint64
	for _, img := range r.images.byID {
		used += img.size
	}
	return &runtimeapi.ImageFsInfoResponse{ImageFilesystems: []*runtimeapi.FilesystemUsage{{
		Timestamp:  r.nowNano(),
		FsId:       &runtimeapi.FilesystemIdentifier{Mountpoint: imageFSMountpoint},
		UsedBytes:  &runtimeapi.UInt64Value{Value: used},
		InodesUsed: &runtimeapi.UInt64Value{Value: uint64(len(r.images.byID)) * 64},
	}}}, nil
}

// streamChunk is how many items each Stream* response carries.
const streamChunk = 500

// sendChunks sends items in chunks of at least one item, as KEP-5825 asks
// (an empty list is just the end of the stream).
func sendChunks[T any](items []T, send func([]T) error) error {
	for len(items) > 0 {
		n := min(streamChunk, len(items))
		if err := send(items[:n]); err != nil {
			return err
		}
		items = items[n:]
	}
	return nil
}
