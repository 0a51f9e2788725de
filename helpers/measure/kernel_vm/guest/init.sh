#!/bin/busybox sh
# /init of the kernel lab's initramfs (built by helpers/measure/kernel_vm/bundle.py).
# Mounts the kernel's file systems, loads the modules of the machine named by kl.machine
# (/machines/<name>.modules, already in dependency order; helpers/measure/kernel_vm/machines.py),
# runs the program kl.run chooses with the parameters from the kernel command line, writes its
# JSON between two marker lines on the second serial port (/dev/ttyS1, the host reads it),
# and powers off. The first serial port is the console (the host keeps it as the boot log).
#   kl.run=gem kl.drivers=vgem,virtio_gpu           the GEM / PRIME / dma-buf walkthrough
#   kl.run=evict kl.buffers=8 kl.flips=0,1,2,.../3,0,...   TTM placement and eviction on bochs,
#                                                    one run per /-separated flip sequence
#   kl.run=fences kl.delay_ms=200 kl.poll_ms=100 kl.never=1   dma_fence, dma_resv, sync_file on vgem
#   kl.run=python                                   /work/main.py under the guest's Python (machines with
#                                                    python=True: kernel_vm.run appends it and /work)
/bin/busybox --install -s /bin
export PATH=/bin:/usr/bin
mount -t proc proc /proc
mount -t sysfs sysfs /sys
mount -t devtmpfs devtmpfs /dev
mount -t debugfs debugfs /sys/kernel/debug
mount -t tracefs tracefs /sys/kernel/tracing 2>/dev/null

arg() { tr ' ' '\n' < /proc/cmdline | sed -n "s/^kl\.$1=//p" | tail -n 1; }
RUN=$(arg run)
MACHINE=$(arg machine)
out=/dev/ttyS1

# busybox insmod takes module parameters itself (the kernel command line's are not applied):
# fbdev_emulation=0 keeps the fbdev console out of VRAM, so only the probe's buffers are there
while read -r mod params; do
    insmod "/lib/modules/$mod.ko" $params 2>/dev/console || echo "kernel lab: insmod $mod failed" > /dev/console
done < "/machines/$MACHINE.modules"

# a display driver registers its DRM card asynchronously (the PCI or virtio device's probe):
# wait until every display-class PCI device (class 0x03....) has one, 5 s at most
display_pending() {
    for d in /sys/bus/pci/devices/*; do
        case "$(cat "$d/class")" in
            0x03*) [ -n "$(ls -d "$d/drm" "$d"/virtio*/drm 2>/dev/null)" ] || return 0 ;;
        esac
    done
    return 1
}
i=0
while display_pending && [ $i -lt 50 ]; do sleep 0.1; i=$((i + 1)); done

echo "KERNEL-LAB-BEGIN" > $out
case "$RUN" in
    gem) /probe gem $(arg drivers | tr ',' ' ') > $out 2>/dev/console ;;
    evict) /probe evict "$(arg buffers)" "$(arg flips)" > $out 2>/dev/console ;;
    fences) /fences "$(arg delay_ms)" "$(arg poll_ms)" "$(arg never)" > $out 2>/dev/console ;;
    python) cd /work && PYTHONDONTWRITEBYTECODE=1 /usr/bin/python3.11 -S -u main.py > $out 2>/dev/console ;;
    *) echo "{\"error\": \"unknown kl.run=$RUN\"}" > $out ;;
esac
echo "KERNEL-LAB-END" > $out
sync
poweroff -f
