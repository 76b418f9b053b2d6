package cri

// ShortID is the part of a container or sandbox ID that crictl shows: its
// first 13 characters (truncatedIDLen in cri-tools' cmd/crictl/util.go).
// The labs print IDs this way so a learner can paste one into crictl.
func ShortID(id string) string { return id[:min(13, len(id))] }
