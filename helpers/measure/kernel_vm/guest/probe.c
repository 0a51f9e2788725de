/*
 * The kernel lab's probe: runs as part of /init inside a Linux VM (helpers/measure/kernel_vm/guest/init.sh)
 * and prints ONE JSON object on stdout describing what real DRM ioctls returned.
 *
 *   probe gem [DRIVER...]   GEM handles, dumb buffers, the fake mmap offset, PRIME export and
 *                           import, dma-buf fdinfo/bufinfo/SET_NAME/SYNC, flink + GEM_OPEN,
 *                           GEM_CLOSE, for each DRM driver named (vgem, virtio_gpu), or
 *                           for every /dev/dri/card* when none is named (a learner's own machine)
 *   probe evict N F0,F1,.../G0,G1,...
 *                           per '/'-separated flip sequence: N 1024x768 XRGB8888 dumb buffers on bochs (16 MiB of VRAM,
 *                           drivers/gpu/drm/drm_gem_vram_helper.c on TTM); one legacy SETCRTC
 *                           per entry of the flip sequence; after each flip which buffer sits
 *                           where in VRAM (debugfs vram-mm + the first word of each range read
 *                           through BAR0), the TTM functions the flip called (ftrace), and at
 *                           the end whether every buffer still holds what was written
 *
 * Built statically by helpers/measure/kernel_vm/bundle.py (gcc -static, headers from
 * libdrm-dev). Every failure is reported in the JSON ("error"), never as a crash.
 */
#define _GNU_SOURCE
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/ioctl.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <sys/sysmacros.h>
#include <unistd.h>

#include <drm.h>
#include <drm_mode.h>
#include <linux/dma-buf.h>

#define TRACEFS "/sys/kernel/tracing"
#define DEBUGFS "/sys/kernel/debug"

#include "kl_json.h"

static int write_file(const char *path, const char *text) {
    int fd = open(path, O_WRONLY | O_TRUNC);
    if (fd < 0) return -errno;
    ssize_t n = write(fd, text, strlen(text));
    int err = n < 0 ? -errno : 0;
    close(fd);
    return err;
}

/* ---------------------------------------------------------------- DRM helpers ---------- */
static int drm_driver_name(int fd, char *name, size_t len) {
    struct drm_version v = {0};
    v.name = name;
    v.name_len = len - 1;
    memset(name, 0, len);
    return ioctl(fd, DRM_IOCTL_VERSION, &v);
}

/* the /dev/dri/cardN whose driver is `want` (open, O_RDWR), or -1 */
static int open_card(const char *want, char *path_out) {
    for (int i = 0; i < 8; i++) {
        char path[64], name[64];
        snprintf(path, sizeof path, "/dev/dri/card%d", i);
        int fd = open(path, O_RDWR | O_CLOEXEC);
        if (fd < 0) continue;
        if (drm_driver_name(fd, name, sizeof name) == 0 && strcmp(name, want) == 0) {
            strcpy(path_out, path);
            return fd;
        }
        close(fd);
    }
    return -1;
}

static int create_dumb(int fd, uint32_t w, uint32_t h, struct drm_mode_create_dumb *c) {
    memset(c, 0, sizeof *c);
    c->width = w;
    c->height = h;
    c->bpp = 32;
    return ioctl(fd, DRM_IOCTL_MODE_CREATE_DUMB, c);
}

static void *map_dumb(int fd, uint32_t handle, uint64_t size, uint64_t *offset) {
    struct drm_mode_map_dumb m = {.handle = handle};
    if (ioctl(fd, DRM_IOCTL_MODE_MAP_DUMB, &m)) return MAP_FAILED;
    *offset = m.offset;
    return mmap(NULL, size, PROT_READ | PROT_WRITE, MAP_SHARED, fd, m.offset);
}

static int gem_close(int fd, uint32_t handle) {
    struct drm_gem_close c = {.handle = handle};
    return ioctl(fd, DRM_IOCTL_GEM_CLOSE, &c);
}

static void fd_link(int fd, char *out, size_t len) {
    char p[64];
    snprintf(p, sizeof p, "/proc/self/fd/%d", fd);
    ssize_t n = readlink(p, out, len - 1);
    out[n > 0 ? n : 0] = 0;
}

/* the /proc/self/maps line that maps [addr, ...) */
static void maps_line(void *addr, char *out, size_t len) {
    FILE *f = fopen("/proc/self/maps", "r");
    out[0] = 0;
    if (!f) return;
    char line[512];
    unsigned long a = (unsigned long)addr;
    while (fgets(line, sizeof line, f)) {
        unsigned long lo, hi;
        if (sscanf(line, "%lx-%lx", &lo, &hi) == 2 && a >= lo && a < hi) {
            line[strcspn(line, "\n")] = 0;
            snprintf(out, len, "%s", line);
            break;
        }
    }
    fclose(f);
}

/* ---------------------------------------------------------------- probe gem ------------ */
static uint32_t pattern(uint32_t tag, size_t i) { return tag ^ (uint32_t)(i * 2654435761u); }

static void gem_walkthrough(const char *driver) {
    char card[64] = "";
    obj(NULL);
    jstr("driver", driver);
    int fd = open_card(driver, card);
    if (fd < 0) { jstr("error", "no /dev/dri/card* with this driver"); end_obj(); return; }
    jstr("node", card);
    struct drm_get_cap cap = {.capability = DRM_CAP_DUMB_BUFFER};
    jint("cap_dumb_buffer", ioctl(fd, DRM_IOCTL_GET_CAP, &cap) ? -1 : (long long)cap.value);
    cap = (struct drm_get_cap){.capability = DRM_CAP_PRIME};
    jint("cap_prime", ioctl(fd, DRM_IOCTL_GET_CAP, &cap) ? -1 : (long long)cap.value);

    /* two dumb buffers: handles are small per-file integers */
    struct drm_mode_create_dumb a, b;
    if (create_dumb(fd, 256, 256, &a) || create_dumb(fd, 640, 480, &b)) {
        jerr("error", errno); end_obj(); close(fd); return;
    }
    arr("dumb");
    obj(NULL); jint("width", 256); jint("height", 256); jint("handle", a.handle); jint("pitch", a.pitch);
    jint("size", (long long)a.size); end_obj();
    obj(NULL); jint("width", 640); jint("height", 480); jint("handle", b.handle); jint("pitch", b.pitch);
    jint("size", (long long)b.size); end_obj();
    end_arr();

    /* MAP_DUMB: the fake offset; mmap the device node at it; write, unmap, map again, read */
    uint64_t off = 0, off_b = 0;
    uint32_t *p = map_dumb(fd, a.handle, a.size, &off);
    obj("map_dumb");
    jint("offset", (long long)off);
    if (p == MAP_FAILED) { jerr("mmap_error", errno); end_obj(); end_obj(); close(fd); return; }
    size_t words = a.size / 4;
    for (size_t i = 0; i < words; i++) p[i] = pattern(0xC0FFEE00u, i);
    char line[512];
    maps_line(p, line, sizeof line);
    jstr("maps", line);
    munmap(p, a.size);
    void *pb = map_dumb(fd, b.handle, b.size, &off_b);
    jint("offset_second_buffer", (long long)off_b);
    if (pb != MAP_FAILED) munmap(pb, b.size);
    p = map_dumb(fd, a.handle, a.size, &off);
    size_t bad = 0;
    for (size_t i = 0; p != MAP_FAILED && i < words; i++) bad += p[i] != pattern(0xC0FFEE00u, i);
    jint("readback_mismatches", p == MAP_FAILED ? -1 : (long long)bad);
    if (p != MAP_FAILED) munmap(p, a.size);
    end_obj();

    /* PRIME export: handle -> dma-buf fd; a second export gives the same dma-buf */
    struct drm_prime_handle ex = {.handle = a.handle, .flags = DRM_CLOEXEC | DRM_RDWR};
    obj("prime_export");
    if (ioctl(fd, DRM_IOCTL_PRIME_HANDLE_TO_FD, &ex)) {
        jerr("error", errno); end_obj(); end_obj(); close(fd); return;
    }
    struct drm_prime_handle ex2 = {.handle = a.handle, .flags = DRM_CLOEXEC | DRM_RDWR};
    int ok2 = ioctl(fd, DRM_IOCTL_PRIME_HANDLE_TO_FD, &ex2) == 0;
    struct stat s1, s2;
    fstat(ex.fd, &s1);
    char link[256];
    fd_link(ex.fd, link, sizeof link);
    jint("fd", ex.fd);
    jstr("fd_link", link);
    jint("inode", (long long)s1.st_ino);
    jint("st_size", (long long)s1.st_size);
    if (ok2) {
        fstat(ex2.fd, &s2);
        jint("second_fd", ex2.fd);
        jint("second_inode", (long long)s2.st_ino);
        jbool("same_dma_buf", s1.st_ino == s2.st_ino && s1.st_dev == s2.st_dev);
        close(ex2.fd);
    }
    end_obj();

    /* dma-buf: name it, fdinfo, mmap (the name shows in /proc/self/maps), SYNC, bufinfo */
    obj("dma_buf");
    int rc = ioctl(ex.fd, DMA_BUF_SET_NAME, "course-buf");
    jint("set_name_rc", rc ? -errno : 0);
    char fdinfo[64];
    snprintf(fdinfo, sizeof fdinfo, "/proc/self/fdinfo/%d", ex.fd);
    jfile_lines("fdinfo", fdinfo, 20);
    uint32_t *d = mmap(NULL, a.size, PROT_READ, MAP_SHARED, ex.fd, 0);
    if (d == MAP_FAILED) {
        jerr("mmap_error", errno);
    } else {
        maps_line(d, line, sizeof line);
        jstr("maps", line);
        struct dma_buf_sync sy = {.flags = DMA_BUF_SYNC_START | DMA_BUF_SYNC_READ};
        jint("sync_start_rc", ioctl(ex.fd, DMA_BUF_IOCTL_SYNC, &sy) ? -errno : 0);
        bad = 0;
        for (size_t i = 0; i < words; i++) bad += d[i] != pattern(0xC0FFEE00u, i);
        sy.flags = DMA_BUF_SYNC_END | DMA_BUF_SYNC_READ;
        jint("sync_end_rc", ioctl(ex.fd, DMA_BUF_IOCTL_SYNC, &sy) ? -errno : 0);
        jint("readback_mismatches", (long long)bad);
    }
    jfile_lines("bufinfo", DEBUGFS "/dma_buf/bufinfo", 40);
    end_obj();

    /* PRIME import on the same file: the same GEM object, so the same handle */
    struct drm_prime_handle im = {.fd = ex.fd};
    obj("prime_import");
    jint("rc", ioctl(fd, DRM_IOCTL_PRIME_FD_TO_HANDLE, &im) ? -errno : 0);
    jint("handle", im.handle);
    jbool("same_handle", im.handle == a.handle);
    end_obj();

    /* flink: a global name; a second open file turns it into its own handle */
    struct drm_gem_flink fl = {.handle = b.handle};
    obj("flink");
    jint("rc", ioctl(fd, DRM_IOCTL_GEM_FLINK, &fl) ? -errno : 0);
    jint("name", fl.name);
    int fd2 = open(card, O_RDWR | O_CLOEXEC);
    struct drm_gem_open go = {.name = fl.name};
    jint("open_rc", fd2 >= 0 && ioctl(fd2, DRM_IOCTL_GEM_OPEN, &go) == 0 ? 0 : -errno);
    jint("second_file_handle", go.handle);
    jint("second_file_size", (long long)go.size);
    if (fd2 >= 0) close(fd2);
    end_obj();

    /* GEM_CLOSE: the handle goes; a second close is EINVAL; the dma-buf keeps the object */
    obj("gem_close");
    jint("first_rc", gem_close(fd, a.handle) ? -errno : 0);
    int r2 = gem_close(fd, a.handle);
    jint("second_rc", r2 ? -errno : 0);
    jstr("second_error", r2 ? strerror(errno) : "");
    if (d != MAP_FAILED) {
        bad = 0;
        for (size_t i = 0; i < words; i++) bad += d[i] != pattern(0xC0FFEE00u, i);
        jint("dma_buf_mapping_mismatches_after_close", (long long)bad);
        munmap(d, a.size);
    }
    close(ex.fd);
    struct drm_mode_destroy_dumb dd = {.handle = b.handle};
    jint("destroy_dumb_rc", ioctl(fd, DRM_IOCTL_MODE_DESTROY_DUMB, &dd) ? -errno : 0);
    end_obj();
    close(fd);
    end_obj();
}

/* ---------------------------------------------------------------- probe evict ---------- */
#define FB_W 1024
#define FB_H 768
#define MAX_FB 16
#define TAG(i) (0x4B4C0000u | ((uint32_t)(i) << 8))  /* 'KL', buffer index */

struct range { unsigned long start, end; int used; };

/* parse debugfs vram-mm ("0x...-0x...: N: used|free"), page units */
static int read_ranges(const char *path, struct range *r, int max) {
    FILE *f = fopen(path, "r");
    int n = 0;
    if (!f) return -1;
    char line[256];
    while (n < max && fgets(line, sizeof line, f)) {
        unsigned long lo, hi, cnt;
        char what[16];
        if (sscanf(line, "0x%lx-0x%lx: %lu: %15s", &lo, &hi, &cnt, what) == 4) {
            r[n].start = lo;
            r[n].end = hi;
            r[n].used = strcmp(what, "used") == 0;
            n++;
        }
    }
    fclose(f);
    return n;
}

/* the BAR0 (VRAM) of the first bochs display (PCI 1234:1111), mapped read-only */
static volatile uint32_t *map_bar0(size_t *size, char *where) {
    DIR *dir = opendir("/sys/bus/pci/devices");
    struct dirent *e;
    volatile uint32_t *bar = NULL;
    while (dir && (e = readdir(dir))) {
        char p[300], id[32] = "";
        snprintf(p, sizeof p, "/sys/bus/pci/devices/%s/vendor", e->d_name);
        FILE *f = fopen(p, "r");
        if (!f) continue;
        if (!fgets(id, sizeof id, f)) id[0] = 0;
        fclose(f);
        if (strncmp(id, "0x1234", 6)) continue;
        snprintf(p, sizeof p, "/sys/bus/pci/devices/%s/resource0", e->d_name);
        int fd = open(p, O_RDONLY | O_SYNC);
        struct stat st;
        if (fd < 0 || fstat(fd, &st)) { if (fd >= 0) close(fd); continue; }
        void *m = mmap(NULL, st.st_size, PROT_READ, MAP_SHARED, fd, 0);
        close(fd);
        if (m == MAP_FAILED) continue;
        *size = st.st_size;
        snprintf(where, 300, "%s", p);
        bar = m;
        break;
    }
    if (dir) closedir(dir);
    return bar;
}

static void evict(int nbufs, const int *seq, int nseq) {
    char card[64] = "", vram_mm[128] = "";
    obj(NULL);
    jstr("driver", "bochs-drm");
    arr("flips");
    for (int k = 0; k < nseq; k++) jint(NULL, seq[k]);
    end_arr();
    int fd = open_card("bochs-drm", card);
    if (fd < 0) { jstr("error", "no bochs-drm card"); end_obj(); return; }
    jstr("node", card);
    snprintf(vram_mm, sizeof vram_mm, DEBUGFS "/dri/%s/vram-mm", card + strlen("/dev/dri/card"));
    jint("set_master_rc", ioctl(fd, DRM_IOCTL_SET_MASTER, 0) ? -errno : 0);

    /* the CRTC, the connector and its 1024x768 mode */
    uint32_t crtcs[4], conns[4];
    struct drm_mode_card_res res = {0};
    res.crtc_id_ptr = (uintptr_t)crtcs; res.count_crtcs = 4;
    res.connector_id_ptr = (uintptr_t)conns; res.count_connectors = 4;
    if (ioctl(fd, DRM_IOCTL_MODE_GETRESOURCES, &res) || !res.count_crtcs || !res.count_connectors) {
        jstr("error", "GETRESOURCES found no CRTC or connector"); end_obj(); close(fd); return;
    }
    struct drm_mode_modeinfo modes[64], mode;
    /* count_modes 0 makes the kernel probe the connector (drm_mode_getconnector), then fetch */
    struct drm_mode_get_connector gc = {.connector_id = conns[0]};
    if (ioctl(fd, DRM_IOCTL_MODE_GETCONNECTOR, &gc)) { jerr("error", errno); end_obj(); close(fd); return; }
    gc = (struct drm_mode_get_connector){.connector_id = conns[0], .count_modes = 64};
    gc.modes_ptr = (uintptr_t)modes;
    if (ioctl(fd, DRM_IOCTL_MODE_GETCONNECTOR, &gc)) { jerr("error", errno); end_obj(); close(fd); return; }
    int found = 0;
    for (uint32_t i = 0; i < gc.count_modes && i < 64; i++)
        if (modes[i].hdisplay == FB_W && modes[i].vdisplay == FB_H) { mode = modes[i]; found = 1; break; }
    if (!found) { jstr("error", "the connector has no 1024x768 mode"); end_obj(); close(fd); return; }
    jint("crtc_id", crtcs[0]);
    jint("connector_id", conns[0]);

    /* the buffers: every word tagged with its buffer and its index, then a framebuffer each */
    uint32_t handle[MAX_FB], fb[MAX_FB];
    uint64_t size = 0, offset[MAX_FB];
    arr("buffers");
    for (int i = 0; i < nbufs; i++) {
        struct drm_mode_create_dumb c;
        if (create_dumb(fd, FB_W, FB_H, &c)) { jerr("error", errno); end_arr(); end_obj(); close(fd); return; }
        handle[i] = c.handle;
        size = c.size;
        uint32_t *p = map_dumb(fd, c.handle, c.size, &offset[i]);
        if (p == MAP_FAILED) { jerr("error", errno); end_arr(); end_obj(); close(fd); return; }
        for (size_t w = 0; w < c.size / 4; w++) p[w] = TAG(i) ^ (uint32_t)(w & 0xff) ^ (uint32_t)((w >> 8) << 16);
        /* the first word of every page: exactly the tag of (buffer, page) */
        for (size_t pg = 0; pg < c.size / 4096; pg++) p[pg * 1024] = TAG(i) | 0u;
        munmap(p, c.size);
        struct drm_mode_fb_cmd f = {.width = FB_W, .height = FB_H, .pitch = c.pitch, .bpp = 32, .depth = 24,
                                    .handle = c.handle};
        if (ioctl(fd, DRM_IOCTL_MODE_ADDFB, &f)) { jerr("error", errno); end_arr(); end_obj(); close(fd); return; }
        fb[i] = f.fb_id;
        obj(NULL); jint("index", i); jint("handle", c.handle); jint("pitch", c.pitch); jint("size", (long long)c.size);
        jint("fb_id", f.fb_id); jint("map_offset", (long long)offset[i]); end_obj();
    }
    end_arr();

    size_t bar_size = 0;
    char bar_path[300] = "";
    volatile uint32_t *bar = map_bar0(&bar_size, bar_path);
    jstr("bar0", bar_path);
    jint("bar0_size", (long long)bar_size);

    /* function tracing of the TTM and VRAM-helper calls a flip makes */
    /* one function per write: set_ftrace_filter takes one name per write(2) */
    static const char *const traced_fns[] = {"ttm_bo_validate", "ttm_bo_mem_space", "ttm_mem_evict_first",
                                             "ttm_bo_move_memcpy", "drm_gem_vram_pin", "drm_gem_vram_unpin",
                                             "ttm_bo_pin", "ttm_bo_unpin"};
    int traced = write_file(TRACEFS "/set_ftrace_filter", "") == 0;
    for (size_t k = 0; traced && k < sizeof traced_fns / sizeof *traced_fns; k++) {
        int tf = open(TRACEFS "/set_ftrace_filter", O_WRONLY | O_APPEND);
        traced = tf >= 0 && write(tf, traced_fns[k], strlen(traced_fns[k])) == (ssize_t)strlen(traced_fns[k]);
        if (tf >= 0) close(tf);
    }
    traced = traced && write_file(TRACEFS "/current_tracer", "function") == 0;
    jbool("ftrace", traced);

    arr("steps");
    for (int s = 0; s < nseq; s++) {
        int i = seq[s];
        if (traced) { write_file(TRACEFS "/trace", ""); write_file(TRACEFS "/tracing_on", "1"); }
        struct drm_mode_crtc sc = {0};
        sc.set_connectors_ptr = (uintptr_t)&conns[0];
        sc.count_connectors = 1;
        sc.crtc_id = crtcs[0];
        sc.fb_id = fb[i];
        sc.mode_valid = 1;
        sc.mode = mode;
        int rc = ioctl(fd, DRM_IOCTL_MODE_SETCRTC, &sc) ? -errno : 0;
        if (traced) write_file(TRACEFS "/tracing_on", "0");
        obj(NULL);
        jint("step", s);
        jint("show", i);
        jint("setcrtc_rc", rc);
        if (traced) {
            /* "task-pid [cpu] flags ts: func <-parent": keep "func <-parent" */
            FILE *f = fopen(TRACEFS "/trace", "r");
            char line[512];
            arr("calls");
            while (f && fgets(line, sizeof line, f)) {
                if (line[0] == '#') continue;
                char *c = strstr(line, ": ");
                if (!c) continue;
                c[strcspn(c, "\n")] = 0;
                jstr(NULL, c + 2);
            }
            if (f) fclose(f);
            end_arr();
        }
        struct range r[64];
        int n = read_ranges(vram_mm, r, 64);
        arr("vram");
        for (int k = 0; k < n; k++) {
            obj(NULL);
            jint("start_page", (long long)r[k].start);
            jint("end_page", (long long)r[k].end);
            jbool("used", r[k].used);
            if (r[k].used && bar && r[k].start * 4096 < bar_size) {
                uint32_t w = bar[r[k].start * 1024];
                jint("first_word", w);
                jint("buffer", (w & 0xFFFF00FFu) == 0x4B4C0000u ? (long long)((w >> 8) & 0xff) : -1);
            }
            end_obj();
        }
        end_arr();
        end_obj();
    }
    end_arr();

    /* switch the CRTC off (unpins the last buffer), then check every buffer's contents */
    struct drm_mode_crtc off = {.crtc_id = crtcs[0]};
    jint("crtc_off_rc", ioctl(fd, DRM_IOCTL_MODE_SETCRTC, &off) ? -errno : 0);
    arr("intact");
    for (int i = 0; i < nbufs; i++) {
        uint64_t o;
        uint32_t *p = map_dumb(fd, handle[i], size, &o);
        long long bad = -1;
        if (p != MAP_FAILED) {
            bad = 0;
            for (size_t w = 0; w < size / 4; w++) {
                uint32_t want = (w % 1024 == 0) ? TAG(i) : (TAG(i) ^ (uint32_t)(w & 0xff) ^ (uint32_t)((w >> 8) << 16));
                bad += p[w] != want;
            }
            munmap(p, size);
        }
        obj(NULL); jint("index", i); jint("mismatched_words", bad); end_obj();
    }
    end_arr();
    jfile_lines("vram_mm_after", vram_mm, 40);
    close(fd);
    end_obj();
}

/* ---------------------------------------------------------------- main ----------------- */
static void uname_into(void) {
    jfile_line("kernel_release", "/proc/sys/kernel/osrelease");
    jfile_line("kernel_version", "/proc/version");
}

int main(int argc, char **argv) {
    setvbuf(stdout, NULL, _IOFBF, 1 << 20);
    obj(NULL);
    uname_into();
    if (argc >= 2 && strcmp(argv[1], "gem") == 0) {
        jstr("run", "gem");
        arr("devices");
        for (int i = 2; i < argc; i++) gem_walkthrough(argv[i]);
        for (int i = 0; argc == 2 && i < 8; i++) {  /* no driver named: every card there is */
            char path[64], name[64];
            snprintf(path, sizeof path, "/dev/dri/card%d", i);
            int fd = open(path, O_RDWR | O_CLOEXEC);
            if (fd < 0) continue;
            int ok = drm_driver_name(fd, name, sizeof name) == 0;
            close(fd);
            if (ok) gem_walkthrough(name);
        }
        end_arr();
    } else if (argc == 4 && strcmp(argv[1], "evict") == 0) {
        /* one run per '/'-separated sequence, each on fresh buffers (closing the card frees them) */
        int n = atoi(argv[2]);
        char *all = argv[3], *one;
        jstr("run", "evict");
        arr("devices");
        while ((one = strsep(&all, "/"))) {
            int seq[256], k = 0, bad = 0;
            char *tok;
            while ((tok = strsep(&one, ",")) && k < 256) {
                int v = atoi(tok);
                if (v < 0 || v >= n) { bad = 1; break; }
                seq[k++] = v;
            }
            if (n < 1 || n > MAX_FB || k == 0 || bad) {
                obj(NULL); jstr("error", "usage: probe evict N(1..16) F0,F1,.../F0,... (each below N)"); end_obj();
                continue;
            }
            evict(n, seq, k);
        }
        end_arr();
    } else {
        jstr("error", "usage: probe gem DRIVER... | probe evict N F0,F1,...");
    }
    end_obj();
    putchar('\n');
    fflush(stdout);
    return 0;
}
