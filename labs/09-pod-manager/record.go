package main

import (
	"fmt"
	"os"
	"path/filepath"
	"time"

	kubetypes "k8s.io/kubernetes/pkg/kubelet/types"

	"kubelet-labs/mycore/podconfig"
)

// opsRecordFile is the file, in the node's state folder, where the lab writes
// one line per op its source sent. Why: what the README has you do —
// apply, label, a status write, delete, delete --force — leaves nothing in
// the cluster once the pod is gone (the apiserver keeps no history of a
// label change or a grace period), so `make check LAB=09` reads this
// record to tell which ops you saw. A line:
//
//	2026-11-26T04:23:08Z DELETE default/web grace=30
//
// (grace= on DELETE lines, " mirror" after a mirror pod). Each run appends.
const opsRecordFile = "ops.log"

// opsRecord appends lines to the record; a failed write is reported once
// and does not stop the lab.
type opsRecord struct {
	f      *os.File
	failed bool
}

func openOpsRecord(nodeDir string) (*opsRecord, error) {
	f, err := os.OpenFile(filepath.Join(nodeDir, opsRecordFile), os.O_CREATE|os.O_APPEND|os.O_WRONLY, 0o600)
	if err != nil {
		return nil, fmt.Errorf("the record of ops: %w", err)
	}
	return &opsRecord{f: f}, nil
}

// add writes one line per pod of the update.
func (r *opsRecord) add(u kubetypes.PodUpdate) error {
	for _, p := range u.Pods {
		line := fmt.Sprintf("%s %s %s/%s", time.Now().UTC().Format(time.RFC3339), podconfig.OpName(u.Op), p.Namespace, p.Name)
		if u.Op == kubetypes.DELETE && p.DeletionGracePeriodSeconds != nil {
			line += fmt.Sprintf(" grace=%d", *p.DeletionGracePeriodSeconds)
		}
		if kubetypes.IsMirrorPod(p) {
			line += " mirror"
		}
		if _, err := fmt.Fprintln(r.f, line); err != nil && !r.failed {
			r.failed = true
			return fmt.Errorf("the record of ops %s: %w (make check LAB=09 will not see the ops)", r.f.Name(), err)
		}
	}
	return nil
}

func (r *opsRecord) Close() error { return r.f.Close() }
