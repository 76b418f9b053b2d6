// Package scripts holds no Go code of its own: its tests prove the shell
// scripts next to them — that root's containerd-up.sh and
// build-containerd.sh trust nothing a non-root user could have written, and
// that clean-state.sh (`make clean`) removes only a state folder the labs
// made, and none that is in use.
package scripts
