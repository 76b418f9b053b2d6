package cri

import (
	"path/filepath"
	"strings"
)

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
