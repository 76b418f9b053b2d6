package plegview

import (
	"errors"
	"fmt"
	"path/filepath"
	"strings"
	"time"

	"kubelet-labs/internal/labrecord"
)

// RecordFile is where part 1 appends one line per run, in the lab's
// folder. Why a file: part 1 removes its pod and leaves nothing in the
// runtime, and its PLEG lives only in the lab's process — the events it
// sent are all that says it ran; make check LAB=07 reads them.
const RecordFile = "part1.log"

// RecordPart1 appends what part 1 saw: whose runtime, the event types of
// each relist, and Healthy() after the pause and after the last relist.
func RecordPart1(dir string, m *Mock, sent [][]string, healthyAfterPause, healthyAtEnd bool) error {
	var relists []string
	for i, types := range sent {
		relists = append(relists, fmt.Sprintf("#%d %s", i+1, strings.Join(types, ", ")))
	}
	line := fmt.Sprintf("%s part 1 on %s (%s): relist %s | Healthy() after the pause: %v, after the last relist: %v\n",
		time.Now().Format(time.RFC3339), m.Describe(), m.Endpoint, strings.Join(relists, " | "), healthyAfterPause, healthyAtEnd)
	r, err := labrecord.Append(filepath.Join(dir, RecordFile))
	if err != nil {
		return err
	}
	r.Line("%s", line)
	return errors.Join(r.Err(), r.Close())
}
