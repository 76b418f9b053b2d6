package kuberuntime

import "kubelet-labs/mycore/journal"

// log publishes a step of no particular kind (a detail under the step
// before it, an event that could not be recorded) as a printed line.
func (m *Manager) log(format string, args ...any) {
	m.journal.Printf(journal.Other, format, args...)
}

// say publishes e, printed as format says.
func (m *Manager) say(e journal.Entry, format string, args ...any) {
	m.journal.Say(e, format, args...)
}

// A CRI call's entry is not published here: the door (door.go) publishes
// one for every call, with the line its caller gave.
