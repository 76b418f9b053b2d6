// Package cachelock serializes the making of one thing in a cache folder
// (a build, an unpacked package, an image tar) across the processes that
// share the folder: `go test ./...` runs the harness's and the suite's
// test binaries at once, and both may build busybox or an image from
// cold. Without it one process's cleanup removed the other's half-done
// build (CI of stop 45: "make: No rule to make target 'defconfig'").
package cachelock

import (
	"fmt"
	"os"
	"syscall"
)

// Hold takes an exclusive flock(2) on path+".lock", waiting for another
// holder to finish, and returns the function that lets it go. The kernel
// drops the lock when a holder dies, so a build killed half-way never
// blocks the next. Callers check the cache again once they hold it: the
// holder before them may have made the very thing.
func Hold(path string) (func(), error) {
	f, err := os.OpenFile(path+".lock", os.O_CREATE|os.O_RDWR, 0o644)
	if err != nil {
		return nil, fmt.Errorf("lock %s: %w", path, err)
	}
	if err := syscall.Flock(int(f.Fd()), syscall.LOCK_EX); err != nil {
		f.Close()
		return nil, fmt.Errorf("lock %s: %w", path, err)
	}
	return func() {
		syscall.Flock(int(f.Fd()), syscall.LOCK_UN)
		f.Close()
	}, nil
}
