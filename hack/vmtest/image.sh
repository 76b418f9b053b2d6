#!/bin/bash
# hack/vmtest/image.sh OUT.qcow2 SEED_DIR: a Debian 12 (bookworm) cloud-style
# qcow2 built offline, for the VM test (hack/vmtest/run.sh), as root.
#
# Nothing here needs loop devices or mounts of block devices: debootstrap
# from Debian's apt mirror into a folder, then the file systems are made as
# files (mkfs.ext4 -d, mkfs.vfat + mtools) and laid out on a GPT disk with
# dd. It boots with a standalone GRUB EFI binary on the ESP under OVMF (Lima's
# default x86_64 firmware), and has what Debian's genericcloud image has for
# Lima: Debian's cloud kernel (no 9p: the bug vm.yaml had), cloud-init
# (Lima's NoCloud cidata), openssh-server, sudo. vm.yaml's provisioning
# installs everything else from the apt mirror, as it does on Debian's image.
#
# Also copied in: this machine's extra CA certificates
# (/usr/local/share/ca-certificates, then update-ca-certificates), so HTTPS
# from the guest works behind the same TLS-inspecting egress; and SEED_DIR
# into the VM's /var/cache/kubelet-labs/seed, where vm.yaml's provisioning
# takes the tools it cannot download (see its steps 3-4).
set -euo pipefail
out="$1"
seed="$2"
mirror="${VMTEST_MIRROR:-http://deb.debian.org/debian}"
work="$(dirname "${out}")/image-work"
log() { printf '[vmtest image] %s\n' "$*" >&2; }

rm -rf "${work}"
mkdir -p "${work}"
root="${work}/root"

log "debootstrap bookworm from ${mirror}"
debootstrap --variant=minbase --include=systemd-sysv,ca-certificates bookworm "${root}" "${mirror}" >"${work}/debootstrap.log" 2>&1 ||
	{ tail -n 30 "${work}/debootstrap.log" >&2; exit 1; }

cleanup() {
	for m in dev/pts dev proc sys; do umount -l "${root}/${m}" 2>/dev/null || true; done
}
trap cleanup EXIT
mount -t proc proc "${root}/proc"
mount -t sysfs sys "${root}/sys"
mount --bind /dev "${root}/dev"
mount --bind /dev/pts "${root}/dev/pts"

cat >"${root}/etc/apt/sources.list" <<SRC
deb ${mirror} bookworm main
deb ${mirror} bookworm-updates main
deb ${mirror%/debian}/debian-security bookworm-security main
SRC
# No daemons start in the chroot.
printf '#!/bin/sh\nexit 101\n' >"${root}/usr/sbin/policy-rc.d"
chmod 0755 "${root}/usr/sbin/policy-rc.d"

log "kernel, cloud-init, sshd, sudo in the chroot"
chroot "${root}" /bin/bash -euo pipefail -c '
export DEBIAN_FRONTEND=noninteractive
apt-get update -qq
apt-get install -y -qq --no-install-recommends \
	linux-image-cloud-amd64 initramfs-tools cloud-init cloud-guest-utils openssh-server sudo \
	libpam-systemd dbus-user-session locales systemd-timesyncd ifupdown isc-dhcp-client \
	netbase iproute2 iputils-ping procps less python3 curl e2fsprogs fdisk zstd >/dev/null
sed -i "s/^# *en_US.UTF-8/en_US.UTF-8/" /etc/locale.gen && locale-gen >/dev/null
apt-get clean
' >"${work}/chroot.log" 2>&1 || { tail -n 30 "${work}/chroot.log" >&2; exit 1; }

# This machine's extra CA certificates.
if compgen -G "/usr/local/share/ca-certificates/*.crt" >/dev/null; then
	cp /usr/local/share/ca-certificates/*.crt "${root}/usr/local/share/ca-certificates/"
	chroot "${root}" update-ca-certificates >/dev/null 2>&1
	log "CA certificates copied: $(cd /usr/local/share/ca-certificates && echo *.crt)"
fi

# zstd above: initramfs-tools compresses with it; without it every package
# with an initramfs hook (fuse3, which Lima installs for sshfs) made the first
# boot gzip the initrd for minutes under TCG.
# What Debian's cloud image sets up: root file system by label, DHCP on the
# first NIC (cloud-init's network config from Lima takes over), a serial
# console for Lima's serial log.
rm -f "${root}/usr/sbin/policy-rc.d"
echo 'LABEL=debroot / ext4 rw,discard,errors=remount-ro 0 1' >"${root}/etc/fstab"
echo debian >"${root}/etc/hostname"
: >"${root}/etc/machine-id"
rm -f "${root}"/etc/ssh/ssh_host_*
# As Debian's cloud image: the hostname resolves (else every sudo warns).
printf 'datasource_list: [ NoCloud, None ]\nmanage_etc_hosts: true\n' >"${root}/etc/cloud/cloud.cfg.d/90-vmtest.cfg"

if [ -n "${seed}" ]; then
	mkdir -p "${root}/var/cache/kubelet-labs/seed"
	cp -a "${seed}/." "${root}/var/cache/kubelet-labs/seed/"
	log "seed: $(ls "${seed}" | tr '\n' ' ')"
fi

cleanup
trap - EXIT

# ESP: the kernel, the initrd and a standalone GRUB with its config inside.
kver="$(basename "$(ls "${root}"/boot/vmlinuz-* | sort -V | tail -n 1)")"
kver="${kver#vmlinuz-}"
cat >"${work}/grub.cfg" <<CFG
set timeout=0
insmod part_gpt
insmod fat
search --no-floppy --file /vmlinuz --set=root
linux /vmlinuz root=LABEL=debroot ro console=tty0 console=ttyS0,115200n8
initrd /initrd.img
boot
CFG
grub-mkstandalone -O x86_64-efi -o "${work}/BOOTX64.EFI" "boot/grub/grub.cfg=${work}/grub.cfg"
esp_mib=128
rm -f "${work}/esp.img"
mkfs.vfat -n ESP -C "${work}/esp.img" $((esp_mib * 1024)) >/dev/null
mmd -i "${work}/esp.img" ::/EFI ::/EFI/BOOT
mcopy -i "${work}/esp.img" "${work}/BOOTX64.EFI" ::/EFI/BOOT/BOOTX64.EFI
mcopy -i "${work}/esp.img" "${root}/boot/vmlinuz-${kver}" ::/vmlinuz
mcopy -i "${work}/esp.img" "${root}/boot/initrd.img-${kver}" ::/initrd.img

# Root file system, made from the folder.
root_mib=4096
mkfs.ext4 -q -L debroot -d "${root}" "${work}/root.img" "${root_mib}M"

# GPT: ESP first, root last (cloud-init's growpart grows the last one to
# Lima's disk size).
disk="${work}/disk.raw"
total_mib=$((1 + esp_mib + root_mib + 1))
rm -f "${disk}"
truncate -s "${total_mib}M" "${disk}"
sfdisk -q "${disk}" <<PARTS
label: gpt
start=1MiB, size=${esp_mib}MiB, type=C12A7328-F81F-11D2-BA4B-00A0C93EC93B, name=esp
start=$((1 + esp_mib))MiB, size=${root_mib}MiB, type=0FC63DAF-8483-4772-8E79-3D69D8477DE4, name=root
PARTS
dd if="${work}/esp.img" of="${disk}" bs=1M seek=1 conv=notrunc,sparse status=none
dd if="${work}/root.img" of="${disk}" bs=1M seek=$((1 + esp_mib)) conv=notrunc,sparse status=none
qemu-img convert -O qcow2 "${disk}" "${out}"
rm -rf "${work}"
log "${out}: $(du -h "${out}" | cut -f1), kernel ${kver}"
