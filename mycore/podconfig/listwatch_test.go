package podconfig

import (
	"testing"

	"k8s.io/client-go/tools/cache"
	"k8s.io/client-go/util/watchlist"
)

// TestFleetInformerListsThenWatches: the reflector asks exactly this
// (client-go v0.36.3 tools/cache/reflector.go:362) before it streams the
// initial list as watch events; the fleet's pod informer must say no
// (nodes.go, listThenWatch).
func TestFleetInformerListsThenWatches(t *testing.T) {
	if !watchlist.DoesClientNotSupportWatchListSemantics(listThenWatch{&cache.ListWatch{}}) {
		t.Error("the fleet's pod informer would stream its initial list as watch events")
	}
}
