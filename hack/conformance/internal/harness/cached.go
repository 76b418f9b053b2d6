package harness

import (
	"fmt"
	"path/filepath"
)

// Cached returns the path of the named program when the cache folder holds
// one Build would reuse (same go.mod, go.sum, Go version and sources), and
// "" when Build would build it: a test can use a built e2e binary without
// paying for a build of the whole suite.
func (l *Layout) Cached(name string) (string, error) {
	p, ok := l.programs()[name]
	if !ok {
		return "", fmt.Errorf("no program %q", name)
	}
	if p.always {
		return "", nil
	}
	bin := filepath.Join(l.BinDir, p.name)
	key, err := l.key(p)
	if err != nil {
		return "", err
	}
	if !built(bin, key) {
		return "", nil
	}
	return bin, nil
}
