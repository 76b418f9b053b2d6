// Package readmerun makes the labs' READMEs executable: the command blocks
// a README shows are run as a learner would type them, in a fresh copy of
// the repository, one lab after the other with lab 00 running in the
// background, and the output a README shows is compared with what really
// comes out. A README that rots fails CI.
//
// A README marks what runs with an HTML comment (invisible on GitHub) on
// the line just before a ```sh block:
//
//	<!-- run -->                                  run it; it must exit 0
//	<!-- run: exit=1 -->                          it must exit 1
//	<!-- run: background ready="ready in" -->     a program that stays in the
//	                                              foreground: started, and the
//	                                              README goes on (the "second
//	                                              terminal") once its output
//	                                              contains the text; Ctrl-C at
//	                                              the end of the README
//	<!-- run: skip reason="…" -->                 shown, not run (reported)
//
// Options combine: `timeout=10m`, `session` (a background block that lives
// until every README ran: lab 00). A ```text block right after a run block
// and marked <!-- output --> is what the README shows that command
// printing: each of its lines must appear, in order, among the real output
// lines, after both are normalised (times, durations, numbers, hex IDs,
// addresses, the checkout's path); a line "..." stands for lines left out.
// A ```sh block with no marker fails the check: every command a README shows
// is run, or says why not.
//
// The zh-CN README must carry the same blocks, byte for byte, in the same
// order: it is checked against the English one instead of being run twice.
package readmerun
