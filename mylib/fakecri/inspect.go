package fakecri

import (
	"encoding/json"
	"fmt"
)

// SandboxSysctls reads the sysctls a sandbox was created with from the
// verbose part of its PodSandboxStatus (what `crictl inspectp` prints as
// info.config.linux.sysctls). The mock keeps the whole sandbox config
// there, and containerd's CRI shows the same shape, so a test can ask
// either runtime what it was told.
func SandboxSysctls(verboseInfo map[string]string) (map[string]string, error) {
	var info struct {
		Config struct {
			Linux struct {
				Sysctls map[string]string `json:"sysctls"`
			} `json:"linux"`
		} `json:"config"`
	}
	if err := json.Unmarshal([]byte(verboseInfo["info"]), &info); err != nil {
		return nil, fmt.Errorf("the sandbox's verbose info %q: %w", verboseInfo["info"], err)
	}
	return info.Config.Linux.Sysctls, nil
}
