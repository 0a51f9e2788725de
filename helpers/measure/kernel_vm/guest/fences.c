/*
 * The kernel lab's fences program: runs as part of /init inside a Linux VM (helpers/measure/kernel_vm/guest/init.sh,
 * machine "fences") and prints ONE JSON object on stdout: what the kernel answered when a buffer
 * carried an unsignalled fence.
 *
 *   fences DELAY_MS POLL_MS NEVER
 *
 * On vgem (GEM on shmem pages, no device), with its two test ioctls, VGEM_FENCE_ATTACH (a fence
 * that only the caller signals, put into the buffer's reservation object as a writer's or a
 * reader's) and VGEM_FENCE_SIGNAL:
 *
 *   idle            poll() on the buffer's dma-buf, EXPORT_SYNC_FILE with nothing pending
 *   write_fence     a writer's fence: poll for reading and for writing times out after POLL_MS,
 *                   debugfs bufinfo lists the fence, EXPORT_SYNC_FILE gives a sync_file whose
 *                   SYNC_IOC_FILE_INFO names it and whose poll times out too; a reader's fence
 *                   cannot be attached beside it (vgem's conflict check)
 *   wakeups         a child process signals after DELAY_MS while the parent is blocked in
 *                   poll(dma-buf), poll(sync_file), DMA_BUF_IOCTL_SYNC (CPU access): how long each waited
 *   after_signal    everything ready; signalling the same fence again
 *   read_fence      a reader's fence: readers go, writers wait
 *   import          IMPORT_SYNC_FILE: another buffer's pending fence made a writer of this buffer
 *   syncobj         DRM_CAP_SYNCOBJ and DRM_IOCTL_SYNCOBJ_CREATE on vgem
 *   never_signalled (NEVER=1) a fence nobody signals: how long poll() waits; what signalling it late says
 *
 * Times are the guest's CLOCK_MONOTONIC in a virtual machine (emulated, not hardware timings).
 * Built statically by helpers/measure/kernel_vm/bundle.py. Every failure is reported in the JSON
 * ("error", negative errno values), never as a crash.
 */
#define _GNU_SOURCE
#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/ioctl.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include <drm.h>
#include <drm_mode.h>
#include <linux/dma-buf.h>
#include <linux/sync_file.h>

#include "kl_json.h"

/* vgem's uapi (include/uapi/drm/vgem_drm.h), which libdrm-dev does not ship */
struct kl_vgem_fence_attach { uint32_t handle, flags, out_fence, pad; };
struct kl_vgem_fence_signal { uint32_t fence, flags; };
#define KL_VGEM_FENCE_WRITE 0x1
#define KL_IOCTL_VGEM_FENCE_ATTACH DRM_IOWR(DRM_COMMAND_BASE + 0x1, struct kl_vgem_fence_attach)
#define KL_IOCTL_VGEM_FENCE_SIGNAL DRM_IOW(DRM_COMMAND_BASE + 0x2, struct kl_vgem_fence_signal)

#define DEBUGFS_BUFINFO "/sys/kernel/debug/dma_buf/bufinfo"
#define NEVER_POLL_MS 20000 /* longer than vgem's VGEM_FENCE_TIMEOUT (10 s) */

static int card = -1;

static long long now_us(void) {
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    return (long long)t.tv_sec * 1000000 + t.tv_nsec / 1000;
}

static int open_vgem(char *path_out) {
    for (int i = 0; i < 8; i++) {
        char path[64], name[64] = "";
        snprintf(path, sizeof path, "/dev/dri/card%d", i);
        int fd = open(path, O_RDWR | O_CLOEXEC);
        if (fd < 0) continue;
        struct drm_version v = {.name = name, .name_len = sizeof name - 1};
        if (ioctl(fd, DRM_IOCTL_VERSION, &v) == 0 && strcmp(name, "vgem") == 0) {
            strcpy(path_out, path);
            return fd;
        }
        close(fd);
    }
    return -1;
}

/* a 64x64x32 dumb buffer (16 KiB), exported as a dma-buf; returns the dma-buf fd or -errno */
static int new_buffer(uint32_t *handle) {
    struct drm_mode_create_dumb c = {.width = 64, .height = 64, .bpp = 32};
    if (ioctl(card, DRM_IOCTL_MODE_CREATE_DUMB, &c)) return -errno;
    *handle = c.handle;
    struct drm_prime_handle ex = {.handle = c.handle, .flags = DRM_CLOEXEC | DRM_RDWR};
    if (ioctl(card, DRM_IOCTL_PRIME_HANDLE_TO_FD, &ex)) return -errno;
    return ex.fd;
}

/* VGEM_FENCE_ATTACH: the fence's id (> 0) or -errno */
static int attach(uint32_t handle, int write) {
    struct kl_vgem_fence_attach a = {.handle = handle, .flags = write ? KL_VGEM_FENCE_WRITE : 0};
    return ioctl(card, KL_IOCTL_VGEM_FENCE_ATTACH, &a) ? -errno : (int)a.out_fence;
}

static int signal_fence(uint32_t fence) {
    struct kl_vgem_fence_signal s = {.fence = fence};
    return ioctl(card, KL_IOCTL_VGEM_FENCE_SIGNAL, &s) ? -errno : 0;
}

/* poll one fd for `events` (POLLIN: may I read? POLLOUT: may I write?), reported as an object */
static void jpoll(const char *k, int fd, short events, int timeout_ms) {
    struct pollfd p = {.fd = fd, .events = events};
    long long t0 = now_us();
    int n = poll(&p, 1, timeout_ms);
    long long dt = now_us() - t0;
    obj(k);
    jint("timeout_ms", timeout_ms);
    jint("rc", n < 0 ? -errno : n);
    jbool("ready", n > 0 && (p.revents & events));
    jint("revents", n > 0 ? p.revents : 0);
    jint("waited_us", dt);
    end_obj();
}

/* DMA_BUF_IOCTL_EXPORT_SYNC_FILE for a reader (DMA_BUF_SYNC_READ) or a writer (DMA_BUF_SYNC_WRITE) */
static int export_sync_file(int dmabuf, uint32_t flags) {
    struct dma_buf_export_sync_file e = {.flags = flags, .fd = -1};
    return ioctl(dmabuf, DMA_BUF_IOCTL_EXPORT_SYNC_FILE, &e) ? -errno : e.fd;
}

/* SYNC_IOC_FILE_INFO of a sync_file: its name, status and each fence's driver, timeline, status */
static void jsync_info(const char *k, int sf) {
    struct sync_fence_info fences[8];
    struct sync_file_info info = {0};
    obj(k);
    if (ioctl(sf, SYNC_IOC_FILE_INFO, &info)) { jerr("error", errno); end_obj(); return; }
    uint32_t n = info.num_fences < 8 ? info.num_fences : 8;
    memset(fences, 0, sizeof fences);
    info = (struct sync_file_info){.num_fences = n, .sync_fence_info = (uintptr_t)fences};
    if (ioctl(sf, SYNC_IOC_FILE_INFO, &info)) { jerr("error", errno); end_obj(); return; }
    jstr("name", info.name);
    jint("status", info.status);
    jint("num_fences", info.num_fences);
    arr("fences");
    for (uint32_t i = 0; i < n; i++) {
        obj(NULL);
        jstr("driver_name", fences[i].driver_name);
        jstr("obj_name", fences[i].obj_name);
        jint("status", fences[i].status);
        jbool("has_timestamp", fences[i].timestamp_ns != 0);
        end_obj();
    }
    end_arr();
    end_obj();
}

/* export a sync_file, describe it, poll it for `timeout_ms`, close it */
static void jexport(const char *k, int dmabuf, uint32_t flags, int timeout_ms) {
    obj(k);
    jstr("for", flags == DMA_BUF_SYNC_READ ? "read" : "write");
    int sf = export_sync_file(dmabuf, flags);
    jint("rc", sf < 0 ? sf : 0);
    if (sf >= 0) {
        jsync_info("info", sf);
        jpoll("poll", sf, POLLIN, timeout_ms);
        close(sf);
    }
    end_obj();
}

/* fork a child that sleeps delay_ms and signals `fence` (it shares this DRM file, where the
 * fence's id lives); the parent then blocks in `what` and reports how long it waited */
enum wait_kind { WAIT_POLL_IN, WAIT_SYNC_FILE, WAIT_CPU_ACCESS };

static void jwakeup(const char *k, enum wait_kind kind, int dmabuf, uint32_t handle, int delay_ms) {
    obj(k);
    int fence = attach(handle, 1);
    jint("fence", fence);
    if (fence < 0) { end_obj(); return; }
    int sf = kind == WAIT_SYNC_FILE ? export_sync_file(dmabuf, DMA_BUF_SYNC_READ) : -1;
    pid_t child = fork();
    if (child == 0) {
        usleep(delay_ms * 1000);
        _exit(signal_fence(fence) == 0 ? 0 : 1);
    }
    jint("signal_after_ms", delay_ms);
    long long t0 = now_us();
    int rc;
    if (kind == WAIT_CPU_ACCESS) {
        struct dma_buf_sync s = {.flags = DMA_BUF_SYNC_START | DMA_BUF_SYNC_READ};
        rc = ioctl(dmabuf, DMA_BUF_IOCTL_SYNC, &s) ? -errno : 0;
        s.flags = DMA_BUF_SYNC_END | DMA_BUF_SYNC_READ;
        ioctl(dmabuf, DMA_BUF_IOCTL_SYNC, &s);
        jstr("call", "DMA_BUF_IOCTL_SYNC(START|READ)");
    } else {
        struct pollfd p = {.fd = kind == WAIT_SYNC_FILE ? sf : dmabuf, .events = POLLIN};
        int n = poll(&p, 1, 10 * delay_ms + 2000);
        rc = n < 0 ? -errno : n;
        jstr("call", kind == WAIT_SYNC_FILE ? "poll(sync_file, POLLIN)" : "poll(dma-buf, POLLIN)");
        jbool("ready", n > 0 && (p.revents & POLLIN));
    }
    jint("waited_us", now_us() - t0);
    jint("rc", rc);
    int status = 0;
    waitpid(child, &status, 0);
    jbool("child_signalled_ok", WIFEXITED(status) && WEXITSTATUS(status) == 0);
    if (sf >= 0) { jsync_info("sync_file_after", sf); close(sf); }
    end_obj();
}

static void run(int delay_ms, int poll_ms, int never) {
    char node[64] = "";
    jstr("run", "fences");
    jstr("driver", "vgem");
    card = open_vgem(node);
    if (card < 0) { jstr("error", "no /dev/dri/card* with driver vgem"); return; }
    jstr("node", node);
    jint("delay_ms", delay_ms);
    jint("poll_ms", poll_ms);

    struct drm_get_cap cap = {.capability = DRM_CAP_SYNCOBJ};
    jint("cap_syncobj", ioctl(card, DRM_IOCTL_GET_CAP, &cap) ? -errno : (long long)cap.value);

    uint32_t h = 0, h2 = 0;
    int buf = new_buffer(&h);
    if (buf < 0) { jerr("error", -buf); return; }
    jint("handle", h);

    obj("idle");
    jpoll("poll_in", buf, POLLIN, 0);
    jpoll("poll_out", buf, POLLOUT, 0);
    jexport("export_read", buf, DMA_BUF_SYNC_READ, 0);
    end_obj();

    obj("write_fence");
    int wf = attach(h, 1);
    jint("fence", wf);
    if (wf > 0) {
        jpoll("poll_in", buf, POLLIN, poll_ms);
        jpoll("poll_out", buf, POLLOUT, poll_ms);
        jfile_lines("bufinfo", DEBUGFS_BUFINFO, 40);
        jexport("export_read", buf, DMA_BUF_SYNC_READ, poll_ms);
        int rf = attach(h, 0);
        jint("attach_read_rc", rf < 0 ? rf : 0);
        if (rf > 0) signal_fence(rf);
        jint("signal_rc", signal_fence(wf));
    }
    end_obj();

    obj("after_signal");
    jpoll("poll_in", buf, POLLIN, 0);
    jpoll("poll_out", buf, POLLOUT, 0);
    jexport("export_write", buf, DMA_BUF_SYNC_WRITE, 0);
    jint("signal_again_rc", wf > 0 ? signal_fence(wf) : 0);
    end_obj();

    arr("wakeups");
    jwakeup(NULL, WAIT_POLL_IN, buf, h, delay_ms);
    jwakeup(NULL, WAIT_SYNC_FILE, buf, h, delay_ms);
    jwakeup(NULL, WAIT_CPU_ACCESS, buf, h, delay_ms);
    end_arr();

    obj("read_fence");
    int rf = attach(h, 0);
    jint("fence", rf);
    if (rf > 0) {
        jpoll("poll_in", buf, POLLIN, poll_ms);
        jpoll("poll_out", buf, POLLOUT, poll_ms);
        jexport("export_read", buf, DMA_BUF_SYNC_READ, 0);
        jexport("export_write", buf, DMA_BUF_SYNC_WRITE, poll_ms);
        int w = attach(h, 1);
        jint("attach_write_rc", w < 0 ? w : 0);
        if (w > 0) signal_fence(w);
        jint("signal_rc", signal_fence(rf));
    }
    end_obj();

    obj("import");
    int buf2 = new_buffer(&h2);
    int f2 = buf2 >= 0 ? attach(h2, 1) : buf2;
    jint("other_fence", f2);
    if (f2 > 0) {
        int sf = export_sync_file(buf2, DMA_BUF_SYNC_READ);
        struct dma_buf_import_sync_file im = {.flags = DMA_BUF_SYNC_WRITE, .fd = sf};
        jint("import_rc", sf < 0 ? sf : ioctl(buf, DMA_BUF_IOCTL_IMPORT_SYNC_FILE, &im) ? -errno : 0);
        if (sf >= 0) close(sf);
        jpoll("poll_in_before", buf, POLLIN, poll_ms);
        jint("signal_other_rc", signal_fence(f2));
        jpoll("poll_in_after", buf, POLLIN, 0);
    }
    if (buf2 >= 0) close(buf2);
    end_obj();

    obj("syncobj");
    struct drm_syncobj_create sc = {0};
    int rc = ioctl(card, DRM_IOCTL_SYNCOBJ_CREATE, &sc) ? -errno : 0;
    jint("create_rc", rc);
    jstr("create_error", rc ? strerror(-rc) : "");
    if (!rc) {
        struct drm_syncobj_destroy sd = {.handle = sc.handle};
        ioctl(card, DRM_IOCTL_SYNCOBJ_DESTROY, &sd);
    }
    end_obj();

    if (never) {
        obj("never_signalled");
        int nf = attach(h, 1);
        jint("fence", nf);
        if (nf > 0) {
            jpoll("poll_in", buf, POLLIN, NEVER_POLL_MS);
            jexport("export_read", buf, DMA_BUF_SYNC_READ, 0);
            jint("signal_rc", signal_fence(nf));
        }
        end_obj();
    }
    close(buf);
    close(card);
}

static void uname_into(void) { jfile_line("kernel_release", "/proc/sys/kernel/osrelease"); }

int main(int argc, char **argv) {
    setvbuf(stdout, NULL, _IOFBF, 1 << 20);
    obj(NULL);
    uname_into();
    int delay = argc > 1 ? atoi(argv[1]) : 200, pollms = argc > 2 ? atoi(argv[2]) : 100;
    int never = argc > 3 ? atoi(argv[3]) : 0;
    if (delay < 1 || delay > 5000 || pollms < 0 || pollms > 5000)
        jstr("error", "usage: fences DELAY_MS(1..5000) POLL_MS(0..5000) NEVER(0|1)");
    else
        run(delay, pollms, never);
    end_obj();
    putchar('\n');
    fflush(stdout);
    return 0;
}
