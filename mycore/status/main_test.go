package status

import (
	"testing"

	"kubelet-labs/internal/testenv"
)

func TestMain(m *testing.M) { testenv.Main(m) }
