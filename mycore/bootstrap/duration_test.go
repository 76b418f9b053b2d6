package bootstrap

import (
	"testing"
	"time"
)

// TestHumanDuration: lifetimes of two days or more read in days, as lab 04
// and its self-check print them; shorter ones as Go writes them.
func TestHumanDuration(t *testing.T) {
	for d, want := range map[time.Duration]string{
		time.Hour:                       "1h0m0s",
		8759*time.Hour + 55*time.Minute: "364d23h55m",
		730 * 24 * time.Hour:            "730d",
		47*time.Hour + 59*time.Minute:   "47h59m0s",
	} {
		if got := HumanDuration(d); got != want {
			t.Errorf("HumanDuration(%s) = %q, want %q", d, got, want)
		}
	}
}
