// Package kind holds no Go code of its own: its tests prove the scripts
// that build the kind node image's Go programs and component images
// (build-go.sh, component-images.sh) — that they refuse bad input in one
// line, that root builds kindnetd from exactly the sources of our compact
// version in kindnetd/ (its own module, with its own tests), and that the trimmed CoreDNS main links and orders its plugins as
// CoreDNS's own plugin.cfg does. The builds themselves take 20 minutes and
// run in `sudo scripts/kind/build-image.sh`, not here.
package kind
