package main

import v1 "k8s.io/api/core/v1"

// readyCondition is the node's Ready condition, or nil when no kubelet (or
// lab) has posted one yet.
func readyCondition(n *v1.Node) *v1.NodeCondition {
	for i := range n.Status.Conditions {
		if n.Status.Conditions[i].Type == v1.NodeReady {
			return &n.Status.Conditions[i]
		}
	}
	return nil
}

// readyStatus is Ready's status as kubectl shows it ("True", "Unknown", …);
// "Unknown" without a condition, as the node lifecycle controller reads it.
func readyStatus(n *v1.Node) string {
	if c := readyCondition(n); c != nil {
		return string(c.Status)
	}
	return string(v1.ConditionUnknown)
}

// isReady: Ready=True.
func isReady(n *v1.Node) bool { return readyStatus(n) == string(v1.ConditionTrue) }
