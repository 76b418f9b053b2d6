// Package kind holds no Go code of its own: its tests prove the scripts
// that build the kind node image's Go programs and component images
// (build-go.sh, component-images.sh) — that they refuse bad input in one
// line, that what root builds of kind's kindnetd is kind's code as pinned,
// and that the trimmed CoreDNS main links and orders its plugins as
// CoreDNS's own plugin.cfg does. The builds themselves take 20 minutes and
// run in `sudo scripts/kind/build-image.sh`, not here.
package kind
