/*
 * JSON on stdout for the kernel lab's guest programs (helpers/measure/kernel_vm/guest/<name>.c): each prints ONE
 * JSON object, which /init (init.sh) passes to the host between two marker lines.
 *
 *   obj("key") / end_obj(), arr("key") / end_arr()   (key NULL inside an array)
 *   jint, jbool, jstr, jerr (strerror of an errno), jfile_lines (a text file as a list of lines)
 *
 * Header-only (static functions): each program is one translation unit, built with gcc -static
 * by helpers/measure/kernel_vm/bundle.py.
 */
#ifndef KERNEL_LAB_JSON_H
#define KERNEL_LAB_JSON_H

#include <stdio.h>
#include <string.h>

static int first_stack[64];
static int depth;

static void sep(void) {
    if (depth > 0) {
        if (!first_stack[depth - 1]) putchar(',');
        first_stack[depth - 1] = 0;
    }
}
static void jstr_raw(const char *s) {
    putchar('"');
    for (; s && *s; s++) {
        unsigned char c = (unsigned char)*s;
        if (c == '"' || c == '\\') printf("\\%c", c);
        else if (c == '\n') fputs("\\n", stdout);
        else if (c == '\t') fputs("\\t", stdout);
        else if (c < 0x20 || c >= 0x7f) printf("\\u%04x", c);
        else putchar(c);
    }
    putchar('"');
}
static void key(const char *k) { sep(); if (k) { jstr_raw(k); putchar(':'); } }
static void open_(const char *k, char c) { key(k); putchar(c); first_stack[depth++] = 1; }
static void obj(const char *k) { open_(k, '{'); }
static void arr(const char *k) { open_(k, '['); }
static void end_obj(void) { depth--; putchar('}'); }
static void end_arr(void) { depth--; putchar(']'); }
static void jint(const char *k, long long v) { key(k); printf("%lld", v); }
static __attribute__((unused)) void jbool(const char *k, int v) { key(k); fputs(v ? "true" : "false", stdout); }
static void jstr(const char *k, const char *v) { key(k); jstr_raw(v); }
static __attribute__((unused)) void jerr(const char *k, int err) { key(k); jstr_raw(strerror(err)); }

/* a text file (debugfs, fdinfo, trace) as a JSON list of its lines, at most max_lines */
static void jfile_lines(const char *k, const char *path, int max_lines) {
    FILE *f = fopen(path, "r");
    arr(k);
    if (f) {
        char line[512];
        int n = 0;
        while (fgets(line, sizeof line, f) && n < max_lines) {
            line[strcspn(line, "\n")] = 0;
            jstr(NULL, line);
            n++;
        }
        fclose(f);
    }
    end_arr();
}

/* The first line of a small text file (a /proc entry) as a string member `k` ("" when unreadable):
 * the kernel release and version every guest program reports. */
static void jfile_line(const char *k, const char *path) {
    FILE *f = fopen(path, "r");
    char line[512] = "";
    if (f) { if (!fgets(line, sizeof line, f)) line[0] = 0; fclose(f); }
    line[strcspn(line, "\n")] = 0;
    jstr(k, line);
}

#endif
